package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) {
	// The bench re-executes its own binary to measure a job alone; under go test that
	// binary is the test binary.
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:]))
	}
	testdb.Main(m)
}

// TestBenchSectionsRunOnTinyData keeps the bench from rotting: the data-set, job, API and
// claim sections run end to end on tiny sizes (calls and scale wait for minute boundaries and
// are left to make bench), each checks the jobs changed exactly the rows the
// raw statements change, and every measurement lands in the report. The figures themselves
// mean nothing at this size; make bench produces them.
func TestBenchSectionsRunOnTinyData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every job on several database copies; skipped with -short")
	}
	// A bound against a hang, not a speed test: the sections take about a minute, and more
	// than two on a machine loaded by other test runs.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	tiny := sizes{members: 2000, naiveSample: 100, groups: 300, retention: 3000, historyRows: 3000,
		loadRows: 3000, loadDuration: time.Second,
		reps: 1, requests: 20, writerWindow: 200 * time.Millisecond,
		messages: 300, slowWindow: 500 * time.Millisecond, appointments: 2000, claimSlots: 300}
	// Any database of the cluster serves as the admin connection that creates the others.
	b, err := newBench(ctx, testdb.New(t), tiny, true, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer b.close()

	for _, s := range []struct {
		name string
		run  func(context.Context, *bench) error
	}{{"members", benchMembers}, {"messages", benchMessages}, {"rounds", benchRounds},
		{"appointments", benchAppointments}, {"retention", benchRetention}, {"api", benchAPI},
		{"apiload", benchAPILoad}, {"claims", benchClaims}} {
		require.NoError(t, s.run(ctx, b), s.name)
	}
	var names []string
	for _, r := range b.report.rows {
		names = append(names, r.name)
		assert.NotEmpty(t, r.value, r.name)
	}
	for _, want := range []string{
		"plan-change job ÷ one raw SQL statement", "plan-change job ÷ naive per-member loop",
		"plan-change peak RSS of the job's process", "status-sync job ÷ one raw SQL statement",
		"message delivery throughput at concurrency 64", "message throughput, concurrency 64 ÷ concurrency 1",
		"rounds-open job ÷ one raw UPDATE with AT TIME ZONE",
		"appointment-reminders-day job ÷ raw SQL claim + record", "no-show-detection job ÷ one raw SQL statement",
		"no-show-rate job ÷ raw SQL claim + record",
		"data-retention: concurrent writer's p99 insert latency during the purge ÷ without it",
		"API GET /v1/jobs/{name}/runs, first page: p99", "API GET /v1/jobs/{name}/runs, deep page (cursor 90 % back): p99",
		"API GET /v1/runs/{id}: p99", "API POST /v1/jobs/{name}/runs (trigger): p99",
		"API under load: p99 of an open-loop mix of history pages and job views",
		"claiming 300 due slots ÷ one raw INSERT … SELECT of as many rows",
	} {
		assert.Contains(t, names, want)
	}
	md := b.report.markdown(ctx, b)
	assert.Contains(t, md, "| plan-change job ÷ one raw SQL statement | 2 k members, all due |")
	assert.Contains(t, md, "- PostgreSQL: PostgreSQL ")
	// The old runs span several days past the window, each dropped whole.
	assert.Regexp(t, `\| data-retention: [^|]+ \| (9|10) days dropped \(about 3 k old job_runs rows`, md)
}

// TestUpdateCurrentKeepsOneRowPerTarget: a run replaces the rows it measured, adds a new
// target at the table's end, leaves the other rows at the run that measured them and writes
// no row without a target.
func TestUpdateCurrentKeepsOneRowPerTarget(t *testing.T) {
	md := "# Benchmarks\n\n| measurement | data | figure | target | result | commit | machine | date |\n|---|---|---|---|---|---|---|---|\n" +
		"| a ÷ b | d | 1.60 (1.6 s ÷ 1.0 s) | ≤ 1.5 | MISS | old1 | m | 2026-11-01 |\n" +
		"| other | d | 5 ms | < 10 ms | PASS | old2 | m | 2026-11-02 |\n\nAfter the table.\n"
	at := measuredAt{commit: "new", machine: "AMD EPYC, 2 cores", date: "2026-11-29"}
	got, err := updateCurrent(md, []row{
		{name: "a ÷ b", data: "d", value: "1.2 s", ref: "1.0 s", ratio: "1.20", target: "≤ 1.5", pass: verdict(true)},
		{name: "new | target", data: "e", value: "7 ms", target: "< 10 ms", pass: verdict(true)},
		{name: "no target", data: "f", value: "9 ms"},
	}, at)
	require.NoError(t, err)
	assert.Equal(t, "# Benchmarks\n\n| measurement | data | figure | target | result | commit | machine | date |\n|---|---|---|---|---|---|---|---|\n"+
		"| a ÷ b | d | 1.20 (1.2 s ÷ 1.0 s) | ≤ 1.5 | PASS | new | AMD EPYC, 2 cores | 2026-11-29 |\n"+
		"| other | d | 5 ms | < 10 ms | PASS | old2 | m | 2026-11-02 |\n"+
		"| new \\| target | e | 7 ms | < 10 ms | PASS | new | AMD EPYC, 2 cores | 2026-11-29 |\n\nAfter the table.\n", got)

	// The repository's own page has the table the bench updates.
	page, err := os.ReadFile(filepath.Join(testdb.RepoRoot(), "BENCHMARKS.md"))
	require.NoError(t, err)
	_, err = updateCurrent(string(page), nil, at)
	require.NoError(t, err)
}

// TestHTTPFloorCallsConcAtATimeOverWarmConnections: the floor makes its n calls, no more
// than conc at a time (each waits receiverDelay at the receiver), over the connections
// its warm-up opened.
func TestHTTPFloorCallsConcAtATimeOverWarmConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, conc = 200, 16
	late, dialed, err := httpFloor(ctx, n, conc)
	require.NoError(t, err)
	assert.Len(t, late, n)
	assert.Zero(t, dialed, "connections opened after the release")
	// The last call waited for ⌈n/conc⌉-1 rounds of conc calls before it.
	assert.GreaterOrEqual(t, percentile(late, 100), (n+conc-1)/conc*receiverDelay-receiverDelay)
}

// TestProcCPUReadsARunningProcess: /proc/<pid>/stat's CPU time of this process grows as
// its rusage does.
func TestProcCPUReadsARunningProcess(t *testing.T) {
	before, err := procCPU(os.Getpid())
	require.NoError(t, err)
	r0 := processCPU()
	for processCPU()-r0 < 300*time.Millisecond { // burn CPU: the clock's ticks are 10 ms
	}
	used := processCPU() - r0
	after, err := procCPU(os.Getpid())
	require.NoError(t, err)
	assert.InDelta(t, used.Seconds(), (after - before).Seconds(), 0.05)
}
