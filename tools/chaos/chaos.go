package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/seed"
)

// Config is one chaos run.
type Config struct {
	// DatabaseURL is a migrated database the replicas and the run share, and nothing else.
	DatabaseURL string
	// Binary is a built scheduler (go build -o <tmp>/scheduler ./cmd/scheduler).
	Binary string
	// WorkDir receives the replicas' logs.
	WorkDir  string
	Replicas int           // default 3
	Duration time.Duration // of the chaos phase, default 2 minutes
	// KillMin and KillMax bound the random pause between two kills of the leader.
	KillMin, KillMax time.Duration
	// Settle bounds the wait, after the chaos phase, for a run that started after the last
	// member was inserted to succeed.
	Settle time.Duration
	Log    *slog.Logger
	// Seed makes the fault choice and pauses repeatable (0: random).
	Seed uint64
	// Jobs are the jobs the replicas run, with their schedules; every other job is disabled.
	// Default: plan-change every second.
	Jobs map[string]string
	// Env is added to the replicas' environment (a sender and its settings).
	Env []string
	// Faults are the kinds of fault injected, one at random each time (default: all of
	// them, pg-restart only when PGData is set):
	//   kill        SIGKILL the leader, then restart it
	//   term        SIGTERM the leader, then restart it
	//   pg-restart  restart PostgreSQL (pg_ctl -m fast and -m immediate in turn)
	//   terminate   pg_terminate_backend on every backend of the leader (its lock session
	//               and its running jobs' connections)
	//   blackhole   the leader's proxy drops every byte, connections kept open, until a new
	//               leader is elected (the silent partition)
	//   failover    the primary is killed (pg_ctl -m immediate) and its streaming standby
	//               (asynchronous) promoted; every proxy switches to it, and a new standby is
	//               built from it for the next failover (needs PGData and Standby)
	//   pause       SIGSTOP the leader past its lease, then SIGCONT: it must commit nothing
	//               under its old terms, and its partitions are led again meanwhile
	Faults []string
	// PGData is the data directory of the PostgreSQL under DatabaseURL, for pg-restart. It
	// restarts that server: never point it at a cluster anything else uses.
	PGData string
	// Standby is the data directory and StandbyPort the port of a streaming standby of the
	// PostgreSQL under PGData, for failover. Both servers are killed, promoted and rebuilt:
	// give only clusters of the chaos run's own (make chaos FAULTS=failover starts them).
	Standby     string
	StandbyPort string
	// Lease is the replicas' SCHEDULER_LEASE_TIMEOUT (default: the service's, 5 s).
	Lease time.Duration
	// Partitions is the replicas' SCHEDULER_PARTITIONS (default 1: one leader for all), and
	// RuntimeJobs the runtime HTTP jobs on "@every 1s" spread over them (partitions.go).
	Partitions, RuntimeJobs int
	// Script, when set, replaces the random faults on the leader: each strike hits the
	// replica it names, once, in order, once the replicas hold their fair shares
	// (scripted.go). The chaos phase then ends with the script; Duration bounds it.
	Script []Strike
}

// Fault kinds (Config.Faults).
const (
	FaultKill      = "kill"
	FaultTerm      = "term"
	FaultPGRestart = "pg-restart"
	FaultTerminate = "terminate"
	FaultBlackhole = "blackhole"
	FaultFailover  = "failover"
	FaultPause     = "pause"
)

// AllFaults lists every fault kind.
var AllFaults = []string{FaultKill, FaultTerm, FaultPGRestart, FaultTerminate, FaultBlackhole, FaultFailover, FaultPause}

