// Package engine runs the business jobs while this replica leads: gocron is the timer that
// says when a slot is due, and a row in job_runs, claimed in a transaction fenced by the
// leader's epoch, is the record of what ran or was skipped (docs/design.md guarantees 2-5).
// It also recovers runs a dead leader left behind (and, for the whole term, runs of its own
// that nobody runs), catches up missed slots, and runs the manual runs any replica's API
// queued.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/notify/deliver"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/tracing"
)

const (
	// maxMissedDefault bounds the missed rows recorded per job at an election, so a job on
	// "@every 1s" after a day of downtime does not write 86 400 rows.
	maxMissedDefault = 100
	// retryMin and retryMax bound the backoff between attempts to claim a slot, to record
	// a slot missed and to record a run's end, while the database does not answer.
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
	// maxPartition is the highest partition (scheduler_partitions' check; config's
	// SCHEDULER_PARTITIONS is at most 1024).
	maxPartition = 1023
)

// Config configures an Engine.
type Config struct {
	// Partition is the partition the engine leads: it leads the terms whose Partition it is
	// (docs/design.md, "Partitions"). Partition 0's engine, the coordinator's, runs the
	// built-in jobs (Jobs) and the cluster-wide duties (the day partitions of job_runs, the
	// notifications' delivery) besides partition 0's runtime jobs; an engine of p ≥ 1 runs
	// only the runtime jobs of partition p, and Jobs must be empty. A one-partition cluster
	// has only partition 0's.
	Partition int
	DB        *store.DB
	Notifier  *pglisten.Notifier // wakes the queue and the definition watch
	Registry  *jobcontract.Registry
	// Jobs is the validated per-job configuration; every name must be in Registry.
	Jobs       []config.Job
	InstanceID string
	Log        *slog.Logger
	// PollInterval is how often the leader looks for queued runs and cancel requests
	// besides being woken by NOTIFY; the fallback for a lost notification.
	PollInterval time.Duration
	// MaxMissed bounds the missed rows recorded per job when a leader takes over.
	MaxMissed int
	// RescueInterval is how often the leader looks for runs of its term that nobody runs.
	RescueInterval time.Duration
	// SlotAuditInterval is how often the leader checks that every due slot has its row,
	// and SlotAuditGrace how long after its time a slot may be without one (slotaudit.go).
	SlotAuditInterval, SlotAuditGrace time.Duration
	// FailoverWindow is how far before its election a term that finds the database failed
	// over repairs unrecorded slots (config's SCHEDULER_FAILOVER_WINDOW; 0: its default).
	FailoverWindow time.Duration
	// Metrics, when set, counts runs and their outcomes.
	Metrics *metrics.Metrics
	// Runtime, when set, makes the leader run the jobs users defined (job_definitions).
	Runtime *runtimejob.Runtime
	// PublicURL is where a callback job's target reaches the API (SCHEDULER_PUBLIC_URL).
	PublicURL string
	// Notifications, when set, sends the jobs' notifications while this replica leads.
	Notifications *deliver.Service
	// Tracing exports the spans of claims and runs (tracing.go); nil: off.
	Tracing *tracing.Tracing
	// Gate bounds the run bodies of the replica, shared by its engines (bodies.go); nil:
	// the engine makes its own, of config.RunConcurrencyDefault places.
	Gate *Gate
}

// entry is one configured job: a built-in job, or one version of a runtime job's
// definition.
type entry struct {
	job  jobcontract.Job
	conf config.Job
	// def is the runtime job's checked definition; nil for a built-in job.
	def *runtimejob.Checked
	// version is the runtime definition's version, and since when it holds (database
	// clock): the slots before since belonged to an earlier definition.
	version int64
	since   time.Time
	// waiting is set while a slot of a queue-one or replace job waits for the job's active
	// run to end.
	waiting atomic.Bool
	// spentFrom, once the job's max_runs slots ran, is the first slot found after them, in
	// Unix seconds (limits.go); 0 until then.
	spentFrom atomic.Int64
}

// overlap is the job's overlap policy (built-in jobs skip).
func (en *entry) overlap() string {
	if en.def == nil {
		return runtimejob.OverlapSkip
	}
	return en.def.Def.Overlap
}

// waitsForIdle reports the overlap policies whose slot waits for the job's active run to end
// (queue-one), or ends it and waits (replace), rather than being skipped.
func (en *entry) waitsForIdle() bool {
	return en.overlap() == runtimejob.OverlapQueueOne || en.overlap() == runtimejob.OverlapReplace
}

// gateNamespace is the namespace whose share of the replica's run bodies the job's runs
// take (bodies.go): its own for a runtime job, "" for the built-in jobs.
func (en *entry) gateNamespace() string {
	if en.def == nil {
		return ""
	}
	return namespace.Of(en.def.Def.Key())
}

// runningRun is a run executing on this replica: its job, for the log, and how to cancel it.
type runningRun struct {
	job    string
	cancel context.CancelCauseFunc
}

