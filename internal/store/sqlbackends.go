package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SQLBackend is the backend a SQL job's run has in its target (scheduler_sql_backends).
type SQLBackend struct {
	RunID        int64
	Target       string
	PID          uint32
	BackendStart time.Time
}

// RecordSQLBackend records the backend of a run that is about to run its statements.
func (tx *Tx) RecordSQLBackend(ctx context.Context, b SQLBackend) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO scheduler_sql_backends (run_id, target, pid, backend_start) VALUES ($1, $2, $3, $4)
		ON CONFLICT (run_id) DO UPDATE SET target = $2, pid = $3, backend_start = $4, recorded_at = now()`,
		b.RunID, b.Target, int64(b.PID), b.BackendStart)
	if err != nil {
		return fmt.Errorf("record the SQL run's backend: %w", err)
	}
	return nil
}

// ForgetSQLBackend drops the record of a run whose backend ended with it.
func (q queries) ForgetSQLBackend(ctx context.Context, runID int64) error {
	if _, err := q.q.Exec(ctx, `DELETE FROM scheduler_sql_backends WHERE run_id = $1`, runID); err != nil {
		return fmt.Errorf("forget the SQL run's backend: %w", err)
	}
	return nil
}

// TakeSQLBackends removes and returns the records of runs, and every record left behind
// by a run that is no longer running (a crash between its end and ForgetSQLBackend).
func (tx *Tx) TakeSQLBackends(ctx context.Context, runs []int64) ([]SQLBackend, error) {
	rows, err := tx.Query(ctx, `
		DELETE FROM scheduler_sql_backends b
		WHERE b.run_id = ANY($1::bigint[])
		   OR NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.id = b.run_id AND r.status = 'running')
		RETURNING run_id, target, pid, backend_start`, runs)
	if err != nil {
		return nil, fmt.Errorf("take the SQL runs' backends: %w", err)
	}
	backends, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SQLBackend, error) {
		var b SQLBackend
		var pid int64
		err := row.Scan(&b.RunID, &b.Target, &pid, &b.BackendStart)
		b.PID = uint32(pid)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("take the SQL runs' backends: %w", err)
	}
	return backends, nil
}
