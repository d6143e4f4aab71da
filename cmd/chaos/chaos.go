package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/jobs"
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
	Faults []string
	// PGData is the data directory of the PostgreSQL under DatabaseURL, for pg-restart. It
	// restarts that server: never point it at a cluster anything else uses.
	PGData string
	// Lease is the replicas' SCHEDULER_LEASE_TIMEOUT (default: the service's, 5 s).
	Lease time.Duration
}

// Fault kinds (Config.Faults).
const (
	FaultKill      = "kill"
	FaultTerm      = "term"
	FaultPGRestart = "pg-restart"
	FaultTerminate = "terminate"
	FaultBlackhole = "blackhole"
)

// AllFaults lists every fault kind.
var AllFaults = []string{FaultKill, FaultTerm, FaultPGRestart, FaultTerminate, FaultBlackhole}

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
			if f != FaultPGRestart || c.PGData != "" {
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
	}
	return nil
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
	Settled            bool // a run that started after the last insert succeeded
	NoHandover         int  // faults after which no new leader was elected in time
	Handovers          []Handover
	RunsByStatus       map[string]int64
	Epoch              int64
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
	if !r.Settled {
		v = append(v, "no run succeeded after the last insert within the settle time")
	}
	return v
}

// jobsEnv runs the jobs under test on their chaos schedules and disables every other job of
// the registry.
func jobsEnv(run map[string]string) []string {
	var env []string
	for _, j := range jobs.Builtin(jobs.Settings{}, slog.New(slog.DiscardHandler)).All() {
		name := "SCHEDULER_JOB_" + strings.ToUpper(strings.ReplaceAll(j.Name(), "-", "_"))
		if schedule, ok := run[j.Name()]; ok {
			env = append(env, name+"_SCHEDULE="+schedule)
		} else {
			env = append(env, name+"_ENABLED=false")
		}
	}
	return env
}

// replica is one scheduler serve process slot; it is restarted under a new instance id.
// It reaches PostgreSQL through its own proxy, which the blackhole fault cuts.
type replica struct {
	n     int
	gen   int
	id    string
	cmd   *exec.Cmd
	done  chan struct{}
	proxy *proxy
	dbURL string // through the proxy
}

type runner struct {
	cfg      Config
	pool     *pgxpool.Pool
	rng      *rand.Rand
	mu       sync.Mutex
	replicas []*replica
	restarts int // pg-restarts so far, to alternate their modes

	epochsMu sync.Mutex
	epochs   map[int64]time.Time // every epoch seen, with its since
}

// Run runs the chaos phase, lets the cluster settle and checks the invariants in the
// database. It returns an error only when the run itself could not be carried out; broken
// invariants are in Result.Violations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	r := &runner{cfg: cfg, pool: pool, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		epochs: map[int64]time.Time{}}
	defer r.closeProxies()
	defer r.stopAll(syscall.SIGKILL)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go r.watchEpochs(watchCtx)

	if _, err := seed.Members(ctx, pool, 0); err != nil { // the demo tenants and plans
		return nil, err
	}
	for i := range cfg.Replicas {
		if err := r.start(i); err != nil {
			return nil, err
		}
	}
	cfg.Log.Info("replicas started", "n", cfg.Replicas, "seed", cfg.Seed, "faults", cfg.Faults)

	res := &Result{}
	chaosCtx, stopChaos := context.WithTimeout(ctx, cfg.Duration)
	defer stopChaos()
	var wg sync.WaitGroup
	var insertErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		res.MembersInserted, insertErr = r.insertMembers(chaosCtx)
	}()
	killErr := r.injectFaults(chaosCtx, res)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if insertErr != nil && !errors.Is(insertErr, context.DeadlineExceeded) {
		return nil, insertErr
	}
	if killErr != nil && !errors.Is(killErr, context.DeadlineExceeded) {
		return nil, killErr
	}

	cfg.Log.Info("chaos over; settling", "members_inserted", res.MembersInserted, "faults", len(res.Handovers))
	res.Settled = r.settle(ctx)
	if err := r.check(ctx, res); err != nil {
		return nil, err
	}
	r.stopAll(syscall.SIGTERM)
	return res, nil
}

