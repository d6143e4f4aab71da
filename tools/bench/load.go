package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/schedulerhq/scheduler/client"
)

// loadRate is the open-loop request rate of the API load: requests are sent on schedule
// whatever the answers' latency (vegeta's attacker), so a slow answer cannot hide behind the
// generator waiting for it, as it would in a closed loop.
const loadRate = 500

// loadWarmUp is the unmeasured load that precedes the repetitions.
const loadWarmUp = 5 * time.Second

// benchAPILoad measures the API as operators' tools and dashboards meet it: an open-loop mix
// of history pages (first and 90 % back) and job views, spread over three `scheduler serve`
// replicas whose leader runs plan-change every second, on loadRows job_runs rows.
func benchAPILoad(ctx context.Context, b *bench) error {
	n := b.sz.loadRows
	runs, err := b.runsTemplate(ctx, historyRuns, n)
	if err != nil {
		return err
	}
	full, err := b.runsDB(ctx, "apiload", runs)
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, full)
	dir, binary, err := buildScheduler(ctx, "apiload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pool, err := pgxpool.New(ctx, b.url(full))
	if err != nil {
		return err
	}
	defer pool.Close()
	c := &cluster{binary: binary, url: b.url(full), dir: dir, pool: pool}
	defer c.stop()
	if err := c.startAll(ctx); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		for _, p := range c.procs {
			res, err := http.Get("http://" + p.addr + "/readyz")
			if err != nil {
				return false, nil
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("replicas not ready: %w", err)
	}
	deep, err := deepCursor(ctx, client.New("http://"+c.procs[0].addr), pool)
	if err != nil {
		return err
	}
	var targets []vegeta.Target
	for _, p := range c.procs {
		for _, path := range []string{"/v1/jobs/plan-change/runs", "/v1/jobs/plan-change/runs?cursor=" + deep,
			"/v1/jobs/plan-change", "/v1/jobs"} {
			targets = append(targets, vegeta.Target{Method: http.MethodGet, URL: "http://" + p.addr + path})
		}
	}

	// A first, unmeasured round opens the connections a steady load keeps open (the
	// generator's to each replica, each replica's pool to PostgreSQL), so the repetitions
	// measure serving, not connecting.
	for range vegeta.NewAttacker().Attack(vegeta.NewStaticTargeter(targets...), vegeta.Rate{Freq: loadRate, Per: time.Second},
		loadWarmUp, "warm-up") {
	}
	var p50s, p99s, maxes []time.Duration
	var notes []string
	errors := 0
	for rep := range b.sz.reps {
		attacker := vegeta.NewAttacker(vegeta.Timeout(10 * time.Second))
		var m vegeta.Metrics
		for res := range attacker.Attack(vegeta.NewStaticTargeter(targets...), vegeta.Rate{Freq: loadRate, Per: time.Second},
			b.sz.loadDuration, fmt.Sprintf("api-%d", rep)) {
			m.Add(res)
		}
		m.Close()
		failed := int(m.Requests) - int(m.StatusCodes["200"])
		errors += failed
		p50s, p99s, maxes = append(p50s, m.Latencies.P50), append(p99s, m.Latencies.P99), append(maxes, m.Latencies.Max)
		notes = append(notes, fmt.Sprintf("p50 %s, p99 %s, max %s, %d requests, %d not 200",
			dur(m.Latencies.P50), dur(m.Latencies.P99), dur(m.Latencies.Max), m.Requests, failed))
	}
	p99 := median(p99s)
	b.report.add(row{name: "API under load: p99 of an open-loop mix of history pages and job views",
		data: fmt.Sprintf("%s rows in job_runs over the 30 days before now (%d day partitions); 3 replicas, the leader running plan-change every second",
			count(n), runs.days),
		value: dur(p99), target: "p99 < 10 ms, no error", pass: verdict(p99 < 10*time.Millisecond && errors == 0),
		note: fmt.Sprintf("median of %d repetitions (p50 %s, max %s) of %s at %d requests/s spread over the replicas (vegeta, open loop; first page, deep page, job, job list), after %s unmeasured; each: %s",
			len(p99s), dur(median(p50s)), dur(median(maxes)), b.sz.loadDuration, loadRate, loadWarmUp, strings.Join(notes, "; "))})
	return nil
}