func (c *Config) defaults() {
	if c.Replicas <= 0 {
		c.Replicas = 3
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.KillMin <= 0 {
		c.KillMin = 2 * time.Second
	}
	if c.KillMax < c.KillMin {
		c.KillMax = c.KillMin + 3*time.Second
	}
	if c.Settle <= 0 {
		c.Settle = time.Minute
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Jobs == nil {
		c.Jobs = map[string]string{"plan-change": "@every 1s"}
	}
	if len(c.Faults) == 0 {
		for _, f := range AllFaults {
			if (f != FaultPGRestart || c.PGData != "") && (f != FaultFailover || c.Standby != "") {
				c.Faults = append(c.Faults, f)
			}
		}
	}
}

// validate refuses fault kinds it does not know, and pg-restart without a cluster to restart.
func (c *Config) validate() error {
	for _, f := range c.Faults {
		if !slices.Contains(AllFaults, f) {
			return fmt.Errorf("unknown fault %q; known: %s", f, strings.Join(AllFaults, ","))
		}
		if f == FaultPGRestart && c.PGData == "" {
			return errors.New("the pg-restart fault needs the data directory of a PostgreSQL of its own (-pgdata; make chaos starts one)")
		}
		if f == FaultFailover && (c.PGData == "" || c.Standby == "" || c.StandbyPort == "") {
			return errors.New("the failover fault needs a primary and a streaming standby of its own " +
				"(-pgdata, -standby, -standby-port; make chaos FAULTS=failover starts them)")
		}
	}
	var errs []error
	for i, s := range c.Script {
		if s.Fault != FaultKill && s.Fault != FaultPause {
			errs = append(errs, fmt.Errorf("strike %d: fault %q; a script strikes with %s or %s", i+1, s.Fault, FaultKill, FaultPause))
		}
		if s.Replica < 0 || s.Replica >= c.Replicas {
			errs = append(errs, fmt.Errorf("strike %d: replica %d; the run has replicas 0 to %d", i+1, s.Replica, c.Replicas-1))
		}
	}
	if len(c.Script) > 0 && c.Partitions < 2 {
		errs = append(errs, errors.New("a script strikes partitions' holders: set Partitions to 2 or more"))
	}
	return errors.Join(errs...)
}

// Handover is one fault and what followed.
type Handover struct {
	// Fault is the kind of fault; pg-restart names its mode ("pg-restart fast").
	Fault string
	// Elected is the new epoch's since minus the moment the fault struck.
	Elected time.Duration
	// FirstStart is the first started_at of a run of the new epoch minus the moment the
	// fault struck (0: no run started within the wait).
	FirstStart time.Duration
	// BeyondDue is that first start minus the later of the fault and the run's slot: the
	// delay the hand-over added to the schedule.
	BeyondDue time.Duration
	// Err says why the hand-over was not measured (no new leader in time).
	Err string
}

// Result is what the database holds after the run, and the hand-overs seen.
type Result struct {
	MembersInserted int64 // chaos members in the database at the end
	MembersApplied  int64 // APPLIED history rows
	// Invariants: each must be 0.
	DuplicateHistory      int64 // (member, effective date, change type) with more than one history row
	DueNotApplied         int64 // members still due after the settle
	AppliedWithoutHistory int64 // members whose pending change was applied with no history row
	HistoryNotApplied     int64 // history rows for a change still pending
	SlotsClaimedTwice     int64 // (job, scheduled_at) with more than one run
	StuckRunning          int64 // runs still 'running' of an old epoch, or for more than 10 s
	LostSlots             int64 // plan-change slots between its first and last without a row
	UnrecoveredAbandoned  int64 // abandoned runs with no recovery run and no later success
	// OldEpochCommits counts rows written by a run (job_runs, history) that committed after
	// a newer epoch began, by the server's commit timestamps; CommitOrderChecked is false
	// when the server does not track them (track_commit_timestamp off).
	OldEpochCommits    int64
	CommitOrderChecked bool
	Settled            bool // a run that started after the last insert succeeded, and none was left running under a replaced term
	NoHandover         int  // faults after which no new leader was elected in time
	// SlowTakeovers counts pauses after which the new leader came later than the lease + 3 s.
	SlowTakeovers int
	// HostileOverstays counts hostile SQL runs, and backends, that outlived the run's
	// timeout by more than 5 s (hostile.go).
	HostileOverstays int64
	// HostileRuns counts the hostile loop's runs that started: that it ran.
	HostileRuns int64
	// The runtime jobs (partitions.go): slots between a job's first and last without a row,
	// keys called twice without an abandoned run to explain it, the keys called, and each
	// replica's runs. UnheldTooLong counts partitions that went longer than the lease + 3 s
	// from their holder's last renewal to their next term (MaxUnheld the longest).
	RuntimeLostSlots      int64
	KeysCalledTwice       int64
	RuntimeKeys           int64
	RuntimeRunsByInstance map[string]int64
	UnheldTooLong         int64
	MaxUnheld             time.Duration
	Handovers             []Handover
	RunsByStatus          map[string]int64
	Epoch                 int64
	// A scripted run's (scripted.go): the partitions each replica held once the shares
	// settled, the runtime runs each had started when the first strike came, and what
	// followed each strike.
	Holdings          map[string]int
	RunsBeforeStrikes map[string]int64
	Takeovers         []Takeover
}

// Violations lists the broken invariants; empty means the run proved the promise.
func (r *Result) Violations() []string {
	var v []string
	check := func(name string, n int64) {
		if n != 0 {
			v = append(v, fmt.Sprintf("%s: %d (must be 0)", name, n))
		}
	}
	check("duplicate history rows", r.DuplicateHistory)
	check("due members not applied", r.DueNotApplied)
	check("members applied without a history row", r.AppliedWithoutHistory)
	check("history rows for changes not applied", r.HistoryNotApplied)
	check("slots claimed twice", r.SlotsClaimedTwice)
	check("runs stuck in running", r.StuckRunning)
	check("slots lost", r.LostSlots)
	check("abandoned runs not recovered", r.UnrecoveredAbandoned)
	check("old-epoch commits after a newer epoch began", r.OldEpochCommits)
	check("faults not followed by a new leader", int64(r.NoHandover))
	check("paused leaders taken over later than the lease + 3 s", int64(r.SlowTakeovers))
	check("hostile SQL backends past their timeout + 5 s", r.HostileOverstays)
	check("runtime job slots lost", r.RuntimeLostSlots)
	check("keys called twice without an abandoned run", r.KeysCalledTwice)
	check("partitions without a holder for longer than the lease + 3 s", r.UnheldTooLong)
	if !r.Settled {
		v = append(v, "not settled within the settle time: no run succeeded after the last insert, or a run of a replaced term was left running")
	}
	return v
}

// Run runs the chaos phase, lets the cluster settle and checks the invariants in the
// database. It returns an error only when the run itself could not be carried out; broken
// invariants are in Result.Violations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		epochs: map[termKey]time.Time{}}
	defer r.closeProxies()
	// The run's own reads and writes go through a proxy too, which a failover switches.
	checkURL, err := r.proxied()
	if err != nil {
		return nil, err
	}
	if r.pool, err = pgxpool.New(ctx, checkURL); err != nil {
		return nil, err
	}
	defer r.pool.Close()
	defer r.stopAll(syscall.SIGKILL)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go r.watchEpochs(watchCtx)

	if _, err := seed.Members(ctx, r.pool, 0); err != nil { // the demo tenants and plans
		return nil, err
	}
	hostileEnv, dropHostile, err := r.setUpHostile(ctx, checkURL)
	if dropHostile != nil {
		defer dropHostile()
	}
	if err != nil {
		return nil, fmt.Errorf("the hostile SQL jobs: %w", err)
	}
	r.cfg.Env = append(r.cfg.Env, hostileEnv)
	for i := range cfg.Replicas {
		if err := r.start(i); err != nil {
			return nil, err
		}
	}
	cfg.Log.Info("replicas started", "n", cfg.Replicas, "seed", cfg.Seed, "faults", cfg.Faults)
	if cfg.Partitions > 1 {
		go r.watchPartitions(watchCtx)
	}
	if cfg.RuntimeJobs > 0 {
		stopReceiver, err := r.startRuntimeJobs(ctx)
		if err != nil {
			return nil, err
		}
		defer stopReceiver()
	}

	res := &Result{}
	if err := r.strikeWhileInserting(ctx, res); err != nil {
		return nil, err
	}
	cfg.Log.Info("chaos over; settling", "members_inserted", res.MembersInserted, "faults", len(res.Handovers))
	if err := r.checkAfter(ctx, res); err != nil {
		return nil, err
	}
	r.stopAll(syscall.SIGTERM)
	return res, nil
}

// strikeWhileInserting is the chaos phase: members come due all the time while the faults
// strike (the script's, or the leader at random), for cfg.Duration or until the script
// is over.
func (r *runner) strikeWhileInserting(ctx context.Context, res *Result) error {
	chaosCtx, stopChaos := context.WithTimeout(ctx, r.cfg.Duration)
	defer stopChaos()
	var wg sync.WaitGroup
	wg.Go(func() { res.MembersInserted = r.insertMembers(chaosCtx) })
	var err error
	if len(r.cfg.Script) > 0 {
		err = r.runScript(chaosCtx, res)
		stopChaos() // the script is over: the members' inserts stop too
	} else {
		err = r.injectFaults(chaosCtx, res)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// checkAfter lets the cluster settle and counts every invariant's violations into res.
func (r *runner) checkAfter(ctx context.Context, res *Result) error {
	res.Settled = r.settle(ctx)
	if err := r.check(ctx, res); err != nil {
		return err
	}
	if err := r.checkRuntimeJobs(ctx, res); err != nil {
		return err
	}
	r.epochsMu.Lock()
	res.MaxUnheld = r.maxUnheld
	if r.maxUnheld > r.lease()+3*time.Second {
		res.UnheldTooLong = 1
	}
	r.epochsMu.Unlock()
	var err error
	if res.HostileOverstays, err = r.hostileOverstays(ctx); err != nil {
		return err
	}
	res.HostileRuns, err = r.hostileRuns(ctx)
	return err
}