// start launches replica slot i (again, after a kill) under a new instance id.
func (r *runner) start(i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.replicas) <= i {
		r.replicas = append(r.replicas, &replica{n: len(r.replicas)})
	}
	rep := r.replicas[i]
	rep.gen++
	rep.id = fmt.Sprintf("chaos-r%d-g%d", i, rep.gen)
	if rep.proxy == nil {
		u, err := url.Parse(r.cfg.DatabaseURL)
		if err != nil {
			return err
		}
		if rep.proxy, err = startProxy(u.Host); err != nil {
			return err
		}
		u.Host = rep.proxy.Addr()
		rep.dbURL = u.String()
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(r.cfg.WorkDir, fmt.Sprintf("replica-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.cfg.Binary, "serve")
	env := append(os.Environ(),
		"DATABASE_URL="+rep.dbURL,
		"SCHEDULER_HTTP_ADDR=127.0.0.1:"+port,
		"SCHEDULER_INSTANCE_ID="+rep.id,
		"SCHEDULER_LOG_FORMAT=json",
	)
	env = append(env, jobsEnv(r.cfg.Jobs)...)
	if r.cfg.Lease > 0 {
		env = append(env, "SCHEDULER_LEASE_TIMEOUT="+r.cfg.Lease.String())
	}
	cmd.Env = append(env, r.cfg.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start replica %d: %w", i, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	rep.cmd, rep.done = cmd, done
	return nil
}

// stopAll signals every live replica and waits for it (SIGKILL after 10 s).
func (r *runner) stopAll(sig syscall.Signal) {
	r.mu.Lock()
	reps := slices.Clone(r.replicas)
	r.mu.Unlock()
	for _, rep := range reps {
		if rep.cmd != nil && rep.cmd.Process != nil {
			_ = rep.cmd.Process.Signal(sig)
		}
	}
	for _, rep := range reps {
		if rep.done == nil {
			continue
		}
		select {
		case <-rep.done:
		case <-time.After(10 * time.Second):
			_ = rep.cmd.Process.Kill()
			<-rep.done
		}
	}
}

// leader reads the leader row.
func (r *runner) leader(ctx context.Context) (epoch int64, id string, since time.Time, err error) {
	var idp *string
	var sincep *time.Time
	err = r.pool.QueryRow(ctx, `SELECT epoch, instance_id, since FROM scheduler_leader WHERE id = 1`).Scan(&epoch, &idp, &sincep)
	if idp != nil {
		id = *idp
	}
	if sincep != nil {
		since = *sincep
	}
	return
}

// injectFaults strikes the current leader with a fault of a kind drawn at random every few
// seconds, measures the hand-over and repairs what the fault broke (restarts a killed
// replica, heals a blackhole), until ctx ends.
func (r *runner) injectFaults(ctx context.Context, res *Result) error {
	for {
		pause := r.cfg.KillMin + time.Duration(r.rng.Int64N(int64(r.cfg.KillMax-r.cfg.KillMin)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		epoch, id, _, err := r.leader(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.cfg.Log.Warn("reading the leader row failed; retrying", "err", err)
			continue
		}
		rep := r.byID(id)
		if rep == nil {
			r.cfg.Log.Info("no live leader to strike yet", "leader", id, "epoch", epoch)
			continue
		}
		fault := r.cfg.Faults[r.rng.IntN(len(r.cfg.Faults))]
		sent := time.Now()
		repair, name, err := r.strike(ctx, fault, rep)
		if err != nil {
			return err
		}
		h := r.measureHandover(ctx, epoch, sent)
		h.Fault = name
		if h.Err != "" && ctx.Err() == nil {
			res.NoHandover++
		}
		if ctx.Err() == nil || h.Err == "" {
			res.Handovers = append(res.Handovers, h)
		}
		r.cfg.Log.Info("fault", "fault", name, "instance", id, "epoch", epoch,
			"elected_after", h.Elected, "first_start_after", h.FirstStart, "beyond_due", h.BeyondDue, "err", h.Err)
		if err := repair(); err != nil {
			return err
		}
	}
}

// strike applies one fault to the leader rep and returns how to repair it once the
// hand-over is measured, and the fault's name in the report.
func (r *runner) strike(ctx context.Context, fault string, rep *replica) (repair func() error, name string, err error) {
	none := func() error { return nil }
	switch fault {
	case FaultKill, FaultTerm:
		sig := syscall.SIGKILL
		if fault == FaultTerm {
			sig = syscall.SIGTERM
		}
		if err := rep.cmd.Process.Signal(sig); err != nil {
			return nil, "", fmt.Errorf("signal %s: %w", rep.id, err)
		}
		return func() error {
			select {
			case <-rep.done:
			case <-time.After(10 * time.Second):
				_ = rep.cmd.Process.Kill()
				<-rep.done
			}
			return r.start(rep.n)
		}, fault, nil
	case FaultTerminate:
		// Every backend of the leader: its lock session and its running jobs' connections.
		var n int
		err := r.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = 'scheduler:' || $1 AND datname = current_database()`, rep.id).Scan(&n)
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("terminating the leader's backends failed", "err", err)
		}
		return none, fault, nil
	case FaultPGRestart:
		mode := "fast"
		if r.restarts%2 == 1 {
			mode = "immediate"
		}
		r.restarts++
		out, err := exec.CommandContext(ctx, "scripts/pg.sh", "restart", r.cfg.PGData, mode).CombinedOutput()
		if err != nil && ctx.Err() == nil {
			return nil, "", fmt.Errorf("restart PostgreSQL (-m %s): %v: %s", mode, err, out)
		}
		// The pool's connections died with the server; drop them rather than fail a check.
		r.pool.Reset()
		return none, fault + " " + mode, nil
	case FaultBlackhole:
		rep.proxy.Cut()
		return func() error { rep.proxy.Heal(); return nil }, fault, nil
	}
	return nil, "", fmt.Errorf("unknown fault %q", fault)
}

// watchEpochs records every epoch and its since, for the commit-order check.
func (r *runner) watchEpochs(ctx context.Context) {
	for ctx.Err() == nil {
		if epoch, _, since, err := r.leader(ctx); err == nil && epoch > 0 {
			r.epochsMu.Lock()
			if _, ok := r.epochs[epoch]; !ok {
				r.epochs[epoch] = since
			}
			r.epochsMu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (r *runner) closeProxies() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.replicas {
		if rep.proxy != nil {
			rep.proxy.Close()
		}
	}
}

func (r *runner) byID(id string) *replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.replicas {
		if rep.id == id {
			select {
			case <-rep.done:
				return nil
			default:
				return rep
			}
		}
	}
	return nil
}

// measureHandover waits for an epoch after old and for the first run of it to start.
func (r *runner) measureHandover(ctx context.Context, old int64, sent time.Time) Handover {
	var h Handover
	deadline := time.Now().Add(15 * time.Second)
	var epoch int64
	for {
		e, _, since, err := r.leader(context.WithoutCancel(ctx))
		if err == nil && e > old {
			epoch, h.Elected = e, since.Sub(sent)
			break
		}
		if time.Now().After(deadline) {
			h.Err = "no new leader within 15 s"
			return h
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var started time.Time
		var slot *time.Time
		err := r.pool.QueryRow(context.WithoutCancel(ctx), `
SELECT started_at, scheduled_at FROM job_runs
WHERE epoch = $1 AND started_at IS NOT NULL
ORDER BY started_at LIMIT 1`, epoch).Scan(&started, &slot)
		if err == nil {
			h.FirstStart = started.Sub(sent)
			// The part of the wait the hand-over caused: a slot that came due after the
			// fault could not have started before it came due anyway.
			due := sent
			if slot != nil && slot.After(sent) {
				due = *slot
			}
			h.BeyondDue = started.Sub(due)
			return h
		}
		time.Sleep(5 * time.Millisecond)
	}
	return h
}

// insertChaosMembersSQL inserts members $1..$2 of the first seed tenant, each with a plan
// change due today.
const insertChaosMembersSQL = `
WITH today AS (SELECT (now() AT TIME ZONE 'UTC')::date AS d),
plans AS (
    SELECT tenant_id, min(id) AS cur, max(id) AS nxt FROM membership_plans
    WHERE tenant_id = (SELECT min(id) FROM tenants) GROUP BY tenant_id
)
INSERT INTO members (tenant_id, email, status, membership_plan_id, membership_start_date, membership_end_date,
                     pending_membership_plan_id, pending_membership_start_date, pending_membership_end_date,
                     pending_membership_price)
SELECT p.tenant_id, 'chaos-' || i || '@chaos.example', 'ACTIVE', p.cur, today.d - 30, today.d + 30,
       p.nxt, today.d, today.d + 365, 49
FROM generate_series($1::int, $2::int) AS i, today, plans p
ON CONFLICT DO NOTHING`

// insertMembers inserts a few due members every 100 ms until ctx ends. An insert that fails
// (PostgreSQL restarting) is not retried: its members may or may not exist, and the count
// comes from the database at the end.
func (r *runner) insertMembers(ctx context.Context) (int64, error) {
	const perTick = 10
	var n int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-tick.C:
		}
		// Not cancelled by the end of the chaos phase: an insert that committed must be counted.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, err := r.pool.Exec(ictx, insertChaosMembersSQL, n+1, n+perTick)
		cancel()
		if err != nil {
			r.cfg.Log.Info("inserting members failed; going on", "err", err)
		}
		n += perTick
	}
}

// settle waits until a plan-change run that started after the last insert has succeeded.
func (r *runner) settle(ctx context.Context) bool {
	var after time.Time
	if err := r.pool.QueryRow(ctx, `SELECT now()`).Scan(&after); err != nil {
		return false
	}
	deadline := time.Now().Add(r.cfg.Settle)
	for time.Now().Before(deadline) {
		var ok bool // errors while PostgreSQL comes back are retried
		err := r.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM job_runs
               WHERE job = 'plan-change' AND status = 'succeeded' AND started_at > $1)`, after).Scan(&ok)
		if err == nil && ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// check counts the invariants' violations in the database.
func (r *runner) check(ctx context.Context, res *Result) error {
	const q = `
WITH today AS (SELECT (now() AT TIME ZONE 'UTC')::date AS d),
pc AS (SELECT min(scheduled_at) AS lo, max(scheduled_at) AS hi FROM job_runs
       WHERE job = 'plan-change' AND scheduled_at IS NOT NULL)
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM member_plan_change_history
        GROUP BY member_id, effective_date, change_type HAVING count(*) > 1) d),
    (SELECT count(*) FROM members, today
     WHERE pending_membership_plan_id IS NOT NULL AND pending_membership_start_date <= today.d),
    (SELECT count(*) FROM members m
     WHERE m.email LIKE 'chaos-%' AND m.pending_membership_plan_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM member_plan_change_history h
                       WHERE h.member_id = m.id AND h.change_type = 'APPLIED')),
    (SELECT count(*) FROM member_plan_change_history h JOIN members m ON m.id = h.member_id
     WHERE h.change_type = 'APPLIED' AND m.pending_membership_plan_id IS NOT NULL
       AND m.pending_membership_start_date = h.effective_date),
    (SELECT count(*) FROM (
        SELECT 1 FROM job_runs WHERE scheduled_at IS NOT NULL
        GROUP BY job, scheduled_at HAVING count(*) > 1) s),
    (SELECT count(*) FROM job_runs
     WHERE status = 'running'
       AND (epoch < (SELECT epoch FROM scheduler_leader) OR started_at < now() - interval '10 seconds')),
    -- guarantee 10 for an @every 1s job: every slot from the first to the last has a row
    (SELECT count(*) FROM pc, generate_series(pc.lo, pc.hi, interval '1 second') AS g (slot)
     WHERE NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.job = 'plan-change' AND r.scheduled_at = g.slot)),
    -- an abandoned run is re-run by its recovery, or by a later run of the job that succeeded
    (SELECT count(*) FROM job_runs a
     WHERE a.status = 'abandoned'
       AND NOT EXISTS (SELECT 1 FROM job_runs q WHERE q.recovers_run_id = a.id)
       AND NOT EXISTS (SELECT 1 FROM job_runs q WHERE q.job = a.job AND q.status = 'succeeded'
                       AND q.started_at > a.finished_at)),
    (SELECT count(*) FROM member_plan_change_history WHERE change_type = 'APPLIED'),
    (SELECT count(*) FROM members WHERE email LIKE 'chaos-%'),
    (SELECT epoch FROM scheduler_leader),
    current_setting('track_commit_timestamp')::bool`
	err := r.pool.QueryRow(ctx, q).Scan(&res.DuplicateHistory, &res.DueNotApplied, &res.AppliedWithoutHistory,
		&res.HistoryNotApplied, &res.SlotsClaimedTwice, &res.StuckRunning, &res.LostSlots, &res.UnrecoveredAbandoned,
		&res.MembersApplied, &res.MembersInserted, &res.Epoch, &res.CommitOrderChecked)
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	if res.CommitOrderChecked {
		if res.OldEpochCommits, err = r.oldEpochCommits(ctx); err != nil {
			return err
		}
	}
	rows, err := r.pool.Query(ctx, `SELECT status, count(*) FROM job_runs GROUP BY status ORDER BY status`)
	if err != nil {
		return err
	}
	res.RunsByStatus = map[string]int64{}
	var status string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		res.RunsByStatus[status] = n
		return nil
	})
	return err
}

// oldEpochCommits counts the rows a run wrote (its job_runs row, its history rows) that
// committed, by the server's commit timestamp, at or after the since of the first epoch
// seen after the run's (docs/design.md guarantee 8). A run that the next leader marked abandoned
// was last written by that leader, so it is left out. Epochs the watcher missed make the
// check laxer, never wrong.
func (r *runner) oldEpochCommits(ctx context.Context) (int64, error) {
	const q = `
WITH seen AS (SELECT * FROM unnest($1::bigint[], $2::timestamptz[]) AS s (epoch, since)),
next AS (
    SELECT e.epoch, min(s.since) AS since
    FROM (SELECT DISTINCT epoch FROM job_runs WHERE epoch IS NOT NULL) e
    JOIN seen s ON s.epoch > e.epoch
    GROUP BY e.epoch)
SELECT
    (SELECT count(*) FROM job_runs r JOIN next n USING (epoch)
     WHERE r.status <> 'abandoned' AND pg_xact_commit_timestamp(r.xmin) >= n.since)
  + (SELECT count(*) FROM member_plan_change_history h JOIN job_runs r ON r.id = h.run_id JOIN next n USING (epoch)
     WHERE pg_xact_commit_timestamp(h.xmin) >= n.since)`
	r.epochsMu.Lock()
	var epochs []int64
	var sinces []time.Time
	for e, s := range r.epochs {
		epochs = append(epochs, e)
		sinces = append(sinces, s)
	}
	r.epochsMu.Unlock()
	var n int64
	if err := r.pool.QueryRow(ctx, q, epochs, sinces).Scan(&n); err != nil {
		return 0, fmt.Errorf("check commit order: %w", err)
	}
	return n, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, _ := strings.Cut(l.Addr().String(), ":")
	return port, nil
}
