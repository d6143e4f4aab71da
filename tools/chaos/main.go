// Command chaos runs several `scheduler serve` replicas against a throwaway database and
// strikes the leader with a fault every few seconds (-faults: SIGKILL, SIGTERM, a PostgreSQL
// restart, its backends terminated, a silent blackhole between it and PostgreSQL, a failover
// of PostgreSQL to its asynchronous streaming standby), while
// members keep coming due and plan-change is scheduled every second. Afterwards it lets the
// cluster settle and checks in the database that every due member was applied exactly once,
// that no slot was claimed twice or lost, that no run was left running or unrecovered and
// that nothing of an old epoch committed after a newer one began; it prints the hand-over
// times per fault and exits non-zero when an invariant broke (make chaos; -duration,
// default 2m).
//
// Loopback only, bounded by -duration plus the settle time, and it stops by itself.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/store"
)

func main() {
	duration := flag.Duration("duration", 2*time.Minute, "length of the chaos phase")
	replicas := flag.Int("replicas", 3, "scheduler serve processes")
	binary := flag.String("binary", "", "scheduler binary (default: go build ./cmd/scheduler into a temporary directory)")
	seed := flag.Uint64("seed", 0, "random seed for the faults (0: random)")
	keep := flag.Bool("keep", false, "keep the database and the replicas' logs for inspection")
	faults := flag.String("faults", "", "comma-separated fault kinds, one drawn at random each time: "+
		strings.Join(AllFaults, ",")+" (default: all; pg-restart only with -pgdata)")
	pgdata := flag.String("pgdata", "", "data directory of the PostgreSQL under BENCH_DATABASE_URL, for pg-restart; "+
		"it is restarted: give only a cluster of the chaos run's own (make chaos does)")
	standby := flag.String("standby", "", "data directory of a streaming standby of -pgdata's server, for failover; "+
		"it is promoted and rebuilt: give only a cluster of the chaos run's own (make chaos FAULTS=failover does)")
	standbyPort := flag.String("standby-port", "", "the standby's port, on BENCH_DATABASE_URL's host")
	lease := flag.Duration("lease", 0, "the replicas' SCHEDULER_LEASE_TIMEOUT (default: the service's)")
	partitions := flag.Int("partitions", 16, "the replicas' SCHEDULER_PARTITIONS")
	runtimeJobs := flag.Int("runtime-jobs", 50, "runtime HTTP jobs on @every 1s, spread over the partitions")
	flag.Parse()
	var kinds []string
	if *faults != "" {
		kinds = strings.Split(*faults, ",")
	}
	os.Exit(mainErr(Config{Duration: *duration, Replicas: *replicas, Binary: *binary, Seed: *seed,
		Faults: kinds, PGData: *pgdata, Standby: *standby, StandbyPort: *standbyPort, Lease: *lease,
		Partitions: *partitions, RuntimeJobs: *runtimeJobs}, *keep))
}

func mainErr(cfg Config, keep bool) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	admin := os.Getenv("BENCH_DATABASE_URL")
	if admin == "" {
		admin = os.Getenv("DATABASE_URL")
	}
	if admin == "" {
		log.Error("set BENCH_DATABASE_URL (or DATABASE_URL) to a PostgreSQL whose user may create databases, or run `make chaos`, which starts a throwaway one")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	work, err := os.MkdirTemp("", "scheduler-chaos-")
	if err != nil {
		log.Error("temp dir", "error", err)
		return 1
	}
	if !keep {
		defer os.RemoveAll(work)
	}
	if cfg.Binary == "" {
		cfg.Binary = filepath.Join(work, "scheduler")
		if err := buildScheduler(ctx, cfg.Binary); err != nil {
			log.Error("build the scheduler", "error", err)
			return 1
		}
	}
	dbURL, drop, err := createDatabase(ctx, admin)
	if err != nil {
		log.Error("create the chaos database", "error", err)
		return 1
	}
	if !keep {
		defer drop()
	}

	cfg.DatabaseURL, cfg.WorkDir, cfg.Log = dbURL, work, log
	res, err := Run(ctx, cfg)
	if err != nil {
		log.Error("chaos run failed", "error", err, "logs", work)
		return 1
	}
	printResult(os.Stdout, res)
	if keep {
		fmt.Printf("\ndatabase %s and replica logs in %s kept\n", dbURL, work)
	}
	if v := res.Violations(); len(v) > 0 {
		fmt.Println("\nFAIL: invariants broken:")
		for _, x := range v {
			fmt.Println("  -", x)
		}
		return 1
	}
	fmt.Println("\nPASS: every invariant held")
	return 0
}

