package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// receiverDelay is how long the bench's receiver takes to answer each call.
const receiverDelay = 20 * time.Millisecond

// slotReceiver records when each call of one slot arrived, by its X-Scheduler-Scheduled-At.
// It shares the bench process with the replicas, whose peak RSS is measured, so it keeps
// little: a slot's arrivals until they are read, and a key as its 16 bytes.
type slotReceiver struct {
	mu      sync.Mutex
	arrived map[string][]time.Time
	// keys counts the calls per Idempotency-Key, a UUID; a key that is not one counts
	// under uuid.Nil, so a second such call shows as a key called twice.
	keys map[uuid.UUID]int32
	slot string        // the slot measured
	all  chan struct{} // closed once want calls of slot arrived
	want int
}

func (s *slotReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	slot := r.Header.Get("X-Scheduler-Scheduled-At")
	key, _ := uuid.Parse(r.Header.Get("Idempotency-Key"))
	s.mu.Lock()
	s.arrived[slot] = append(s.arrived[slot], at)
	s.keys[key]++
	if slot == s.slot && len(s.arrived[slot]) == s.want {
		close(s.all)
	}
	s.mu.Unlock()
	time.Sleep(receiverDelay)
	w.WriteHeader(http.StatusNoContent)
}

// benchCalls measures runtime HTTP jobs' delivery: N jobs on "* * * * *" calling one local
// receiver that answers in 20 ms, run by in-process replicas (the first one leads) with the
// default concurrency bounds, against calling the same receiver one call at a time.
func benchCalls(ctx context.Context, b *bench) error {
	n := b.sz.callJobs
	d, err := deliver(ctx, b, n, 1, defaultBounds, false)
	if err != nil {
		return err
	}
	// One call at a time, to the same receiver, through a plain client.
	seq := min(n, 200)
	seqRate, err := sequentialRate(ctx, seq)
	if err != nil {
		return err
	}
	data := fmt.Sprintf("%s runtime HTTP jobs on \"* * * * *\", one receiver answering in %s", count(n), receiverDelay)
	p99 := percentile(d.lateness, 99)
	b.report.add(row{name: "Runtime HTTP jobs: call started − slot, p99", data: data, value: dur(p99),
		target: "p99 ≤ 1 s", pass: verdict(p99 <= time.Second),
		note: fmt.Sprintf("p50 %s, last call %s after the slot; %d in-process replicas, %s (the defaults)",
			dur(percentile(d.lateness, 50)), dur(d.last), scaleReplicas, defaultBounds)})
	b.report.add(row{name: "Runtime HTTP jobs: calls per second", data: data, value: fmt.Sprintf("%.0f/s", d.rate),
		ref: fmt.Sprintf("%.0f/s one call at a time", seqRate), ratio: fmt.Sprintf("%.1f×", d.rate/seqRate),
		target: "≥ 1 000 calls/s", pass: verdict(d.rate >= 1000),
		note: fmt.Sprintf("all %d calls of one slot ÷ (last call's start − slot); reference: %d sequential POSTs to the same receiver", n, seq)})
	return nil
}

// commitsSQL reads the bench database's commits, reads included, and the cluster's next
// transaction id, which only a transaction that writes advances.
const commitsSQL = `SELECT xact_commit, pg_snapshot_xmax(pg_current_snapshot())::text::bigint FROM pg_stat_database WHERE datname = $1`

