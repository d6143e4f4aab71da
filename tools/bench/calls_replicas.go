package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/replica"
)

// The replicas of the calls and scale runs, started in process as serve starts one, and the
// hand-over the scale run measures between them.

// benchReplica is a replica the scale run started, with its own pool, as serve runs one.
type benchReplica struct {
	id    string
	rep   *replica.Replica
	terms *leader.Subscription
	stop  func() // resigns (as on SIGTERM) and waits; later calls do nothing
}

func startReplica(ctx context.Context, b *bench, full, id string, n int, bounds bounds) (*benchReplica, error) {
	db, err := store.Open(ctx, b.url(full), store.Options{InstanceID: id, LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		return nil, err
	}
	rep, err := replica.New(replica.Config{DB: db, InstanceID: id, Log: slog.New(slog.DiscardHandler),
		LeaseTimeout: config.LeaseTimeoutDefault, PollInterval: config.PollIntervalDefault,
		Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}, MaxJobs: n,
			HTTPConcurrency: bounds.global, HTTPHostConcurrency: bounds.host}})
	if err != nil {
		db.Close()
		return nil, err
	}
	r := &benchReplica{id: id, rep: rep, terms: rep.Listen()}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rep.Run(runCtx) }()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done; db.Close() }) }
	return r, nil
}

// measureHandOver makes a follower take over from lead (which resigns, as on SIGTERM) with
// n runtime jobs defined, and measures how long the follower took to be elected, how long
// reading and checking the n definitions takes, and how late the new leader claimed the
// next slot of every job.
func measureHandOver(ctx context.Context, b *bench, full string, db *store.DB, n int, lead *benchReplica, followers []*benchReplica, d *delivery) error {
	pool, err := pgxpool.New(ctx, b.url(full))
	if err != nil {
		return err
	}
	defer pool.Close()
	start := time.Now()
	stored, err := db.Definitions(ctx)
	if err != nil {
		return err
	}
	for _, sd := range stored {
		if _, _, err := runtimejob.Load(sd.Definition); err != nil {
			return err
		}
	}
	d.loadIn = time.Since(start)

	// The followers wait in pg_advisory_lock once they have heartbeated.
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_instances WHERE instance_id <> $1`, lead.id).Scan(&waiting)
		return waiting == len(followers), err
	}); err != nil {
		return err
	}
	if wait := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); wait < 20*time.Second {
		time.Sleep(wait + time.Second) // hand over early in a minute, so the next slot is not the one being caught up
	}
	elected := make(chan string, len(followers))
	for _, f := range followers {
		go func() {
			if _, err := awaitTerm(ctx, f.terms, time.Minute); err == nil {
				elected <- f.id
			}
		}()
	}
	stopAt := time.Now()
	lead.stop()
	var next string
	select {
	case next = <-elected:
	case <-time.After(time.Minute):
		return fmt.Errorf("no follower was elected within a minute of the leader's resignation")
	}
	d.electedIn = time.Since(stopAt)
	slot := time.Now().Truncate(time.Minute).Add(time.Minute)
	// Polled from the slot on only: polling every 5 ms through the minute before it cost
	// PostgreSQL 15 s of CPU a run, some of it while the new leader claimed the slot.
	select {
	case <-time.After(time.Until(slot)):
	case <-ctx.Done():
		return ctx.Err()
	}
	return waitFor(ctx, time.Minute, func() (bool, error) {
		var claimed int
		var p99 *time.Duration
		err := pool.QueryRow(ctx, `
			SELECT count(*), percentile_disc(0.99) WITHIN GROUP (ORDER BY started_at - scheduled_at)
			FROM job_runs WHERE scheduled_at = $1 AND instance_id = $2`, slot, next).Scan(&claimed, &p99)
		if err != nil || claimed < n {
			return false, err
		}
		d.nextClaimP99 = *p99
		return true, nil
	})
}

// awaitTerm waits for the replica's first term.
func awaitTerm(ctx context.Context, sub *leader.Subscription, within time.Duration) (leader.Term, error) {
	select {
	case t := <-sub.C():
		return t, nil
	case <-time.After(within):
		return leader.Term{}, fmt.Errorf("the replica was not elected within %s", within)
	case <-ctx.Done():
		return leader.Term{}, ctx.Err()
	}
}
