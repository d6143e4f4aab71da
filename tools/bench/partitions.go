package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The partitions run: the runtime HTTP jobs of a whole platform due on one minute, led by
// three `scheduler serve` processes that share the partitions. Processes, not in-process
// replicas, so that each replica's peak RSS and CPU time are its own (rusage, /proc/<pid>/stat).

const (
	partitionReplicas = 3
	partitionCount    = 64
)

// defineBulkSQL defines $2 runtime jobs call-000000… from the checked definition $1, each
// on the partition its key hashes to, in one statement: 100 000 API creates would take
// minutes and measure nothing this run is about.
const defineBulkSQL = `
INSERT INTO job_definitions (name, kind, definition, partition_id)
SELECT n, 'http', jsonb_set($1::jsonb, '{name}', to_jsonb(n)), scheduler_partition_of(n, $3)
FROM (SELECT 'call-' || lpad(i::text, 6, '0') AS n FROM generate_series(0, $2 - 1) AS i) s`

// partitionShare is one replica's part of the measured slots.
type partitionShare struct {
	id         string
	runs       int
	partitions int
	peakRSSMB  float64
	life       time.Duration // CPU time of the process's whole life (rusage)
	measured   time.Duration // CPU time over the measured minutes (procCPU)
}

func benchPartitions(ctx context.Context, b *bench) error {
	n, minutes := b.sz.partitionJobs, b.sz.partitionMinutes
	dir, binary, err := buildScheduler(ctx, "partitions")
	if err != nil {
		return err
	}
	if os.Getenv("BENCH_KEEP") == "" {
		defer os.RemoveAll(dir)
	}
	full, err := b.migratedDB(ctx, "partitions")
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, full)
	pool, err := pgxpool.New(ctx, b.url(full))
	if err != nil {
		return err
	}
	defer pool.Close()

	recv := &slotReceiver{arrived: map[string][]time.Time{}, keys: map[uuid.UUID]int32{}, all: make(chan struct{}), want: n}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	if err := definePartitioned(ctx, b, full, pool, srv.URL, n); err != nil {
		return err
	}

	// The floor goes first, so that the replicas do not compete with it.
	floor, err := measureFloor(ctx, n, partitionReplicas*scaleBounds.global, b.sz.reps)
	if err != nil {
		return err
	}

	c := partitionCluster(binary, b.url(full), dir, pool, n)
	defer c.stop()
	if err := c.startShared(ctx); err != nil {
		return err
	}
	m, err := measureSlots(ctx, c, recv, minutes)
	if err != nil {
		return err
	}
	first, last := m.first, m.last
	missing, churn, err := slotRecords(ctx, pool, first, last, m.unfinished)
	if err != nil {
		return err
	}
	shares, err := partitionShares(ctx, c, pool, first, last)
	if err != nil {
		return err
	}
	for i := range shares {
		shares[i].measured = m.cpu[i]
	}
	recv.mu.Lock()
	doubles := 0
	for _, k := range recv.keys {
		if k > 1 {
			doubles++
		}
	}
	recv.mu.Unlock()
	reportPartitions(b, n, minutes, m.late, m.slotP99, floor, missing, doubles, shares, churn)
	return nil
}

