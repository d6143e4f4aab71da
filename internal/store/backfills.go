package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// scheduler_backfills: a job's slots to run again, chosen when the backfill is asked for and
// run one at a time, in order, by the leader (engine/backfills.go).

// Backfill is one row of scheduler_backfills.
type Backfill struct {
	ID           int64
	Job          string
	Since, Until time.Time
	Only         string // missed, failed or all
	Slots        []time.Time
	// Next is the index in Slots of the next slot to queue; RunID the run queued last.
	Next      int
	RunID     *int64
	State     string // running, done, cancelled
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Backfill states.
const (
	BackfillRunning   = "running"
	BackfillDone      = "done"
	BackfillCancelled = "cancelled"
)

var (
	// ErrBackfillRunning is a backfill asked for a job that has one running.
	ErrBackfillRunning = errors.New("a backfill of this job is running")
	// ErrBackfillNotFound is an id that names no backfill.
	ErrBackfillNotFound = errors.New("no backfill has this id")
)

const backfillColumns = `id, job, since, until, only_status, slots, next, run_id, state, created_at, updated_at`

func scanBackfill(row pgx.Row) (Backfill, error) {
	var b Backfill
	err := row.Scan(&b.ID, &b.Job, &b.Since, &b.Until, &b.Only, &b.Slots, &b.Next, &b.RunID, &b.State, &b.CreatedAt, &b.UpdatedAt)
	return b, err
}

// backfillIDDraws bounds the draws of a random id (migration 0024) that another backfill
// already has: with 2^48 ids one draw is almost always enough.
const backfillIDDraws = 3

// CreateBackfill stores a running backfill, unless its job has one running
// (ErrBackfillRunning). Its id is drawn at random, so that backfill ids tell nobody how many
// other namespaces made; an id taken already (ON CONFLICT (id)) is drawn again, while a
// running backfill of the job still fails the insert.
func (q queries) CreateBackfill(ctx context.Context, b Backfill) (Backfill, error) {
	for range backfillIDDraws {
		out, err := scanBackfill(q.q.QueryRow(ctx, `
			INSERT INTO scheduler_backfills (job, since, until, only_status, slots) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (id) DO NOTHING
			RETURNING `+backfillColumns, b.Job, b.Since, b.Until, b.Only, b.Slots))
		var pgErr *pgconn.PgError
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue
		case errors.As(err, &pgErr) && pgErr.Code == "23505":
			return Backfill{}, ErrBackfillRunning
		case err != nil:
			return Backfill{}, fmt.Errorf("create a backfill of %s: %w", b.Job, err)
		}
		return out, nil
	}
	return Backfill{}, fmt.Errorf("create a backfill of %s: %d random ids in a row were taken", b.Job, backfillIDDraws)
}

// Backfill returns the backfill with id, or ErrBackfillNotFound.
func (q queries) Backfill(ctx context.Context, id int64) (Backfill, error) {
	b, err := scanBackfill(q.q.QueryRow(ctx, `SELECT `+backfillColumns+` FROM scheduler_backfills WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Backfill{}, ErrBackfillNotFound
	}
	if err != nil {
		return Backfill{}, fmt.Errorf("read backfill %d: %w", id, err)
	}
	return b, nil
}

// RunningBackfills returns the running backfills of every partition's jobs, oldest first (by
// created_at: ids are random): the coordinator steps them all (engine/backfills.go).
func (q queries) RunningBackfills(ctx context.Context) ([]Backfill, error) {
	rows, err := q.q.Query(ctx, `SELECT `+backfillColumns+` FROM scheduler_backfills
		WHERE state = 'running' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list running backfills: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Backfill, error) { return scanBackfill(row) })
	if err != nil {
		return nil, fmt.Errorf("list running backfills: %w", err)
	}
	return list, nil
}

// AdvanceBackfill records that the slot at index next was queued as run runID (nil: passed
// over), when the backfill is still running at that index; ok is false otherwise
// (cancelled, or another leader advanced it), and the caller's transaction must then roll
// the run back.
func (q queries) AdvanceBackfill(ctx context.Context, id int64, next int, runID *int64) (ok bool, err error) {
	tag, err := q.q.Exec(ctx, `
		UPDATE scheduler_backfills SET next = next + 1, run_id = coalesce($3, run_id), updated_at = now()
		WHERE id = $1 AND next = $2 AND state = 'running'`, id, next, runID)
	if err != nil {
		return false, fmt.Errorf("advance backfill %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// EndBackfill moves a running backfill to state (done or cancelled) and returns it;
// ErrBackfillNotFound when no running backfill has the id.
func (q queries) EndBackfill(ctx context.Context, id int64, state string) (Backfill, error) {
	b, err := scanBackfill(q.q.QueryRow(ctx, `
		UPDATE scheduler_backfills SET state = $2, updated_at = now() WHERE id = $1 AND state = 'running'
		RETURNING `+backfillColumns, id, state))
	if errors.Is(err, pgx.ErrNoRows) {
		return Backfill{}, ErrBackfillNotFound
	}
	if err != nil {
		return Backfill{}, fmt.Errorf("end backfill %d: %w", id, err)
	}
	return b, nil
}