// Engine runs jobs during this replica's terms of leadership.
type Engine struct {
	conf  Config
	log   *slog.Logger
	jobs  map[string]*entry
	order []*entry // enabled jobs, in configuration order
	// catchUps are every configured job's catch-up windows, which CatchUpWindows hands
	// data-retention so that it keeps the rows catch-up needs.
	catchUps map[string]time.Duration

	runs     sync.WaitGroup // every run goroutine
	finishes *finisher      // records the runs' ends in batches

	mu      sync.Mutex
	running map[int64]runningRun // by run id
	// idle has, per job with a queue-one slot waiting, a channel closed when a run of the
	// job ends.
	idle map[string]chan struct{}
	// deployment is the database's deployment id, once read (deploymentID).
	deploymentMu sync.Mutex
	deployment   uuid.UUID

	// runtime are the runtime jobs' entries, by name, replaced as their definitions change;
	// the built-in ones (jobs, order) never change.
	runtimeMu sync.RWMutex
	runtime   map[string]*entry
	// reloading makes reloads of a definition (the watch's, and the queue's for a run of a
	// job it has not loaded yet) one at a time, so a slower reload never installs an older
	// version over a newer one.
	reloading sync.Mutex

	// claiming is held for reading from before a run becomes running in the database
	// (a claim, a pick-up) until it is in running, and for writing by the rescuer while it
	// compares the database with running: so a run the rescuer sees unowned is one whose
	// goroutine is really missing, never one about to be tracked.
	claiming sync.RWMutex

	// claimAheadFrom is the shortest period whose slots are claimed ahead (claimAheadFrom in
	// timers.go); tests lower it to exercise early claims on fast schedules.
	claimAheadFrom time.Duration

	clock       clock
	testSignals testSignals
}