// slotRecords reads what the database recorded of the measured slots first..last: the
// slots × jobs without exactly one row, and a line on the claims' lateness, the hand-overs
// and the recoveries.
func slotRecords(ctx context.Context, pool *pgxpool.Pool, first, last time.Time, unfinished int) (missing int, churn string, err error) {
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM generate_series($1::timestamptz, $2::timestamptz, interval '1 minute') AS s
		CROSS JOIN (SELECT name FROM job_definitions) AS j
		WHERE (SELECT count(*) FROM job_runs r WHERE r.job = j.name AND r.scheduled_at = s) <> 1`,
		first, last).Scan(&missing); err != nil {
		return 0, "", err
	}
	var handovers, recoveries int
	var claimP50, claimP99 time.Duration
	if err := pool.QueryRow(ctx, `
		SELECT (SELECT coalesce(sum(handovers), 0) FROM scheduler_partitions),
		       (SELECT count(*) FROM job_runs WHERE trigger = 'recovery' AND created_at >= $1),
		       percentile_disc(0.5) WITHIN GROUP (ORDER BY started_at - scheduled_at),
		       percentile_disc(0.99) WITHIN GROUP (ORDER BY started_at - scheduled_at)
		FROM job_runs WHERE scheduled_at BETWEEN $1 AND $2 AND started_at IS NOT NULL`,
		first, last).Scan(&handovers, &recoveries, &claimP50, &claimP99); err != nil {
		return 0, "", err
	}
	return missing, fmt.Sprintf("claimed (job_runs.started_at − slot) p50 %s, p99 %s; %d partition hand-overs since the cluster was made, %d recovery runs in the measured minutes, %d of their runs unfinished 2 minutes after the last",
		dur(claimP50), dur(claimP99), handovers, recoveries, unfinished), nil
}

// partitionCluster is the run's cluster of partitionReplicas `scheduler serve` processes,
// not started yet.
func partitionCluster(binary, url, dir string, pool *pgxpool.Pool, n int) *cluster {
	c := &cluster{binary: binary, url: url, dir: dir, pool: pool, env: []string{
		"SCHEDULER_PARTITIONS=" + strconv.Itoa(partitionCount), "SCHEDULER_HTTP_ALLOW=127.0.0.1/32",
		"SCHEDULER_MAX_JOBS=" + strconv.Itoa(n),
		"SCHEDULER_HTTP_CONCURRENCY=" + strconv.Itoa(scaleBounds.global),
		"SCHEDULER_HTTP_HOST_CONCURRENCY=" + strconv.Itoa(scaleBounds.host),
	}}
	// The built-in jobs stay off: the run measures the runtime jobs alone.
	for _, j := range []string{"PLAN_CHANGE", "STATUS_SYNC", "ROUNDS_CREATE", "ROUNDS_OPEN", "ROUNDS_CLOSE", "ABANDON_RECOVERY", "DATA_RETENTION"} {
		c.env = append(c.env, "SCHEDULER_JOB_"+j+"_ENABLED=false")
	}
	return c
}

// startShared starts the replicas and returns once they share the partitions.
func (c *cluster) startShared(ctx context.Context) error {
	for i := range partitionReplicas {
		if err := c.start(i); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, func() (bool, error) { return sharesSettled(ctx, c.pool) }); err != nil {
		return fmt.Errorf("the %d replicas did not share the %d partitions (logs in %s): %w", partitionReplicas, partitionCount, c.dir, err)
	}
	return nil
}

// partitionSlots is what the replicas did in the measured slots first..last.
type partitionSlots struct {
	first, last time.Time
	late        []time.Duration // each call's arrival at the receiver − its slot
	slotP99     []time.Duration // each slot's p99 of late
	cpu         []time.Duration // each replica's CPU time over the measured minutes
	unfinished  int             // the slots' runs still going two minutes after the last
}

// measureSlots lets the replicas run one slot to warm up, then measures the next minutes
// slots: when their calls arrive, and the replicas' CPU time from a second before the
// first until the last one's runs ended.
func measureSlots(ctx context.Context, c *cluster, recv *slotReceiver, minutes int) (partitionSlots, error) {
	// One slot to warm up, not measured: each replica's engines load their share of the
	// definitions when their terms begin, which at 100 000 jobs outlasts the next minute.
	warm := time.Now().Truncate(time.Minute).Add(time.Minute)
	if time.Until(warm) < 15*time.Second {
		warm = warm.Add(time.Minute)
	}
	m := partitionSlots{first: warm.Add(time.Minute)}
	m.last = m.first.Add(time.Duration(minutes-1) * time.Minute)
	counted := m.first.Add(-time.Second)
	if _, err := awaitSlot(ctx, recv, warm, counted); err != nil {
		return m, err
	}
	select {
	case <-time.After(time.Until(counted)):
	case <-ctx.Done():
		return m, ctx.Err()
	}
	cpu0, err := c.cpuTimes()
	if err != nil {
		return m, err
	}
	for k := range minutes {
		slot := m.first.Add(time.Duration(k) * time.Minute)
		// A slot whose calls do not all arrive within a minute is reported, not an error: at
		// this size, on a small machine, that is the finding.
		arrived, err := awaitSlot(ctx, recv, slot, slot.Add(time.Minute))
		if err != nil {
			return m, err
		}
		var l []time.Duration
		for _, at := range arrived {
			l = append(l, at.Sub(slot))
		}
		m.late = append(m.late, l...)
		m.slotP99 = append(m.slotP99, percentile(l, 99))
	}
	// The measured slots' runs end before they are counted; those still going after two
	// minutes are counted instead (an overloaded machine's finding, not an error).
	_ = waitFor(ctx, 2*time.Minute, func() (bool, error) {
		err := c.pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE status IN ('running', 'queued') AND scheduled_at <= $1`,
			m.last).Scan(&m.unfinished)
		return m.unfinished == 0, err
	})
	cpu1, err := c.cpuTimes()
	if err != nil {
		return m, err
	}
	for i := range cpu1 {
		m.cpu = append(m.cpu, cpu1[i]-cpu0[i])
	}
	return m, nil
}

