// Command bench measures the scheduler's jobs, API and hand-over against a real PostgreSQL
// (make bench; make bench QUICK=1 for a reduced run). A full run replaces the rows of
// BENCHMARKS.md's current table it measured against a target, each with the commit, machine
// and date; every run adds its whole report to docs/benchmarks-history.md.
//
// Every figure is a median over several repetitions plus a ratio to a reference measured in
// the same run on the same machine (the equivalent raw SQL statement, the naive per-member
// loop the job replaces, the same writer without the purge), so the ratios stay meaningful on
// a slower or busier machine even when the absolute times do not. Data sets are built once,
// set-based, into template databases; every measurement that changes data runs on a fresh
// copy (CREATE DATABASE ... TEMPLATE), so the job and its reference see identical data.
//
//	BENCH_DATABASE_URL (or DATABASE_URL): a PostgreSQL whose user may create databases.
//	scripts/bench.sh bench [-quick] [-out BENCHMARKS.md] [-history docs/benchmarks-history.md] [-only members,rounds,...] [-runs N]
//
// It runs from the repository's root, where it builds the scheduler and writes -out.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// sizes are the data-set sizes and repetition counts of one bench run.
type sizes struct {
	members      int           // due members for plan-change and status-sync
	naiveSample  int           // members the naive per-member loop processes (extrapolated to members)
	groups       int           // groups for rounds-open
	retention    int           // old job_runs rows, over 9 days past the window, whose days data-retention drops
	historyRows  int           // job_runs rows over the 30 days before now behind the history API
	loadRows     int           // job_runs rows, as historyRows, behind the API under load
	loadDuration time.Duration // how long each repetition of the API load lasts
	reps         int           // repetitions of each timed measurement
	requests     int           // requests per API measurement
	handovers    int           // kill -9 and SIGTERM trials each
	delaySlots   int           // one-second slots for the schedule delay
	writerWindow time.Duration
	messages     int           // abandoned leads, one message each, for the message pipeline
	appointments int           // appointments for the appointment jobs (a tenth due for each)
	slowWindow   time.Duration // how long the pipeline at concurrency 1 is measured
	callJobs     int           // runtime HTTP jobs due on the same minute
	claimSlots   int           // slots due at one instant, claimed in one batch
	scaleJobs    int           // runtime HTTP jobs of the scale run
	scaleMinutes int           // minutes the scale run measures
	// partitionJobs and partitionMinutes size the partitions run (partitions.go).
	partitionJobs, partitionMinutes int
}

var (
	fullSizes = sizes{
		members: 1_000_000, naiveSample: 20_000, groups: 100_000, retention: 10_000_000,
		historyRows: 10_000_000, loadRows: 1_000_000, loadDuration: 20 * time.Second, reps: 3, requests: 2000, handovers: 20, delaySlots: 200,
		writerWindow: 20 * time.Second, messages: 20_000, slowWindow: 10 * time.Second, appointments: 1_000_000,
		callJobs: 1000, claimSlots: 10_000, scaleJobs: 10_000, scaleMinutes: 10,
		partitionJobs: 100_000, partitionMinutes: 3,
	}
	quickSizes = sizes{
		members: 100_000, naiveSample: 2_000, groups: 20_000, retention: 1_000_000,
		historyRows: 1_000_000, loadRows: 100_000, loadDuration: 5 * time.Second, reps: 2, requests: 500, handovers: 5, delaySlots: 30,
		writerWindow: 3 * time.Second, messages: 5_000, slowWindow: 5 * time.Second, appointments: 100_000,
		callJobs: 200, claimSlots: 10_000, scaleJobs: 10_000, scaleMinutes: 1,
		partitionJobs: 20_000, partitionMinutes: 1,
	}
)

// sections run in priority order; each adds its rows to the report.
var sections = []struct {
	name string
	run  func(ctx context.Context, b *bench) error
}{
	{"members", benchMembers},
	{"messages", benchMessages},
	{"rounds", benchRounds},
	{"appointments", benchAppointments},
	{"retention", benchRetention},
	{"api", benchAPI},
	{"apiload", benchAPILoad},
	{"handover", benchHandover},
	{"calls", benchCalls},
	{"claims", benchClaims},
	{"scale", benchScale},
	{"partitions", benchPartitions},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:]))
	}
	quick := flag.Bool("quick", false, "reduced data sets and repetitions (under 3 minutes)")
	out := flag.String("out", "BENCHMARKS.md", "the current table to update with a full run's rows (empty: the report on stdout only)")
	history := flag.String("history", "docs/benchmarks-history.md", "the page the run's report is added to")
	only := flag.String("only", "", "comma-separated sections to run (members,messages,rounds,appointments,retention,api,apiload,handover,calls,claims,scale,partitions); default all")
	runs := flag.Int("runs", 0, "job_runs rows of the retention, api and apiload data sets (default: 10 M, 10 M and 1 M; with -quick 1 M, 1 M and 100 k)")
	scaleMinutes := flag.Int("scale-minutes", 0, "minutes the scale section measures with the raised per-host bound (default 10; with -quick 1)")
	inPlace := flag.Bool("in-place", false, "measure the api and apiload sections on their runs data set itself, not a copy: half the disk for a large -runs")
	cpuProfile := flag.String("cpuprofile", "", "write the bench process's CPU profile (replicas and receiver included) to this file")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	url := os.Getenv("BENCH_DATABASE_URL")
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}
	if url == "" {
		log.Error("set BENCH_DATABASE_URL (or DATABASE_URL) to a PostgreSQL whose user may create databases, or run `make bench`, which starts a throwaway one")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sz := fullSizes
	if *quick {
		sz = quickSizes
	}
	if *runs > 0 {
		sz.retention, sz.historyRows, sz.loadRows = *runs, *runs, *runs
	}
	if *scaleMinutes > 0 {
		sz.scaleMinutes = *scaleMinutes
	}
	b, err := newBench(ctx, url, sz, *quick, log)
	if err != nil {
		log.Error("bench setup", "error", err)
		os.Exit(1)
	}
	defer b.close()
	b.inPlace = *inPlace
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			log.Error("cpu profile", "error", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	start := time.Now()
	var failed []string
	for _, s := range sections {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), s.name) {
			continue
		}
		log.Info("section", "name", s.name)
		t := time.Now()
		if err := s.run(ctx, b); err != nil {
			log.Error("section failed", "name", s.name, "error", err)
			b.report.failure(s.name, err)
			failed = append(failed, s.name)
		}
		log.Info("section done", "name", s.name, "took", time.Since(t).Round(time.Millisecond))
		if ctx.Err() != nil {
			break
		}
	}
	b.report.took = time.Since(start)
	text := b.report.markdown(ctx, b)
	fmt.Print(text)
	if *out != "" {
		at := measuredAt{commit: commit(ctx), machine: machineName(), date: time.Now().UTC().Format("2006-01-02")}
		if err := writeReport(*out, *history, text, b.report, at); err != nil {
			log.Error("write report", "error", err)
			os.Exit(1)
		}
		log.Info("report written", "current table", *out, "history", *history)
	}
	if len(failed) > 0 {
		os.Exit(1)
	}
}