// New checks conf once, so a misconfiguration stops the replica at start with an error
// that names the job and the setting, instead of failing at the first tick.
func New(conf Config) (*Engine, error) {
	if conf.DB == nil || conf.Registry == nil || conf.Notifier == nil {
		return nil, errors.New("engine: Config.DB, Config.Notifier and Config.Registry are required")
	}
	if conf.InstanceID == "" {
		return nil, errors.New("engine: Config.InstanceID is required")
	}
	if conf.Partition < 0 || conf.Partition > maxPartition {
		return nil, fmt.Errorf("engine: Config.Partition %d must be from 0 to %d (SCHEDULER_PARTITIONS less one)", conf.Partition, maxPartition)
	}
	if conf.Partition != 0 && len(conf.Jobs) > 0 {
		return nil, fmt.Errorf("engine: partition %d's engine was given %d built-in jobs; they run on partition 0's engine only", conf.Partition, len(conf.Jobs))
	}
	if conf.Log == nil {
		conf.Log = slog.Default()
	}
	if conf.PollInterval <= 0 {
		return nil, fmt.Errorf("engine: Config.PollInterval %s must be above 0 (config's SCHEDULER_POLL_INTERVAL)", conf.PollInterval)
	}
	if conf.MaxMissed <= 0 {
		conf.MaxMissed = maxMissedDefault
	}
	if conf.RescueInterval <= 0 {
		conf.RescueInterval = rescueIntervalDefault
	}
	if conf.SlotAuditInterval <= 0 {
		conf.SlotAuditInterval = slotAuditIntervalDefault
	}
	if conf.SlotAuditGrace <= 0 {
		conf.SlotAuditGrace = slotAuditGraceDefault
	}
	if conf.Gate == nil {
		conf.Gate = NewGate(0, conf.Metrics)
	}
	e := &Engine{
		claimAheadFrom: claimAheadFrom,
		conf:           conf,
		log:            conf.Log.With("instance_id", conf.InstanceID),
		jobs:           map[string]*entry{},
		running:        map[int64]runningRun{},
		catchUps:       map[string]time.Duration{},
		idle:           map[string]chan struct{}{},
		runtime:        map[string]*entry{},
	}
	e.finishes = newFinisher(conf.DB, callsQueued(conf.Runtime), conf.InstanceID, e.jobsPaused)
	var problems []error
	for _, jc := range conf.Jobs {
		job, ok := conf.Registry.Get(jc.Name)
		switch {
		case !ok:
			problems = append(problems, fmt.Errorf("job %q is configured but not registered; known jobs: %s", jc.Name, knownJobs(conf.Registry)))
			continue
		case e.jobs[jc.Name] != nil:
			problems = append(problems, fmt.Errorf("job %q is configured twice", jc.Name))
			continue
		case jc.Schedule == nil:
			problems = append(problems, fmt.Errorf("job %q has no schedule", jc.Name))
		case jc.Timeout <= 0:
			problems = append(problems, fmt.Errorf("job %q: timeout %s must be above 0 (set its maximum runtime, e.g. SCHEDULER_JOB_<NAME>_TIMEOUT=10m)", jc.Name, jc.Timeout))
		case jc.Catchup < 0 || jc.MinGap < 0:
			problems = append(problems, fmt.Errorf("job %q: catch-up window %s and minimum gap %s must not be negative", jc.Name, jc.Catchup, jc.MinGap))
		}
		en := &entry{job: job, conf: jc}
		e.jobs[jc.Name] = en
		e.catchUps[jc.Name] = jc.Catchup
		if jc.Enabled {
			e.order = append(e.order, en)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("engine: invalid job configuration: %w", errors.Join(problems...))
	}
	return e, nil
}

func knownJobs(r *jobcontract.Registry) string {
	var names []string
	for _, j := range r.All() {
		names = append(names, j.Name())
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// Run leads each term received from terms until ctx is cancelled, then waits for the
// runs it started (they are cancelled with their term).
func (e *Engine) Run(ctx context.Context, terms <-chan leader.Term) {
	// The finisher outlives every run: the last ones record their ends after ctx ended.
	finishing, stop := context.WithCancel(context.Background())
	go e.finishes.run(finishing)
	defer stop()
	defer e.runs.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case term := <-terms:
			if term.Ctx.Err() == nil {
				e.lead(ctx, term)
			}
		}
	}
}

// lead does the leader's work for one term and returns when the term (or ctx) ends:
// recover what the previous leader left running, catch up missed slots, then fire slots,
// run queued runs and rescue runs nobody runs, for the whole term.
func (e *Engine) lead(ctx context.Context, term leader.Term) {
	termCtx, cancel := context.WithCancel(term.Ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	log := e.log.With("epoch", term.Epoch)
	if term.Partition != e.conf.Partition {
		// A wiring bug: this engine's services would read and write another partition's runs.
		log.Error("a term of another partition was handed to this engine; it is not led here",
			"term_partition", term.Partition, "engine_partition", e.conf.Partition)
		return
	}
	if e.conf.Partition != 0 {
		log = log.With("partition", e.conf.Partition)
	}
	log.Info("leading: recovering abandoned runs, catching up, starting timers")

	e.loadDefinitions(termCtx, log)
	defer func() { // last: after the timers and the services have stopped
		e.dropDefinitions()
		e.testSignals.stopped.Send(term.Epoch)
	}()
	e.loadJobHistories(termCtx, log)
	svc := e.services(term, log)
	if svc.runDays != nil {
		svc.runDays.pass(termCtx)
	}
	svc.rescuer.first(termCtx)
	caughtUpTo, repairs := svc.catchUp.run(termCtx)
	timers, err := e.startTimers(termCtx, term, log, caughtUpTo)
	if err != nil {
		// Without timers this replica would hold leadership and run nothing: make the
		// failure loud. It is a bug (schedules were validated), not an operating condition.
		log.Error("starting the timers failed; scheduled runs will not fire this term", "error", err)
	} else {
		defer timers.stop(log)
		e.repairFailover(termCtx, term, log, timers.claims, repairs)
	}
	e.testSignals.leading.Send(term.Epoch)

	// Queued runs and cancel requests wake the queue; so does the notifier's resync.
	wake := make(chan struct{}, 1)
	defer e.conf.Notifier.Listen(store.RunsChannel, pglisten.Wake(wake))()
	// The term's services, each a loop until the term ends (services.go); wg.Go counts
	// them, so adding one cannot leave the count behind (it did once, and the term's end
	// panicked).
	var wg sync.WaitGroup
	for _, s := range svc.withLoops(e, term, log, timers).loops {
		wg.Go(func() { s.run(termCtx) })
	}
	e.queueLoop(termCtx, term, log, timers, wake)
	wg.Wait()
	log.Info("stopped leading")
}

// startTimers creates this term's gocron scheduler: one timer per schedule, shared by the
// enabled jobs on it (timers.add), firing at their slots. A firing only names the slot; the
// claim, batched with every other slot due then (claimer), decides whether each runs.
// Slots that came due between the catch-up and the timers' start are ticked here, so the
// hand-over leaves no slot without a row; each tick in its own goroutine, as gocron's are,
// since a tick retries while the database does not answer.
func (e *Engine) startTimers(ctx context.Context, term leader.Term, log *slog.Logger, caughtUpTo map[string]time.Time) (*timers, error) {
	s, err := gocron.NewScheduler(gocron.WithLocation(time.UTC), gocron.WithLogger(log))
	if err != nil {
		return nil, err
	}
	t := &timers{e: e, s: s, ctx: ctx, term: term, claims: newClaimer(e, term), log: log,
		groups: map[string]*timerGroup{}, once: map[string]uuid.UUID{}}
	e.runs.Add(1)
	go func() {
		defer e.runs.Done()
		t.claims.run(ctx)
	}()
	enabled := e.enabledEntries()
	for _, en := range enabled {
		if err := t.add(en); err != nil {
			_ = s.Shutdown()
			return nil, err
		}
	}
	s.Start()
	for _, en := range enabled {
		if from, ok := caughtUpTo[en.conf.Name]; ok {
			t.tickDue(en, from)
		}
	}
	return t, nil
}
