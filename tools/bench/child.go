package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
)

// childFlag re-executes the bench binary to run one job body alone in a process, so that
// the process's peak RSS (rusage Maxrss, read by the parent after it exits) is the job's.
const childFlag = "-child"

// childResult is what a child prints on stdout.
type childResult struct {
	Nanos int64             `json:"nanos"` // the job body's run time, without process start and connect
	Stats jobcontract.Stats `json:"stats"`
	Error string            `json:"error,omitempty"`
}

// jobResult is a child's result with its peak RSS.
type jobResult struct {
	took     time.Duration
	stats    jobcontract.Stats
	maxRSSKB int64
}

// benchJob is the named job, on db: data-retention drops its days there, with no job's
// catch-up window to keep.
func benchJob(name string, db *store.DB) (jobcontract.Job, error) {
	switch name {
	case "plan-change":
		return jobs.NewPlanChange(), nil
	case "status-sync":
		return jobs.NewStatusSync(), nil
	case "rounds-open":
		return jobs.NewRoundsOpen(), nil
	case "data-retention":
		return jobs.NewDataRetention(jobs.RetentionSettings{}, jobs.RunDays{
			CatchUpWindows: func() map[string]time.Duration { return nil },
			Drop:           db.DropRunDays, // outside the fence, as the replica wires it
		}), nil
	case "abandon-recovery":
		return abandonJob()
	}
	// The appointment jobs send through the log sender, discarded, so that SQL dominates.
	pipe := jobs.NewPipeline(jobs.NewLogSender(slog.New(slog.DiscardHandler)), jobs.SendSettings{})
	appointments := jobs.AppointmentSettings{}
	switch name {
	case "appointment-confirmations":
		return jobs.NewAppointmentConfirmations(appointments, pipe), nil
	case "appointment-reminders-day":
		return jobs.NewAppointmentRemindersDay(appointments, pipe), nil
	case "appointment-reminders-hour":
		return jobs.NewAppointmentRemindersHour(appointments, pipe), nil
	case "appointment-start-notifications":
		return jobs.NewAppointmentStartNotifications(appointments, pipe), nil
	case "no-show-detection":
		return jobs.NewNoShowDetection(appointments), nil
	case "no-show-recovery":
		return jobs.NewNoShowRecovery(appointments, pipe), nil
	case "no-show-rate":
		return jobs.NewNoShowRate(appointments, pipe), nil
	}
	return nil, fmt.Errorf("no job %q in the bench", name)
}

// Child settings of abandon-recovery (benchMessages): where and how it sends.
const (
	envWebhookURL  = "BENCH_WEBHOOK_URL" // empty: the log sender, discarded
	envConcurrency = "BENCH_SEND_CONCURRENCY"
	envClaimBatch  = "BENCH_CLAIM_BATCH"
	envRunFor      = "BENCH_RUN_FOR" // the run is cancelled after this long (a Go duration)
	envNow         = "BENCH_NOW"     // the run's clock (RFC 3339); empty: the database's
)

func abandonJob() (jobcontract.Job, error) {
	concurrency, err := strconv.Atoi(os.Getenv(envConcurrency))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envConcurrency, err)
	}
	batch, err := strconv.Atoi(os.Getenv(envClaimBatch))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envClaimBatch, err)
	}
	var sender jobs.Sender = jobs.NewLogSender(slog.New(slog.DiscardHandler))
	if u := os.Getenv(envWebhookURL); u != "" {
		sender = jobs.NewWebhookSender(jobs.WebhookSettings{URL: u})
	}
	return jobs.NewAbandonRecovery(jobs.AbandonSettings{BatchSize: batch},
		jobs.NewPipeline(sender, jobs.SendSettings{Concurrency: concurrency})), nil
}

// childMain runs: bench -child <job> <database URL>. The job body is called directly with
// an Env fenced by epoch 1, as the jobs' own tests do; the database's leader row is at 1.
func childMain(args []string) int {
	res := runChild(args)
	_ = json.NewEncoder(os.Stdout).Encode(res)
	if res.Error != "" {
		return 1
	}
	return 0
}

func runChild(args []string) childResult {
	if len(args) != 2 {
		return childResult{Error: "usage: bench -child <job> <database URL>"}
	}
	ctx := context.Background()
	db, err := store.Open(ctx, args[1], store.Options{InstanceID: "bench-child", LeaseTimeout: config.LeaseTimeoutDefault, MaxConns: 4})
	if err != nil {
		return childResult{Error: err.Error()}
	}
	defer db.Close()
	body, err := benchJob(args[0], db)
	if err != nil {
		return childResult{Error: err.Error()}
	}
	now, err := db.Now(ctx)
	if v := os.Getenv(envNow); v != "" {
		now, err = time.Parse(time.RFC3339, v)
	}
	if err != nil {
		return childResult{Error: err.Error()}
	}
	env := &jobcontract.Env{
		RunID: 1,
		Tx: func(ctx context.Context, fn func(pgx.Tx) error) error {
			return db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error { return fn(tx) })
		},
		ReadOnly: db.ReadOnly(),
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Now:      now,
	}
	runCtx := ctx
	if d, err := time.ParseDuration(os.Getenv(envRunFor)); err == nil {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	start := time.Now()
	stats, err := body.Run(runCtx, env)
	res := childResult{Nanos: int64(time.Since(start)), Stats: stats}
	if err != nil && !(errors.Is(err, context.DeadlineExceeded) && runCtx != ctx) {
		res.Error = err.Error()
	}
	return res
}

// runJobChild runs job on the database at url in a child process, with env added to its
// environment, and returns its time, counts and peak RSS.
func runJobChild(ctx context.Context, job, url string, env ...string) (jobResult, error) {
	self, err := os.Executable()
	if err != nil {
		return jobResult{}, err
	}
	cmd := exec.CommandContext(ctx, self, childFlag, job, url)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res childResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		return jobResult{}, fmt.Errorf("child %s: %v (%v); stderr: %s", job, err, jerr, stderr.String())
	}
	if res.Error != "" {
		return jobResult{}, fmt.Errorf("child %s: %s; stderr: %s", job, res.Error, stderr.String())
	}
	if err != nil {
		return jobResult{}, fmt.Errorf("child %s: %w; stderr: %s", job, err, stderr.String())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var rss int64
	if ru != nil {
		rss = ru.Maxrss // KiB on Linux
	}
	return jobResult{took: time.Duration(res.Nanos), stats: res.Stats, maxRSSKB: rss}, nil
}
