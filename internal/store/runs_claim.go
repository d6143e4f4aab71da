package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// job_runs, the leader's side: every method here is on *Tx, because each is correct only
// inside the leader's fenced transaction (store.DB.Fenced).

// Reasons a slot is recorded as skipped.
const (
	ReasonOverlap = "overlap"
	ReasonMinGap  = "min-gap"
	ReasonPaused  = "paused"
)

// Claim asks for one schedule slot of a job.
type Claim struct {
	Job         string
	ScheduledAt time.Time // the slot's nominal time, whole seconds
	Trigger     string    // TriggerSchedule or TriggerCatchUp
	MinGap      time.Duration
	InstanceID  string
	// QueueOne leaves a slot that comes due while the job has its bound of active runs
	// unrecorded (Busy) instead of skipped, for a caller that waits for the run and claims it
	// again (overlap queue-one).
	QueueOne bool
	// Replace cancels the job's active runs instead (overlap replace, overlap.go): the slot
	// is claimed at once when none is left running, else it is Busy as for QueueOne.
	Replace bool
	// DefinitionVersion is the runtime job definition's version the run follows (nil for a
	// built-in job).
	DefinitionVersion *int64
	// MaxRuns, above 0, claims nothing once this many of the job's slots ran (runs_limit.go).
	MaxRuns int
	// Ahead, above 0, claims the slot up to this long before it comes by the database's
	// clock, so that its run can start at the slot rather than after the claim's statement.
	// Such a claim only wins outright (the job free, not paused, past its minimum gap and
	// with runs left): otherwise it records nothing and comes back Early, for the caller to
	// claim the slot again when it has come, as any other claim. Its run's started_at is the
	// slot, or the claim's start if that came after it.
	Ahead time.Duration
	// Now is the time the claim decides by: nil in production, the database's clock (NowOr).
	// Claims claimed together share the first one's.
	Now *time.Time
}

// ClaimOutcome says what became of a claim: exactly one of Run (claimed, status running),
// Skipped (a skipped row, SkippedID, was recorded with this reason), Taken (the slot
// already had a row, written by this or an earlier leader) or Finished is set.
type ClaimOutcome struct {
	Run       *Run
	Skipped   string
	SkippedID int64
	Taken     bool
	// Early, when above 0, is how far the slot still lies in the future by the database's
	// clock: nothing was recorded, and the caller claims again once it has come.
	Early time.Duration
	// Busy, for a QueueOne or Replace claim, says the job has its bound of active runs:
	// nothing was recorded.
	Busy bool
	// Replaced, for a Replace claim, are the active runs it ended cancelled (queued ones,
	// and accepted callback runs), and Cancelling those whose cancel it asked for.
	Replaced   []Ended
	Cancelling []int64
	// Finished says the job's MaxRuns slots ran: nothing was recorded, and no later slot of
	// the job will be.
	Finished bool
	// ClaimedAhead says Run was claimed Ahead, and StartIn how far its slot lay ahead of the
	// database's clock at the end of the claim (negative once it had passed): its run waits
	// that long after the commit before it starts.
	ClaimedAhead bool
	StartIn      time.Duration
}

