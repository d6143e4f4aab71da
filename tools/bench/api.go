package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/replica"
)

// Request rates of the load generator: fixed, so latencies are not inflated by the
// generator queueing behind itself.
const (
	historyRate = 200 // GET requests a second
	triggerRate = 50  // trigger + cancel pairs a second
)

// benchAPI measures the history API on historyRows runs of plan-change over the 30 days
// before now (one partition a day): its first page, a page 90 % back, a run by id from
// each of those days, and a trigger.
func benchAPI(ctx context.Context, b *bench) error {
	n := b.sz.historyRows
	runs, err := b.runsTemplate(ctx, historyRuns, n)
	if err != nil {
		return err
	}
	full, err := b.runsDB(ctx, "api", runs)
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, full)
	db, err := store.Open(ctx, b.url(full), store.Options{InstanceID: "bench-api", LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		return err
	}
	defer db.Close()

	var jobsConf []config.Job
	for _, name := range []string{"plan-change", "status-sync"} {
		s, err := schedule.Parse("0 2 * * *")
		if err != nil {
			return err
		}
		jobsConf = append(jobsConf, config.Job{Name: name, Schedule: s, Enabled: true, Timeout: time.Hour, Catchup: 24 * time.Hour})
	}
	// The replica's own API, as serve assembles it; its elector and engine are not run.
	log := slog.New(slog.DiscardHandler)
	rep, err := replica.New(replica.Config{DB: db, InstanceID: "bench-api", Log: log,
		Jobs: jobsConf, LeaseTimeout: config.LeaseTimeoutDefault,
		PollInterval: config.PollIntervalDefault})
	if err != nil {
		return err
	}
	ts := httptest.NewServer(rep.Handler())
	defer ts.Close()
	c := client.New(ts.URL, client.WithHTTPClient(ts.Client()))

	pool, err := pgxpool.New(ctx, b.url(full))
	if err != nil {
		return err
	}
	defer pool.Close()
	deep, err := deepCursor(ctx, c, pool)
	if err != nil {
		return err
	}

	ids, idDays, err := sampleRunIDs(ctx, pool, runByIDSamples)
	if err != nil {
		return err
	}

	data := fmt.Sprintf("%s rows in job_runs, plan-change's runs over the 30 days before now (%d day partitions)",
		count(n), runs.days)
	var next atomic.Int64
	for _, q := range []struct {
		name, data string
		within     time.Duration // the p99 target
		check      func() error
	}{
		{"GET /v1/jobs/{name}/runs, first page", data, 10 * time.Millisecond, func() error {
			return fullPage(ctx, c, "")
		}},
		{"GET /v1/jobs/{name}/runs, deep page (cursor 90 % back)", data, 10 * time.Millisecond, func() error {
			return fullPage(ctx, c, deep)
		}},
		// Each request reads the next sampled run, so consecutive requests hit other days'
		// partitions.
		{"GET /v1/runs/{id}", data + fmt.Sprintf("; ids of %d runs from %d days, in turn", len(ids), idDays), 5 * time.Millisecond, func() error {
			id := ids[(next.Add(1)-1)%int64(len(ids))]
			run, err := c.GetRun(ctx, id)
			if err != nil {
				return err
			}
			if run.ID != id {
				return fmt.Errorf("GET /v1/runs/%d answered run %d", id, run.ID)
			}
			return nil
		}},
	} {
		// Repeated: one run's p99 rests on its slowest 1 %, a few requests that a busy
		// shared machine can slow on its own; the median of the repetitions' p99 is reported.
		var p50s, p99s []time.Duration
		for range b.sz.reps {
			lat, err := paced(ctx, b.sz.requests, historyRate, q.check)
			if err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
			p50s, p99s = append(p50s, percentile(lat, 50)), append(p99s, percentile(lat, 99))
		}
		p99 := median(p99s)
		b.report.add(row{name: "API " + q.name + ": p99", data: q.data,
			value: dur(p99), target: "p99 < " + dur(q.within), pass: verdict(p99 < q.within),
			note: fmt.Sprintf("median of %d repetitions (p99 each: %s; median p50 %s); %d requests each at %d/s from an in-process Go client over loopback (httptest server with the real handler)",
				len(p99s), durs(p99s), dur(median(p50s)), b.sz.requests, historyRate)})
	}

	// Trigger: POST a manual run, then cancel it (untimed) so the next POST queues a new one.
	var mu sync.Mutex
	var trig []time.Duration
	_, err = paced(ctx, b.sz.requests/2, triggerRate, func() error {
		start := time.Now()
		t, err := c.TriggerRun(ctx, "status-sync", client.TriggerOptions{Reason: "bench"})
		d := time.Since(start)
		if err != nil {
			return err
		}
		if t.Status != http.StatusAccepted {
			return fmt.Errorf("trigger: status %d, want 202", t.Status)
		}
		mu.Lock()
		trig = append(trig, d)
		mu.Unlock()
		run, err := c.CancelRun(ctx, t.Run.ID, "")
		if err != nil {
			return err
		}
		if run.Status != "cancelled" {
			return fmt.Errorf("cancel: run %d is %s, want cancelled", run.ID, run.Status)
		}
		return nil
	}, serial())
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	p99 := percentile(trig, 99)
	b.report.add(row{name: "API POST /v1/jobs/{name}/runs (trigger): p99", data: data,
		value: dur(p99), target: "p99 < 20 ms", pass: verdict(p99 < 20*time.Millisecond),
		note: fmt.Sprintf("p50 %s; %d triggers at %d/s, each followed by an untimed cancel so the next one queues a new run",
			dur(percentile(trig, 50)), len(trig), triggerRate)})
	return nil
}