// benchScale runs ten thousand runtime HTTP jobs on "* * * * *" with three replicas for
// several minutes: every slot recorded once and called once, how late the calls start, the
// leader's memory, the database's commits per slot instant, the job list, and a hand-over.
// One receiver is one host, so the main run raises both bounds (scaleBounds); the
// defaults' figure is reported beside it.
func benchScale(ctx context.Context, b *bench) error {
	n := b.sz.scaleJobs
	for _, run := range []struct {
		bounds  bounds
		minutes int
		main    bool
	}{
		{scaleBounds, b.sz.scaleMinutes, true},
		// The defaults, for comparison: two minutes tell them.
		{defaultBounds, min(b.sz.scaleMinutes, 2), false},
	} {
		data := fmt.Sprintf("%s runtime HTTP jobs on \"* * * * *\", one receiver answering in %s, %d replicas, %d minute(s)",
			count(n), receiverDelay, scaleReplicas, run.minutes)
		d, err := deliver(ctx, b, n, run.minutes, run.bounds, run.main)
		if err != nil {
			return err
		}
		p99 := percentile(d.lateness, 99)
		name := fmt.Sprintf("%s jobs: call started − slot, p99 (%s)", count(n), run.bounds)
		var target string
		var pass *bool
		if run.main {
			target, pass = "p99 ≤ 1 s", verdict(p99 <= time.Second)
		}
		b.report.add(row{name: name, data: data, value: dur(p99), target: target, pass: pass,
			note: fmt.Sprintf("p50 %s, last call %s after its slot; each minute's p99: %s; claimed (job_runs.started_at − slot) p50 %s, p99 %s; %d of %d slots × jobs called, %d keys called twice, %d slots without exactly one row; %.0f PostgreSQL commits per slot instant, %.0f of them writes; peak RSS of the bench process (replicas and receiver) %.0f MB; CPU of the bench process per 1 000 calls %s; defining the jobs took %s",
				dur(percentile(d.lateness, 50)), dur(d.last), durs(d.slotP99), dur(d.claimP50), dur(d.claimP99), d.calls, n*run.minutes, d.doubles, d.missing,
				d.commitsPerSlot, d.writesPerSlot, d.peakRSSMB, dur(d.cpuPer1000), dur(d.defining))})
		if !run.main {
			continue
		}
		b.report.add(row{name: fmt.Sprintf("%s jobs: hand-over, every job's next slot claimed by the new leader, p99 after the slot", count(n)),
			data: data, value: dur(d.nextClaimP99), target: "within the next slot (60 s)", pass: verdict(d.nextClaimP99 < time.Minute),
			note: fmt.Sprintf("the leader resigned (as on SIGTERM) early in a minute; a follower was elected %s later; reading and checking the %d definitions takes %s",
				dur(d.electedIn), n, dur(d.loadIn))})
		b.report.add(row{name: fmt.Sprintf("%s jobs: GET /v1/jobs (a page of %d), p50", count(n), jobPageSize), data: data + "; after the measured minutes",
			value: dur(d.jobPage.p50),
			note: fmt.Sprintf("the first page with its jobs' state and last run, %d requests one at a time through the client package: max %s",
				jobListRequests, dur(d.jobPage.max))})
		b.report.add(row{name: fmt.Sprintf("%s jobs: peak RSS", count(n)), data: data,
			value: fmt.Sprintf("%.0f MB", d.peakRSSMB), target: "≤ 300 MB", pass: verdict(d.peakRSSMB <= 300),
			note: "VmHWM of the bench process, which holds the three replicas and the receiver: an upper bound of the leader's"})
	}
	return nil
}

// bounds are a replica's SCHEDULER_HTTP_CONCURRENCY and SCHEDULER_HTTP_HOST_CONCURRENCY.
type bounds struct{ global, host int }

func (c bounds) String() string {
	return fmt.Sprintf("SCHEDULER_HTTP_CONCURRENCY=%d, SCHEDULER_HTTP_HOST_CONCURRENCY=%d", c.global, c.host)
}

// scaleBounds are the scale run's main bounds: its one receiver is one host, which a real
// deployment's ten thousand jobs would spread over many, so the per-host bound is raised to
// the global one.
var scaleBounds = bounds{config.HTTPConcurrencyDefault, config.HTTPConcurrencyDefault}

// defaultBounds are the defaults.
var defaultBounds = bounds{config.HTTPConcurrencyDefault, config.HTTPHostConcurrencyDefault}