// ClaimSlot records c's slot in job_runs, inside the caller's fenced transaction (docs/design.md
// guarantees 2 and 4). The unique index on (job, scheduled_at) makes the slot run at most
// once whatever replica or epoch tries; a slot that comes due while the job has its bound of
// active runs (overlap.go) becomes a skipped row rather than one more run.
//
// A slot is claimed only once it has come by the database's clock, whatever the leader's own
// clock says (its timers fire by it): a leader whose clock runs ahead gets Early instead.
func (tx *Tx) ClaimSlot(ctx context.Context, c Claim) (ClaimOutcome, error) {
	early := `SELECT greatest($1::timestamptz - ` + nowSQL(2) + `, interval '0')`
	const taken = `SELECT EXISTS (SELECT 1 FROM job_runs WHERE job = $1 AND scheduled_at = $2)`
	const paused = `SELECT coalesce((SELECT paused FROM job_settings WHERE job = $1), false)`
	// lockAtLeastFor: measured between run starts, on the database clock.
	tooSoon := `
		SELECT EXISTS (SELECT 1 FROM job_runs
		               WHERE job = $1 AND started_at > ` + nowSQL(3) + ` - $2::bigint * interval '1 microsecond')`
	// ON CONFLICT without a target: an existing slot row leaves no row. (No active run of
	// the job is inserted since the check above: every writer of one takes activeRunsLock.)
	insert := `
		INSERT INTO job_runs (id, job, trigger, status, scheduled_at, started_at, instance_id, epoch, definition_version, partition_id)
		VALUES (job_run_id($3), $1, $2, 'running', $3, ` + nowSQL(7) + `, $4, $5, $6, $8)
		ON CONFLICT DO NOTHING
		RETURNING ` + runColumns

	if err := tx.lockActiveRuns(ctx); err != nil {
		return ClaimOutcome{}, err
	}
	var ahead time.Duration
	if err := tx.QueryRow(ctx, early, c.ScheduledAt, c.Now).Scan(&ahead); err != nil {
		return ClaimOutcome{}, fmt.Errorf("compare the slot with the database clock: %w", err)
	}
	if ahead > 0 {
		return ClaimOutcome{Early: ahead}, nil
	}
	var exists bool
	if err := tx.QueryRow(ctx, taken, c.Job, c.ScheduledAt).Scan(&exists); err != nil {
		return ClaimOutcome{}, fmt.Errorf("check slot: %w", err)
	}
	if exists {
		return ClaimOutcome{Taken: true}, nil
	}
	if c.MaxRuns > 0 {
		var spent bool
		if err := tx.QueryRow(ctx, spentSQL, c.Job, c.MaxRuns).Scan(&spent); err != nil {
			return ClaimOutcome{}, fmt.Errorf("count the runs that ran: %w", err)
		}
		if spent {
			return ClaimOutcome{Finished: true}, nil
		}
	}
	skip := func(reason string) (ClaimOutcome, error) {
		id, err := tx.recordSkip(ctx, c, reason)
		if err != nil || id == 0 {
			return ClaimOutcome{Taken: err == nil}, err
		}
		return ClaimOutcome{Skipped: reason, SkippedID: id}, nil
	}
	var isPaused, isTooSoon bool
	if err := tx.QueryRow(ctx, paused, c.Job).Scan(&isPaused); err != nil {
		return ClaimOutcome{}, fmt.Errorf("read job settings: %w", err)
	}
	if isPaused {
		return skip(ReasonPaused)
	}
	isBusy, err := tx.busy(ctx, c.Job)
	if err != nil {
		return ClaimOutcome{}, err
	}
	var replaced ClaimOutcome
	if isBusy && c.Replace {
		if replaced.Replaced, replaced.Cancelling, err = tx.replaceActive(ctx, c); err != nil {
			return ClaimOutcome{}, err
		}
		if isBusy, err = tx.busy(ctx, c.Job); err != nil {
			return ClaimOutcome{}, err
		}
	}
	if isBusy && (c.QueueOne || c.Replace) {
		replaced.Busy = true
		return replaced, nil
	}
	if isBusy {
		return skip(ReasonOverlap)
	}
	if c.MinGap > 0 {
		if err := tx.QueryRow(ctx, tooSoon, c.Job, c.MinGap.Microseconds(), c.Now).Scan(&isTooSoon); err != nil {
			return ClaimOutcome{}, fmt.Errorf("check minimum gap: %w", err)
		}
		if isTooSoon {
			return skip(ReasonMinGap)
		}
	}
	run, err := scanRun(tx.QueryRow(ctx, insert, c.Job, c.Trigger, c.ScheduledAt, c.InstanceID, tx.epoch, c.DefinitionVersion, c.Now, tx.partition))
	if errors.Is(err, pgx.ErrNoRows) {
		if err := tx.QueryRow(ctx, taken, c.Job, c.ScheduledAt).Scan(&exists); err != nil {
			return ClaimOutcome{}, fmt.Errorf("check slot: %w", err)
		}
		if exists {
			return ClaimOutcome{Taken: true}, nil
		}
		if c.QueueOne || c.Replace {
			replaced.Busy = true
			return replaced, nil
		}
		return skip(ReasonOverlap)
	}
	if err != nil {
		return ClaimOutcome{}, fmt.Errorf("claim slot: %w", err)
	}
	replaced.Run = run
	return replaced, nil
}