// definePartitioned makes the cluster's partitions and defines n jobs on "* * * * *"
// calling url.
func definePartitioned(ctx context.Context, b *bench, full string, pool *pgxpool.Pool, url string, n int) error {
	db, err := store.Open(ctx, b.url(full), store.Options{InstanceID: "bench-partitions", LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.EnsureCluster(ctx, partitionCount); err != nil {
		return err
	}
	def := runtimejob.Definition{Name: "call-000000", Schedule: runtimejob.Schedules{"* * * * *"},
		HTTP: &runtimejob.HTTPTarget{URL: url + "/hook"}}
	j, errs := runtimejob.Check(def, runtimejob.Env{})
	if errs != nil {
		return errs
	}
	raw, err := json.Marshal(j.Def)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, defineBulkSQL, raw, n, partitionCount)
	return err
}

// sharesSettled reports whether every partition has a holder and each replica holds its fair
// share (partition 0 counts as its coordinator's).
func sharesSettled(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	rows, err := pool.Query(ctx, `
		SELECT holder, count(*) FROM (
			SELECT holder FROM scheduler_partitions
			UNION ALL SELECT instance_id FROM scheduler_leader) h
		GROUP BY holder`)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	held, holders := 0, 0
	low, high := partitionCount/partitionReplicas, (partitionCount+partitionReplicas-1)/partitionReplicas
	for rows.Next() {
		var holder *string
		var k int
		if err := rows.Scan(&holder, &k); err != nil {
			return false, err
		}
		if holder == nil || *holder == "" || k < low || k > high {
			return false, rows.Err()
		}
		held += k
		holders++
	}
	return held == partitionCount && holders == partitionReplicas, rows.Err()
}

// awaitSlot waits until recv.want calls of slot arrived, or until until, and returns the
// arrival times of those that did, sorted.
func awaitSlot(ctx context.Context, recv *slotReceiver, slot, until time.Time) ([]time.Time, error) {
	key := slot.UTC().Format(time.RFC3339)
	all := make(chan struct{})
	recv.mu.Lock()
	recv.slot, recv.all = key, all
	recv.mu.Unlock()
	select {
	case <-all:
	case <-time.After(time.Until(until)):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	recv.mu.Lock()
	arrived := recv.arrived[key]
	delete(recv.arrived, key)
	recv.mu.Unlock()
	sort.Slice(arrived, func(i, j int) bool { return arrived[i].Before(arrived[j]) })
	return arrived, nil
}

// partitionShares counts each replica's runs of the measured slots and partitions, then
// stops the replicas (SIGTERM) and reads their rusage: peak RSS and their whole life's CPU time.
func partitionShares(ctx context.Context, c *cluster, pool *pgxpool.Pool, first, last time.Time) ([]partitionShare, error) {
	var shares []partitionShare
	for _, p := range c.procs {
		s := partitionShare{id: p.id}
		if err := pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM job_runs WHERE instance_id = $1 AND scheduled_at BETWEEN $2 AND $3),
			       (SELECT count(*) FROM scheduler_partitions WHERE holder = $1)
			     + (SELECT count(*) FROM scheduler_leader WHERE instance_id = $1)`,
			p.id, first, last).Scan(&s.runs, &s.partitions); err != nil {
			return nil, err
		}
		shares = append(shares, s)
	}
	c.stop()
	for i, p := range c.procs {
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			shares[i].peakRSSMB = float64(ru.Maxrss) / 1024
			shares[i].life = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return shares, nil
}

func reportPartitions(b *bench, n, minutes int, late, slotP99 []time.Duration, floor partitionFloor, missing, doubles int, shares []partitionShare, churn string) {
	data := fmt.Sprintf("%s runtime HTTP jobs on \"* * * * *\", one receiver answering in %s, %d `scheduler serve` replicas, %d partitions, %d minute(s)",
		count(n), receiverDelay, partitionReplicas, partitionCount, minutes)
	total, maxRSS := 0, 0.0
	var measured, life time.Duration
	var each []string
	for _, s := range shares {
		total += s.runs
		measured += s.measured
		life += s.life
		maxRSS = max(maxRSS, s.peakRSSMB)
	}
	for _, s := range shares {
		each = append(each, fmt.Sprintf("%s: %d partitions, %.0f%% of the runs, peak RSS %.0f MB, CPU %.1f s in the measured minutes (%.1f s whole life)",
			s.id, s.partitions, 100*float64(s.runs)/float64(max(total, 1)), s.peakRSSMB, s.measured.Seconds(), s.life.Seconds()))
	}
	p99, value := percentile(late, 99), ""
	if len(late) < n*minutes*99/100 { // the 99th percentile call never came within the minute
		p99, value = time.Minute, "> 1 min"
	} else {
		value = dur(p99)
	}
	floorP99 := median(slices.Clone(floor.p99))
	times := fmt.Sprintf("%.2f", ratio(p99, floorP99))
	if p99 == time.Minute {
		times = "> " + times
	}
	name := fmt.Sprintf("%s jobs on %d partitions: ", count(n), partitionCount)
	b.report.add(row{name: name + "call started − slot, p99", data: data,
		value: value, ref: dur(floorP99) + " raw HTTP floor", ratio: times, target: "p99 ≤ 3 s", pass: verdict(p99 <= 3*time.Second),
		note: fmt.Sprintf("arrival at the receiver − the slot; the ratio divides it by the p99 of the same %s calls made bare (next row); p50 %s; each minute's p99: %s; %d of %d slots × jobs called, %d keys called twice, %d slots without exactly one row; %s; %s",
			count(n), dur(percentile(late, 50)), durs(slotP99), len(late), n*minutes, doubles, missing, churn, strings.Join(each, "; "))})
	b.report.add(row{name: name + "raw HTTP floor (no scheduler), p99",
		data: fmt.Sprintf("%s bare POSTs from one Go http.Client, %d at a time (%d replicas × SCHEDULER_HTTP_CONCURRENCY=%d) over keep-alive connections opened beforehand, one receiver answering in %s",
			count(n), floor.conc, partitionReplicas, scaleBounds.global, receiverDelay),
		value: dur(floorP99),
		note: fmt.Sprintf("arrival at the receiver − the calls' release, median of %d repetitions (p99 %s; p50 %s); %d connections opened after a release; measured in this run before the replicas started, with no scheduler and no database: what this machine takes for the calls alone",
			len(floor.p99), durs(floor.p99), durs(floor.p50), floor.dialed)})
	b.report.add(row{name: name + "peak RSS of the largest replica", data: data,
		value: fmt.Sprintf("%.0f MB", maxRSS), target: "≤ the 10 000-job run's", pass: nil,
		note: "rusage Maxrss of each `scheduler serve` process after SIGTERM"})
	perThousand := func(d time.Duration) float64 { return d.Seconds() / float64(max(total, 1)) * 1000 }
	b.report.add(row{name: name + "CPU per 1 000 runs", data: data,
		value: fmt.Sprintf("%.2f s", perThousand(measured)),
		note: fmt.Sprintf("user + system time of the %d `scheduler serve` processes from 1 s before the first measured slot until the last one's runs ended (/proc/<pid>/stat), %.1f s, ÷ the %d runs of the measured slots × 1 000 "+
			"(a slot that outlasts its minute brings the next one's work into the count: an upper bound); over their whole life (start, loading the definitions, the warm-up slot; rusage) %.1f s, %.2f s per 1 000 runs",
			partitionReplicas, measured.Seconds(), total, life.Seconds(), perThousand(life))})
}