// delivery is what deliver measured.
type delivery struct {
	lateness       []time.Duration // call arrival − slot, every call of every measured slot
	slotP99        []time.Duration // each measured slot's own p99 lateness, in order
	last           time.Duration   // the latest call's lateness
	rate           float64         // calls per second over the first measured slot
	calls          int
	doubles        int // keys that reached the receiver more than once
	missing        int // measured slots × jobs without exactly one job_runs row
	commitsPerSlot float64
	// writesPerSlot counts the transactions that wrote (were given a transaction id), of
	// the whole cluster, which holds only the bench's database at work: xact_commit also
	// counts every read.
	writesPerSlot float64
	peakRSSMB     float64
	// cpuPer1000 is the bench process's CPU time (user + system) over the measured slots
	// per 1 000 calls: the replicas' and the receiver's together.
	cpuPer1000 time.Duration
	// claimP50, claimP99: the claim's commit (job_runs.started_at) − slot
	claimP50, claimP99 time.Duration
	// The hand-over (measureHandOver).
	electedIn, loadIn, nextClaimP99 time.Duration
	defining                        time.Duration
	jobPage                         jobListTiming // the first page of jobPageSize
}

// scaleReplicas is how many replicas the scale run starts: the leader, then followers.
const scaleReplicas = 3