// recordSkip writes the slot's skipped row and returns its id; 0 if the slot already had one.
func (tx *Tx) recordSkip(ctx context.Context, c Claim, reason string) (int64, error) {
	insert := `
		INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at, instance_id, epoch, reason, partition_id)
		VALUES (job_run_id($3), $1, $2, 'skipped', $3, ` + nowSQL(7) + `, $4, $5, $6, $8)
		ON CONFLICT DO NOTHING
		RETURNING id`
	var id int64
	err := tx.QueryRow(ctx, insert, c.Job, c.Trigger, c.ScheduledAt, c.InstanceID, tx.epoch, reason, c.Now, tx.partition).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("record skipped slot: %w", err)
	}
	return id, nil
}

// RecordMissed records slots as missed (docs/design.md guarantee 3: older misses are recorded,
// not silently lost); slots that already have a row are left alone. It returns the ids of
// the rows it wrote. now is nil but in tests (NowOr).
func (tx *Tx) RecordMissed(ctx context.Context, now *time.Time, job string, slots []time.Time, instanceID string) ([]int64, error) {
	insert := `
		INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at, instance_id, epoch, partition_id)
		SELECT job_run_id(slot), $1, 'schedule', 'missed', slot, ` + nowSQL(5) + `, $3, $4, $6
		FROM unnest($2::timestamptz[]) AS slot
		ON CONFLICT DO NOTHING
		RETURNING id`
	rows, err := tx.Query(ctx, insert, job, slots, instanceID, tx.epoch, now, tx.partition)
	if err != nil {
		return nil, fmt.Errorf("record missed slots of %s: %w", job, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("record missed slots of %s: %w", job, err)
	}
	return ids, nil
}

// FinishRun records a run's end. Called inside the run's fenced transaction, so a deposed
// leader cannot overwrite what the next leader decided about the run; only a running run
// is finished. The finish is announced on RunFinishedChannel, delivered at commit, so the
// API's ?wait answers at once. version, when set, records the runtime definition the run
// ran (a manual run learns it only when the leader starts it).
func (tx *Tx) FinishRun(ctx context.Context, id int64, status string, stats json.RawMessage, errText *string, version *int64) error {
	done, err := tx.FinishRuns(ctx, []Finish{{RunID: id, Status: status, Stats: stats, Error: errText, Version: version}})
	if err != nil {
		return fmt.Errorf("finish run %d: %w", id, err)
	}
	if len(done) == 0 {
		return fmt.Errorf("finish run %d: %w", id, ErrNotRunning)
	}
	return nil
}

// ErrNotRunning means a run's end was already recorded: by an earlier attempt whose commit
// reached the server while its answer was lost, or by a leader that abandoned the run.
var ErrNotRunning = errors.New("the run is no longer running")

// PickQueued moves the oldest queued run of the transaction's partition to running under its
// epoch and returns it, or nil when none is queued. SKIP LOCKED leaves a row another transaction is changing (the API
// cancelling it) for the next pass instead of waiting for it.
func (tx *Tx) PickQueued(ctx context.Context, instanceID string) (*Run, error) {
	const pick = `
		UPDATE job_runs SET status = 'running', started_at = now(), instance_id = $1, epoch = $2
		WHERE id = (SELECT id FROM job_runs WHERE status = 'queued' AND partition_id = $3 ORDER BY id
		            FOR UPDATE SKIP LOCKED LIMIT 1)
		RETURNING ` + runColumns
	run, err := scanRun(tx.QueryRow(ctx, pick, instanceID, tx.epoch, tx.partition))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pick queued run: %w", err)
	}
	return run, nil
}

