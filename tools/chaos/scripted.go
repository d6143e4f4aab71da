package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/backoff"
)

// A scripted run (Config.Script) strikes chosen replicas in a fixed order instead of the
// leader at random: the partitioned cluster's own check. The replicas first settle at their
// fair shares, which the run records with each replica's runs so far; then each strike hits
// its replica and waits until every partition that replica held has a new term, and the
// time that took is kept. The run ends a few seconds after the last strike. A killed replica stays down; a paused one is resumed once its
// partitions are taken over, and must then commit nothing under its old terms (the checks
// every run makes).

// Strike is one scripted fault: Fault (FaultKill or FaultPause) on replica slot Replica,
// After the previous strike (the first: after the shares settled).
type Strike struct {
	Fault   string
	Replica int
	After   time.Duration
}

// Takeover is what followed one scripted strike.
type Takeover struct {
	Strike Strike
	// Partitions is how many partitions (the coordinator's 0 among them) the struck replica
	// held; Within is the time from the strike until the last of them had a new term.
	Partitions int
	Within     time.Duration
}

// settleTimeout bounds the wait for the replicas to settle at their shares.
const settleTimeout = 45 * time.Second

// scriptTail is how long the cluster runs on after the last strike's takeover: a resumed
// replica rejoins and takes its share again.
const scriptTail = 5 * time.Second

// runScript settles the shares, then carries out the strikes, then lets the cluster run
// for scriptTail.
func (r *runner) runScript(ctx context.Context, res *Result) error {
	holdings, err := r.awaitFairShares(ctx)
	if err != nil {
		return err
	}
	res.Holdings = holdings
	settled, err := r.runtimeRunsByInstance(ctx)
	if err != nil {
		return err
	}
	for i, s := range r.cfg.Script {
		if !backoff.Sleep(ctx, s.After) {
			return ctx.Err()
		}
		if i == 0 {
			// The runs between the settling and the first strike: each replica's share.
			if res.RunsBeforeStrikes, err = r.runtimeRunsByInstance(ctx); err != nil {
				return err
			}
			for id, n := range settled {
				res.RunsBeforeStrikes[id] -= n
			}
		}
		t, err := r.strikeAndAwaitTakeover(ctx, s)
		if err != nil {
			return err
		}
		res.Takeovers = append(res.Takeovers, t)
		r.cfg.Log.Info("scripted strike", "fault", s.Fault, "replica", s.Replica, "partitions", t.Partitions, "taken_over_within", t.Within)
	}
	if !backoff.Sleep(ctx, scriptTail) {
		return ctx.Err()
	}
	return nil
}

// awaitFairShares waits until every partition is held and each live replica holds
// floor(N/R) or ceil(N/R) of them, and returns the holdings.
func (r *runner) awaitFairShares(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	n, live := r.cfg.Partitions, r.cfg.Replicas
	for {
		holdings, held, err := r.holdings(ctx)
		if err == nil && held == n && len(holdings) == live {
			fair := true
			for _, h := range holdings {
				fair = fair && h >= n/live && h <= (n+live-1)/live
			}
			if fair {
				return holdings, nil
			}
		}
		if !backoff.Sleep(ctx, 50*time.Millisecond) {
			return nil, fmt.Errorf("the replicas did not settle at their shares within %s (last: %v, %d of %d held, read error %v)",
				settleTimeout, holdings, held, n, err)
		}
	}
}

// holdings counts the partitions each replica holds, the coordinator's among them, and
// the partitions held in all.
func (r *runner) holdings(ctx context.Context) (map[string]int, int, error) {
	out, err := queryMap[string, int](ctx, r.pool, `
SELECT holder, count(*)::int FROM (
    SELECT holder FROM scheduler_partitions WHERE holder IS NOT NULL AND epoch > 0
    UNION ALL
    SELECT instance_id FROM scheduler_leader WHERE id = 1 AND instance_id IS NOT NULL) h
GROUP BY holder`)
	held := 0
	for _, n := range out {
		held += n
	}
	return out, held, err
}

// strikeAndAwaitTakeover strikes s's replica and waits until every partition it held has
// a term newer than the one it held; a paused replica is resumed then.
func (r *runner) strikeAndAwaitTakeover(ctx context.Context, s Strike) (Takeover, error) {
	t := Takeover{Strike: s}
	rep := r.replicas[s.Replica]
	terms, err := r.termsOf(ctx, rep.id)
	if err != nil {
		return t, err
	}
	t.Partitions = len(terms)
	sent := time.Now()
	repair, _, err := r.strike(ctx, s.Fault, rep)
	if err != nil {
		return t, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		latest, done, err := r.newTerms(ctx, terms)
		if err == nil && done {
			t.Within = latest.Sub(sent)
			break
		}
		if time.Now().After(deadline) {
			return t, fmt.Errorf("the partitions of %s, struck by %s, had no new holder within 15 s (last error: %v)", rep.id, s.Fault, err)
		}
		if !backoff.Sleep(ctx, 20*time.Millisecond) {
			return t, ctx.Err()
		}
	}
	if s.Fault == FaultPause {
		return t, repair() // resumed now that its partitions are taken over
	}
	return t, nil
}

// termsOf returns the epoch of each partition holder holds (0: the coordinator's).
func (r *runner) termsOf(ctx context.Context, holder string) (map[int]int64, error) {
	return queryMap[int, int64](ctx, r.pool, `
SELECT partition_id, epoch FROM scheduler_partitions WHERE holder = $1 AND epoch > 0
UNION ALL
SELECT 0, epoch FROM scheduler_leader WHERE id = 1 AND instance_id = $1`, holder)
}

// newTerms reports whether every partition of terms has a newer term, and the latest since
// among those new terms.
func (r *runner) newTerms(ctx context.Context, terms map[int]int64) (latest time.Time, done bool, err error) {
	var ps []int32
	var epochs []int64
	for p, e := range terms {
		ps, epochs = append(ps, int32(p)), append(epochs, e)
	}
	var newer int
	var last *time.Time
	err = r.pool.QueryRow(ctx, `
WITH now_held AS (
    SELECT partition_id, epoch, since FROM scheduler_partitions
    UNION ALL
    SELECT 0, epoch, since FROM scheduler_leader WHERE id = 1)
SELECT count(*)::int, max(h.since)
FROM unnest($1::int[], $2::bigint[]) AS o (partition_id, epoch)
JOIN now_held h ON h.partition_id = o.partition_id AND h.epoch > o.epoch`, ps, epochs).Scan(&newer, &last)
	if err != nil || newer < len(terms) || last == nil {
		return time.Time{}, false, err
	}
	return *last, true, nil
}

// runtimeRunsByInstance counts the runtime jobs' runs each replica started so far.
func (r *runner) runtimeRunsByInstance(ctx context.Context) (map[string]int64, error) {
	return queryMap[string, int64](ctx, r.pool, `
SELECT instance_id, count(*) FROM job_runs
WHERE job LIKE 'chaos-rt-%' AND instance_id IS NOT NULL GROUP BY 1`)
}

// queryMap reads a query of two columns into a map from the first to the second.
func queryMap[K comparable, V any](ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (map[K]V, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out := map[K]V{}
	var k K
	var v V
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		out[k] = v
		return nil
	})
	return out, err
}
