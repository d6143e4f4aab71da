package main

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
)

// rawClaimSQL is the reference: the same rows inserted by one plain INSERT ... SELECT, with
// none of the claim's checks; each slot row's id is job_run_id(slot), as the claim's.
const rawClaimSQL = `
INSERT INTO job_runs (id, job, trigger, status, scheduled_at, started_at, instance_id, epoch)
SELECT job_run_id($1), 'raw-' || i, 'schedule', 'running', $1, now(), 'bench', 1
FROM generate_series(1, $2) AS i`

// benchClaims measures the claim of N slots due at one instant (store.ClaimSlots: the state of
// every slot read, the winners inserted, in one fenced transaction) against one raw INSERT
// ... SELECT of as many rows into job_runs, on the same database, alternating.
func benchClaims(ctx context.Context, b *bench) error {
	n := b.sz.claimSlots
	full, err := b.migratedDB(ctx, "claims")
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, full)
	db, err := store.Open(ctx, b.url(full), store.Options{InstanceID: "bench", LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		return err
	}
	defer db.Close()

	// Runs finished between repetitions, so every claim finds its job idle, as at the top
	// of an hour; each repetition claims a slot of its own.
	finish := func() error {
		return db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE status = 'running'`)
			if err == nil {
				_, err = tx.Exec(ctx, `DELETE FROM job_runs WHERE job LIKE 'raw-%'`)
			}
			return err
		})
	}
	base := time.Now().Truncate(time.Minute).Add(-time.Duration(b.sz.reps+2) * time.Minute)
	var bulk, raw []time.Duration
	for rep := range b.sz.reps + 1 { // the first repetition warms the caches and is not kept
		slot := base.Add(time.Duration(rep) * time.Minute)
		claims := make([]store.Claim, n)
		for i := range claims {
			claims[i] = store.Claim{Job: fmt.Sprintf("job-%05d", i), ScheduledAt: slot, Trigger: store.TriggerSchedule, InstanceID: "bench"}
		}
		start := time.Now()
		var won int
		err := db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			outs, err := tx.ClaimSlots(ctx, claims)
			for _, o := range outs {
				if o.Run != nil {
					won++
				}
			}
			return err
		})
		took := time.Since(start)
		if err != nil {
			return err
		}
		if won != n {
			return fmt.Errorf("%d of %d claims won on idle jobs", won, n)
		}
		start = time.Now()
		err = db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, rawClaimSQL, slot, n)
			return err
		})
		rawTook := time.Since(start)
		if err != nil {
			return err
		}
		if err := finish(); err != nil {
			return err
		}
		if rep > 0 {
			bulk, raw = append(bulk, took), append(raw, rawTook)
		}
	}
	mb, mr := median(bulk), median(raw)
	ratio := float64(mb) / float64(mr)
	b.report.add(row{name: fmt.Sprintf("claiming %s due slots ÷ one raw INSERT … SELECT of as many rows", count(n)),
		data:  fmt.Sprintf("%s jobs due at one instant, each with its own history growing by one row a repetition", count(n)),
		value: dur(mb), ref: dur(mr), ratio: fmt.Sprintf("%.2f", ratio),
		target: "≤ 1.5", pass: verdict(ratio <= 1.5),
		note: fmt.Sprintf("one fenced transaction each (store.ClaimSlots: each slot's state read, the winners inserted); median of %d repetitions (claims: %s; raw: %s)",
			len(bulk), durs(bulk), durs(raw))})
	return nil
}