// Abandoned is a run an earlier leader left running, and the recovery run queued for it
// (RecoveryID 0 when none was queued because the job already had an active run).
type Abandoned struct {
	ID         int64
	Job        string
	Trigger    string
	Epoch      int64
	RecoveryID int64
}

// AbandonRuns marks as abandoned the runs of the transaction's partition left running by
// epochs other than the transaction's (epochs count per partition: another partition's runs
// are its own term's business), and the runs of its own epoch listed in orphans, and queues one recovery
// run for each (docs/design.md guarantees 5, 10 and 14). Only a leader calls it, inside its
// fenced transaction: after the epoch bump no older epoch can write, so those runs are
// certainly dead. A run of a higher epoch is a lost term's, after a rollback of the database
// that took the leader row back behind it: no term of that number can write any more either
// (the fence compares the term_id), and left running it would hold the job's bound of
// active runs for ever. An orphan is a run
// of this term that no goroutine of the leader owns (its claim committed while the answer
// was lost), which the caller has checked. No run is recovered twice: each partition's
// unique index on recovers_run_id, and across partitions the check under activeRunsLock.
// now, the abandoned runs' end, is nil but in tests (NowOr).
func (tx *Tx) AbandonRuns(ctx context.Context, now *time.Time, orphans []int64) ([]Abandoned, error) {
	// The runs it abandons, locked, with the end each gets (runs_end.go records them).
	const abandon = `
		SELECT id, job, trigger, epoch, params,
		       CASE WHEN epoch < $1
		            THEN 'the leader running it (epoch ' || epoch || ') went away; a recovery run re-runs the job'
		            WHEN epoch > $1
		            THEN 'its term (epoch ' || epoch || ') was lost with a failover of the database; a recovery run re-runs the job'
		            ELSE 'the leader (epoch ' || epoch || ') lost track of it; a recovery run re-runs the job' END
		FROM job_runs
		WHERE status = 'running' AND partition_id = $3 AND (epoch <> $1 OR (epoch = $1 AND id = ANY($2::bigint[])))
		  AND callback_accepted_at IS NULL -- its target has it; the watcher ends it (callbacks.go)
		ORDER BY id
		FOR UPDATE`
	// Queued, so the leader's queue picks it up like a manual run: the leader of the job's
	// partition, as for a manual run (the run's own partition but for a run left from before
	// the cluster's number of partitions changed). A job that already has its bound of
	// active runs (overlap.go) gets none: those do the recovering. A recovery never replaces
	// a run.
	const recover = `
		INSERT INTO job_runs (job, trigger, status, params, recovers_run_id, partition_id)
		SELECT $1, 'recovery', 'queued', $2, $3, job_run_partition($1)
		WHERE (` + activeSQL + `) < job_run_bound($1)
		  AND NOT EXISTS (SELECT 1 FROM job_runs WHERE recovers_run_id = $3)
		ON CONFLICT DO NOTHING
		RETURNING id`
	if err := tx.lockActiveRuns(ctx); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, abandon, tx.epoch, orphans, tx.partition)
	if err != nil {
		return nil, fmt.Errorf("abandon runs nobody runs: %w", err)
	}
	type left struct {
		Abandoned
		params json.RawMessage
		error  *string
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (left, error) {
		var l left
		err := row.Scan(&l.ID, &l.Job, &l.Trigger, &l.Epoch, &l.params, &l.error)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("abandon runs nobody runs: %w", err)
	}
	ends := make([]Finish, len(runs))
	for i, l := range runs {
		ends[i] = Finish{RunID: l.ID, Status: StatusAbandoned, Error: l.error}
	}
	if _, err := tx.endRuns(ctx, now, ends); err != nil { // every one: they are locked
		return nil, fmt.Errorf("abandon runs nobody runs: %w", err)
	}
	out := make([]Abandoned, 0, len(runs))
	for _, l := range runs {
		err := tx.QueryRow(ctx, recover, l.Job, l.params, l.ID).Scan(&l.RecoveryID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("queue recovery of run %d: %w", l.ID, err)
		}
		out = append(out, l.Abandoned)
	}
	return out, nil
}