// fullPage gets the page of plan-change's history after cursor ("": the first) and checks
// it is full (50 runs).
func fullPage(ctx context.Context, c *client.Client, cursor string) error {
	page, err := c.ListRuns(ctx, "plan-change", client.ListRunsOptions{Cursor: cursor})
	if err != nil {
		return err
	}
	if len(page.Runs) != 50 {
		return fmt.Errorf("GET /v1/jobs/plan-change/runs?cursor=%s: %d runs, want a full page of 50", cursor, len(page.Runs))
	}
	return nil
}

// runByIDSamples is how many runs GET /v1/runs/{id} reads in turn.
const runByIDSamples = 100

// sampleRunIDs returns the ids of k runs of plan-change at regular times over its history
// (by slot, as the data set spreads them), and how many days they fall on.
func sampleRunIDs(ctx context.Context, pool *pgxpool.Pool, k int) ([]int64, int, error) {
	rows, err := pool.Query(ctx, `
		SELECT r.id
		FROM (SELECT min(scheduled_at) AS lo, max(scheduled_at) AS hi FROM job_runs WHERE job = 'plan-change') b,
		     generate_series(0, $1::int - 1) AS i,
		     LATERAL (SELECT id FROM job_runs WHERE job = 'plan-change' AND scheduled_at >= b.lo + (b.hi - b.lo) * (i::float8 / $1::int)
		              ORDER BY scheduled_at LIMIT 1) r`, k)
	if err != nil {
		return nil, 0, fmt.Errorf("sample run ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, 0, fmt.Errorf("sample run ids: %w", err)
	}
	if len(ids) == 0 {
		return nil, 0, fmt.Errorf("sample run ids: plan-change has no runs")
	}
	days := map[int64]bool{}
	for _, id := range ids {
		days[id>>37] = true // the id's UTC day (migration 0013)
	}
	return ids, len(days), nil
}

type pacedOpt struct{ serial bool }

// serial makes paced wait for each call before starting the next (calls that depend on
// the previous one); the rate is then an upper bound.
func serial() pacedOpt { return pacedOpt{serial: true} }

// paced calls fn count times at rate calls a second (bounded by count and by a time cap of
// twice the nominal duration plus 30 s) and returns each call's latency.
func paced(ctx context.Context, count, rate int, fn func() error, opts ...pacedOpt) ([]time.Duration, error) {
	isSerial := len(opts) > 0 && opts[0].serial
	deadline := time.Now().Add(2*time.Duration(count)*time.Second/time.Duration(rate) + 30*time.Second)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	call := func() {
		start := time.Now()
		err := fn()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		lat = append(lat, time.Since(start))
	}
	for i := 0; i < count; i++ {
		select {
		case <-ctx.Done():
			return lat, ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			break
		}
		if isSerial {
			call()
		} else {
			wg.Add(1)
			go func() { defer wg.Done(); call() }()
		}
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return lat, errs[0]
	}
	return lat, nil
}

// deepCursor is a history cursor 90 % of the way back through plan-change's runs: the API's
// own first-page cursor with its id moved back to the run 10 % of the way from the oldest
// slot to the newest (the data sets spread their runs evenly over time; ids, which carry
// their day in the high bits, are not spread evenly).
func deepCursor(ctx context.Context, c *client.Client, pool *pgxpool.Pool) (string, error) {
	first, err := c.ListRuns(ctx, "plan-change", client.ListRunsOptions{})
	if err != nil {
		return "", err
	}
	var cur string
	if first.NextCursor != nil {
		cur = *first.NextCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil || !strings.Contains(string(raw), ".") {
		return "", fmt.Errorf("first page has no usable next_cursor: %q", cur)
	}
	var deepID int64
	if err := pool.QueryRow(ctx, `
		SELECT id FROM job_runs
		WHERE job = 'plan-change'
		  AND scheduled_at >= (SELECT min(scheduled_at) + (max(scheduled_at) - min(scheduled_at)) / 10
		                       FROM job_runs WHERE job = 'plan-change')
		ORDER BY scheduled_at LIMIT 1`).Scan(&deepID); err != nil {
		return "", fmt.Errorf("deep cursor: %w", err)
	}
	_, fp, _ := strings.Cut(string(raw), ".")
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(deepID, 10) + "." + fp)), nil
}
