package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// chattyJob logs three lines through env.Log and reports fixed entity counts.
type chattyJob struct{ name string }

var chattyStats = jobcontract.Stats{Processed: 3, Changed: 2, SkippedLocked: 1}

func (j chattyJob) Name() string { return j.name }
func (j chattyJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 0 1 1 *", Timeout: time.Minute}
}
func (j chattyJob) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	for i := range 3 {
		env.Log.Info("chatty step", "step", i)
	}
	return chattyStats, nil
}

// syncBuffer is a log sink the node's goroutines and the test can share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes every JSON line written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		out = append(out, line)
	}
	require.NoError(t, sc.Err())
	return out
}

// observedNode starts one node with a JSON log and metrics, running chatty (yearly, its
// current slot already recorded, so neither catch-up nor the timers touch it) and tick
// (disabled and paused), and waits until it leads.
type observedNode struct {
	*node
	logs    *syncBuffer
	metrics *metrics.Metrics
	epoch   int64
}

// chattyLastSuccess is when the seeded run of chatty finished.
var chattyLastSuccess = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func startObservedNode(t *testing.T) *observedNode {
	t.Helper()
	db, url := newDB(t)
	chatty := jobConfig(t, "chatty", "0 0 1 1 *", time.Minute)
	tick := jobConfig(t, "tick", "@every 1s", time.Minute)
	tick.Enabled = false
	slot := chatty.Schedule.Prev(time.Now())
	storetest.Run(context.Background(), t, db.Pool, storetest.RunOpts{Job: "chatty", Status: store.StatusSucceeded,
		ScheduledAt: slot, StartedAt: chattyLastSuccess, FinishedAt: chattyLastSuccess})
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO job_settings (job, paused) VALUES ('tick', true)`)
	require.NoError(t, err)

	logs := &syncBuffer{}
	m := metrics.New()
	n := startNode(t, url, "obs-1", nodeOptions{
		jobs:    []config.Job{chatty, tick},
		log:     logging.New(logs, slog.LevelDebug, logging.FormatJSON),
		metrics: m,
	})
	term := awaitTerm(t, n)
	require.Equal(t, term.Epoch, awaitSignal(t, &n.en.testSignals.leading, "the term's start"))
	return &observedNode{node: n, logs: logs, metrics: m, epoch: term.Epoch}
}

// runChatty queues a manual run of chatty and waits until its end is recorded.
func (o *observedNode) runChatty(t *testing.T) int64 {
	t.Helper()
	id := queueRun(t, o.db, "chatty")
	for awaitSignal(t, &o.en.testSignals.finished, "the manual run to finish") != id {
	}
	return id
}

func TestEveryLineOfARunCarriesItsRunID(t *testing.T) {
	t.Parallel()
	o := startObservedNode(t)
	id := o.runChatty(t)

	var ofJob []map[string]any
	messages := map[string]int{}
	for _, line := range o.logs.lines(t) {
		if line["job"] == "chatty" {
			ofJob = append(ofJob, line)
			messages[line["msg"].(string)]++
		}
	}
	require.GreaterOrEqual(t, len(ofJob), 5, "started, three job lines, finished: %v", messages)
	assert.Equal(t, 3, messages["chatty step"], "the job's own lines")
	assert.Equal(t, 1, messages["run started"])
	assert.Equal(t, 1, messages["run finished"])
	for _, line := range ofJob {
		assert.Equal(t, float64(id), line["run_id"], "%v", line)
		assert.Equal(t, float64(o.epoch), line["epoch"], "%v", line)
		assert.Equal(t, "obs-1", line["instance_id"], "%v", line)
	}
}

func TestMetricsMoveAfterARun(t *testing.T) {
	t.Parallel()
	o := startObservedNode(t)

	// A new leader reports the cluster's history, not only what it ran itself.
	families := testmetrics.Scrape(t, o.metrics)
	assert.Equal(t, float64(chattyLastSuccess.Unix()),
		gaugeOrCounter(t, families, "scheduler_job_last_success_timestamp_seconds", map[string]string{"job_name": "chatty"}))
	assert.Equal(t, 0.0, gaugeOrCounter(t, families, "scheduler_job_paused", map[string]string{"job_name": "chatty"}))
	assert.Equal(t, 1.0, gaugeOrCounter(t, families, "scheduler_job_paused", map[string]string{"job_name": "tick"}),
		"a job paused before the election reads as paused, so it does not alert as stuck")
	assert.Equal(t, 1.0, gaugeOrCounter(t, families, "scheduler_is_leader", nil))
	assert.GreaterOrEqual(t, gaugeOrCounter(t, families, "scheduler_elections_total", nil), 1.0)

	before := time.Now()
	o.runChatty(t)
	families = testmetrics.Scrape(t, o.metrics)
	assert.Equal(t, 1.0, gaugeOrCounter(t, families, "scheduler_runs_total",
		map[string]string{"job_name": "chatty", "status": "succeeded", "trigger": "manual"}))
	duration := testmetrics.Series(families, "scheduler_run_duration_seconds", map[string]string{"job_name": "chatty"})
	require.NotNil(t, duration)
	assert.Equal(t, uint64(1), duration.GetHistogram().GetSampleCount())
	for outcome, want := range map[string]int64{
		"processed": chattyStats.Processed, "changed": chattyStats.Changed,
		"skipped_locked": chattyStats.SkippedLocked, "error": chattyStats.Errors,
	} {
		assert.Equal(t, float64(want), gaugeOrCounter(t, families, "scheduler_entities_total",
			map[string]string{"job_name": "chatty", "outcome": outcome}), outcome)
	}
	assert.Equal(t, 0.0, gaugeOrCounter(t, families, "scheduler_jobs_running", map[string]string{"job_name": "chatty"}))
	assert.GreaterOrEqual(t, gaugeOrCounter(t, families, "scheduler_job_last_success_timestamp_seconds",
		map[string]string{"job_name": "chatty"}), float64(before.Unix()), "the run's success replaces the history's")
	assert.Equal(t, 1.0, gaugeOrCounter(t, families, "scheduler_is_leader", nil))
	assert.GreaterOrEqual(t, gaugeOrCounter(t, families, "scheduler_elections_total", nil), 1.0)
	wait := testmetrics.Series(families, "scheduler_lock_wait_seconds", map[string]string{"lock": "leader_row"})
	require.NotNil(t, wait, "the election timed its epoch bump")
	assert.Equal(t, uint64(1), wait.GetHistogram().GetSampleCount())
}

func gaugeOrCounter(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	s := testmetrics.Series(families, name, labels)
	require.NotNil(t, s, "no series %s%v", name, labels)
	if s.Counter != nil {
		return s.Counter.GetValue()
	}
	return s.GetGauge().GetValue()
}
