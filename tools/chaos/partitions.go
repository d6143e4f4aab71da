package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/client"
)

// Partitions and runtime jobs in the chaos run. With Config.Partitions > 1 the replicas share
// the partitions (SCHEDULER_PARTITIONS); Config.RuntimeJobs HTTP jobs on "@every 1s", spread
// over them by their keys, call a receiver in this process. The faults then strike
// partitions' holders too (the coordinator holds some), and the checks add: every runtime
// slot has its row, no key is called twice without cause, no partition goes without a
// holder for more than the lease + 3 s, and nothing commits under a replaced partition term.

// termKey names one term: a partition (0: the coordinator) and its epoch.
type termKey struct {
	partition int
	epoch     int64
}

// callKey is one call as the receiver saw it: the run and its attempt number.
type callKey struct {
	run     string
	attempt string
}

// keyReceiver counts the calls of each Idempotency-Key.
type keyReceiver struct {
	mu    sync.Mutex
	calls map[string][]callKey // by Idempotency-Key
}

func (k *keyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	k.calls[key] = append(k.calls[key], callKey{run: r.Header.Get("X-Scheduler-Run-Id"), attempt: r.Header.Get("X-Scheduler-Attempt")})
	k.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// doubles returns the keys called twice without cause: one attempt of a run delivered twice,
// or two runs calling one key. The second is the documented at-least-once case only when
// one of them was abandoned (its replica died mid-call and its recovery called again), which
// the check in the database decides; here the keys and their runs are listed.
func (k *keyReceiver) doubles() (sameAttempt int64, manyRuns map[string][]int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	manyRuns = map[string][]int64{}
	for key, calls := range k.calls {
		seen := map[callKey]bool{}
		runs := map[string]bool{}
		for _, c := range calls {
			if seen[c] {
				sameAttempt++
			}
			seen[c], runs[c.run] = true, true
		}
		if len(runs) > 1 {
			for run := range runs {
				id, _ := strconv.ParseInt(run, 10, 64)
				manyRuns[key] = append(manyRuns[key], id)
			}
		}
	}
	return sameAttempt, manyRuns
}

// startRuntimeJobs starts the receiver and, once the first replica is ready, defines the
// runtime jobs through its API.
func (r *runner) startRuntimeJobs(ctx context.Context) (stop func(), err error) {
	r.receiver = &keyReceiver{calls: map[string][]callKey{}}
	srv := httptest.NewServer(r.receiver)
	rep := r.replicas[0]
	if err := awaitReady(ctx, rep); err != nil {
		srv.Close()
		return nil, err
	}
	c := client.New("http://" + rep.addr)
	// A few at a time: the jobs defined first already run while the others are defined, and
	// on a loaded machine one definition at a time took the run's whole deadline at 400.
	errs := make([]error, r.cfg.RuntimeJobs)
	places := make(chan struct{}, definersAtOnce)
	var wg sync.WaitGroup
	for i := range r.cfg.RuntimeJobs {
		places <- struct{}{}
		wg.Go(func() {
			defer func() { <-places }()
			name := fmt.Sprintf("chaos-rt-%04d", i)
			def := map[string]any{"name": name, "schedule": "@every 1s", "http": map[string]any{"url": srv.URL + "/hook"}}
			if err := defineJob(ctx, c, name, def); err != nil {
				errs[i] = fmt.Errorf("define runtime job %d through %s: %w", i, rep.addr, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil { // the first: after one, the others usually failed for the same reason
			srv.Close()
			return nil, err
		}
	}
	return srv.Close, nil
}

// definersAtOnce is how many runtime jobs the run defines at once.
const definersAtOnce = 8

// defineRetries bounds the retries of one definition that the API answered 503 (its
// database call failed; the answer says to retry after a second).
const defineRetries = 5

// defineJob defines a runtime job, retrying only the API's 503s. It puts the job rather
// than posting it, so that a retry of a change that was committed though its answer said
// otherwise defines the same job again instead of failing with 409.
func defineJob(ctx context.Context, c *client.Client, name string, def map[string]any) error {
	for attempt := 1; ; attempt++ {
		_, err := c.PutJob(ctx, name, def, client.WriteJobOptions{})
		var p *client.Problem
		if err == nil || !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable || attempt == defineRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second): // the answer's Retry-After
		}
	}
}

// watchPartitions records every partition term seen with its since, and the longest
// stretch a partition went from its holder's last renewal to the next term's since.
func (r *runner) watchPartitions(ctx context.Context) {
	lastRenewed := map[int]time.Time{}
	for ctx.Err() == nil {
		rows, err := r.pool.Query(ctx, `SELECT partition_id, epoch, since, renewed_at FROM scheduler_partitions WHERE epoch > 0`)
		if err == nil {
			for rows.Next() {
				var p int
				var epoch int64
				var since, renewed *time.Time
				if rows.Scan(&p, &epoch, &since, &renewed) != nil || since == nil {
					continue
				}
				r.epochsMu.Lock()
				k := termKey{p, epoch}
				if _, ok := r.epochs[k]; !ok {
					r.epochs[k] = *since
					if prev, ok := lastRenewed[p]; ok {
						r.maxUnheld = max(r.maxUnheld, since.Sub(prev))
					}
				}
				r.epochsMu.Unlock()
				if renewed != nil {
					lastRenewed[p] = *renewed
				}
			}
			rows.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkRuntimeJobs counts the runtime jobs' lost slots and the keys called twice without an
// abandoned run to explain it.
func (r *runner) checkRuntimeJobs(ctx context.Context, res *Result) error {
	if r.receiver == nil {
		return nil
	}
	err := r.pool.QueryRow(ctx, `
SELECT count(*) FROM (
    SELECT job, min(scheduled_at) AS lo, max(scheduled_at) AS hi FROM job_runs
    WHERE job LIKE 'chaos-rt-%' AND scheduled_at IS NOT NULL GROUP BY job) j,
    generate_series(j.lo, j.hi, interval '1 second') AS g (slot)
WHERE NOT EXISTS (SELECT 1 FROM job_runs x WHERE x.job = j.job AND x.scheduled_at = g.slot)`).Scan(&res.RuntimeLostSlots)
	if err != nil {
		return fmt.Errorf("check the runtime jobs' slots: %w", err)
	}
	same, many := r.receiver.doubles()
	res.KeysCalledTwice = same
	for _, runs := range many {
		var explained bool
		if err := r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs WHERE id = ANY($1) AND status = 'abandoned')`,
			runs).Scan(&explained); err != nil {
			return fmt.Errorf("check the keys called twice: %w", err)
		}
		if !explained {
			res.KeysCalledTwice++
		}
	}
	r.receiver.mu.Lock()
	res.RuntimeKeys = int64(len(r.receiver.calls))
	r.receiver.mu.Unlock()
	res.RuntimeRunsByInstance, err = r.runtimeRunsByInstance(ctx)
	return err
}
