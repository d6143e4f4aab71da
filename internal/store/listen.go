package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// RunsChannel is the NOTIFY channel on which job_runs announces a queued run or a cancel
// request (migration 0001's trigger); the payload is the run id.
const RunsChannel = "scheduler_runs"

// RunFinishedChannel is the NOTIFY channel on which a run's end is announced (FinishRun,
// and CancelRun of a queued run), at commit; the payload is the run id. A run abandoned by a
// dead leader is not announced: a waiter's periodic re-read finds it.
const RunFinishedChannel = "scheduler_run_finished"

// Listener is a dedicated connection that LISTENs on one channel: a LISTEN belongs to its
// session, so it cannot be a pooled connection.
type Listener struct {
	conn *pgx.Conn
}

// Listen connects a new session and LISTENs on channel. Notifications sent before it
// returns are not delivered: read the state once after it, then wait.
func (db *DB) Listen(ctx context.Context, channel string) (*Listener, error) {
	conn, err := db.connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("listen on %s: %w", channel, err)
	}
	return &Listener{conn: conn}, nil
}

// Wait blocks until the next notification and returns its payload as a run id (0 when the
// payload is not one). An error means the session is gone: close it and listen again.
func (l *Listener) Wait(ctx context.Context) (int64, error) {
	payload, err := l.WaitPayload(ctx)
	if err != nil {
		return 0, err
	}
	id, _ := strconv.ParseInt(payload, 10, 64)
	return id, nil
}

// WaitPayload blocks until the next notification and returns its payload as sent.
func (l *Listener) WaitPayload(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", err
	}
	return n.Payload, nil
}

// Close ends the session.
func (l *Listener) Close() { closeConn(l.conn) }