// buildScheduler builds ./cmd/scheduler: the working directory is the repository's root
// (scripts/bench.sh runs the chaos command there; it runs scripts/pg.sh from there too).
func buildScheduler(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/scheduler")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// createDatabase creates and migrates a database named chaos_<random> on admin's cluster and
// returns its URL and a function that drops it.
func createDatabase(ctx context.Context, admin string) (string, func(), error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "chaos_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, err
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
			c.Close(ctx)
		}
	}
	u, err := url.Parse(admin)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	m, err := store.NewMigrator(u.String())
	if err == nil {
		err = m.Up()
		m.Close()
	}
	if err != nil {
		drop()
		return "", nil, err
	}
	return u.String(), drop, nil
}

func printResult(w io.Writer, r *Result) {
	fmt.Fprintf(w, "chaos run: %d members inserted, %d plan changes applied, final epoch %d\n",
		r.MembersInserted, r.MembersApplied, r.Epoch)
	fmt.Fprintf(w, "runs by status: %v\n", r.RunsByStatus)
	fmt.Fprintf(w, "hostile SQL loop runs: %d\n", r.HostileRuns)
	if r.RuntimeKeys > 0 {
		fmt.Fprintf(w, "runtime jobs: %d keys called; runs by replica %v; longest a partition went unheld: %s\n",
			r.RuntimeKeys, r.RuntimeRunsByInstance, r.MaxUnheld.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "\ninvariants (each must be 0):\n")
	for _, x := range []struct {
		name string
		n    int64
	}{
		{"duplicate history rows", r.DuplicateHistory},
		{"due members not applied", r.DueNotApplied},
		{"members applied without a history row", r.AppliedWithoutHistory},
		{"history rows for changes not applied", r.HistoryNotApplied},
		{"slots claimed twice", r.SlotsClaimedTwice},
		{"slots lost (no row)", r.LostSlots},
		{"runs stuck in running", r.StuckRunning},
		{"abandoned runs not recovered", r.UnrecoveredAbandoned},
		{"faults not followed by a new leader", int64(r.NoHandover)},
		{"paused leaders taken over after lease + 3 s", int64(r.SlowTakeovers)},
		{"hostile SQL backends past their timeout + 5 s", r.HostileOverstays},
		{"runtime job slots lost", r.RuntimeLostSlots},
		{"keys called twice without an abandoned run", r.KeysCalledTwice},
		{"partitions unheld longer than the lease + 3 s", r.UnheldTooLong},
	} {
		fmt.Fprintf(w, "  %-45s %d\n", x.name, x.n)
	}
	if r.CommitOrderChecked {
		fmt.Fprintf(w, "  %-45s %d\n", "old-epoch commits after a newer epoch began", r.OldEpochCommits)
	} else {
		fmt.Fprintf(w, "  %-45s not checked (track_commit_timestamp is off)\n", "old-epoch commits after a newer epoch began")
	}
	fmt.Fprintf(w, "  %-45s %v\n", "settled (a run after the last insert, none stuck)", r.Settled)
	fmt.Fprintf(w, "\nhand-overs by fault: fault → new epoch's since (elected); → first run start of the new epoch;\n"+
		"that start − the later of the fault and the run's slot (beyond its slot: what the hand-over added)\n")
	var kinds []string
	for _, h := range r.Handovers {
		if !slices.Contains(kinds, h.Fault) {
			kinds = append(kinds, h.Fault)
		}
	}
	slices.Sort(kinds)
	for _, kind := range kinds {
		var elected, first, beyond []time.Duration
		for _, h := range r.Handovers {
			if h.Fault != kind || h.Err != "" {
				continue
			}
			elected = append(elected, h.Elected)
			if h.FirstStart > 0 {
				first = append(first, h.FirstStart)
				beyond = append(beyond, h.BeyondDue)
			}
		}
		fmt.Fprintf(w, "  %s: %d hand-overs\n    elected:         %s\n    first run start: %s\n    beyond its slot: %s\n",
			kind, len(elected), spread(elected), spread(first), spread(beyond))
	}
	for i, h := range r.Handovers {
		fmt.Fprintf(w, "    %2d %s elected after %v, first run after %v (%v beyond its slot) %s\n", i+1, h.Fault,
			h.Elected.Round(time.Millisecond), h.FirstStart.Round(time.Millisecond), h.BeyondDue.Round(time.Millisecond), h.Err)
	}
}

// spread is "min/median/max" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %v / median %v / max %v", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
}