// deliver defines n runtime HTTP jobs on "* * * * *" calling a local receiver, runs a replica
// until it leads and then two followers, records the calls of the next `slots` whole
// minutes, and with handOver reads the job list and hands over to a follower.
func deliver(ctx context.Context, b *bench, n, slots int, bounds bounds, handOver bool) (delivery, error) {
	var d delivery
	full, err := b.migratedDB(ctx, "calls")
	if err != nil {
		return d, err
	}
	defer b.dropDB(ctx, full)
	db, err := store.Open(ctx, b.url(full), store.Options{InstanceID: "bench-calls", LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		return d, err
	}
	defer db.Close()

	recv := &slotReceiver{arrived: map[string][]time.Time{}, keys: map[uuid.UUID]int32{}, all: make(chan struct{}), want: n}
	srv := httptest.NewServer(recv)
	defer srv.Close()

	loadStart := time.Now()
	for i := range n {
		def := runtimejob.Definition{Name: fmt.Sprintf("call-%05d", i), Schedule: runtimejob.Schedules{"* * * * *"},
			HTTP: &runtimejob.HTTPTarget{URL: srv.URL + "/hook"}}
		j, errs := runtimejob.Check(def, runtimejob.Env{})
		if errs != nil {
			return d, errs
		}
		raw, err := json.Marshal(j.Def)
		if err != nil {
			return d, err
		}
		if _, err := db.CreateDefinition(ctx, def.Name, runtimejob.KindHTTP, raw, n); err != nil {
			return d, err
		}
	}
	d.defining = time.Since(loadStart)

	lead, err := startReplica(ctx, b, full, "bench-calls", n, bounds)
	if err != nil {
		return d, err
	}
	defer lead.stop()
	if _, err := awaitTerm(ctx, lead.terms, 5*time.Minute); err != nil {
		return d, err
	}
	// The followers start once the first replica leads, so that it is the leader measured.
	var followers []*benchReplica
	for i := 2; i <= scaleReplicas; i++ {
		f, err := startReplica(ctx, b, full, fmt.Sprintf("bench-calls-%d", i), n, bounds)
		if err != nil {
			return d, err
		}
		defer f.stop()
		followers = append(followers, f)
	}

	// Whole minutes after the replica leads, so that no catch-up run is counted.
	first := time.Now().Truncate(time.Minute).Add(time.Minute)
	if time.Until(first) < 10*time.Second {
		first = first.Add(time.Minute)
	}
	var commitsBefore, xidsBefore int64
	cpuBefore := processCPU()
	for k := range slots {
		slot := first.Add(time.Duration(k) * time.Minute)
		key := slot.UTC().Format(time.RFC3339)
		all := make(chan struct{})
		recv.mu.Lock()
		recv.slot, recv.all = key, all
		recv.mu.Unlock()
		if k == 0 {
			if err := b.admin.QueryRow(ctx, commitsSQL, full).Scan(&commitsBefore, &xidsBefore); err != nil {
				return d, err
			}
		}
		select {
		case <-all:
		case <-time.After(time.Until(slot) + time.Minute):
		case <-ctx.Done():
			return d, ctx.Err()
		}
		recv.mu.Lock()
		arrived := recv.arrived[key]
		delete(recv.arrived, key) // read once: a call of the slot arriving later counts by its key only
		recv.mu.Unlock()
		if len(arrived) < n/2 {
			return d, fmt.Errorf("%d of %d calls of the slot %s arrived within a minute", len(arrived), n, key)
		}
		sort.Slice(arrived, func(i, j int) bool { return arrived[i].Before(arrived[j]) })
		var late []time.Duration
		for _, at := range arrived {
			late = append(late, at.Sub(slot))
		}
		d.lateness = append(d.lateness, late...)
		d.slotP99 = append(d.slotP99, percentile(late, 99))
		d.calls += len(arrived)
		d.last = max(d.last, arrived[len(arrived)-1].Sub(slot))
		if k == 0 {
			d.rate = float64(len(arrived)) / arrived[len(arrived)-1].Sub(slot).Seconds()
		}
	}
	last := first.Add(time.Duration(slots-1) * time.Minute)
	pool, err := pgxpool.New(ctx, b.url(full))
	if err != nil {
		return d, err
	}
	defer pool.Close()
	// Every run of the last slot records its end before the commits are counted.
	if err := waitFor(ctx, time.Minute, func() (bool, error) {
		var running bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs WHERE status = 'running')`).Scan(&running)
		return !running, err
	}); err != nil {
		return d, err
	}
	d.cpuPer1000 = (processCPU() - cpuBefore) * 1000 / time.Duration(max(d.calls, 1))
	var commitsAfter, xidsAfter int64
	if err := b.admin.QueryRow(ctx, commitsSQL, full).Scan(&commitsAfter, &xidsAfter); err != nil {
		return d, err
	}
	d.commitsPerSlot = float64(commitsAfter-commitsBefore) / float64(slots)
	d.writesPerSlot = float64(xidsAfter-xidsBefore) / float64(slots)
	recv.mu.Lock()
	for _, c := range recv.keys {
		if c > 1 {
			d.doubles++
		}
	}
	recv.mu.Unlock()
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM generate_series($1::timestamptz, $2::timestamptz, interval '1 minute') AS s
		CROSS JOIN (SELECT name FROM job_definitions) AS j
		WHERE (SELECT count(*) FROM job_runs r WHERE r.job = j.name AND r.scheduled_at = s) <> 1`,
		first, last).Scan(&d.missing); err != nil {
		return d, err
	}
	if err := pool.QueryRow(ctx, `
		SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY started_at - scheduled_at),
		       percentile_disc(0.99) WITHIN GROUP (ORDER BY started_at - scheduled_at)
		FROM job_runs WHERE scheduled_at BETWEEN $1 AND $2 AND started_at IS NOT NULL`,
		first, last).Scan(&d.claimP50, &d.claimP99); err != nil {
		return d, err
	}
	d.peakRSSMB = peakRSSMB()
	if !handOver {
		return d, nil
	}
	if d.jobPage, err = timeJobList(ctx, lead.rep, n); err != nil {
		return d, err
	}
	return d, measureHandOver(ctx, b, full, db, n, lead, followers, &d)
}

// sequentialRate is how many calls a second one client makes to a receiver like the
// replica's, one at a time.
func sequentialRate(ctx context.Context, calls int) (float64, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(receiverDelay)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	client := srv.Client()
	start := time.Now()
	for range calls {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/hook", nil)
		if err != nil {
			return 0, err
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	return float64(calls) / time.Since(start).Seconds(), nil
}

// processCPU is this process's user and system CPU time so far (rusage).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMB is this process's peak resident set (VmHWM), in MB.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
