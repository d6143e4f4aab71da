package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RunsChannel is the NOTIFY channel on which job_runs announces a queued run or a cancel
// request (migration 0001's trigger); the payload is the run id.
const RunsChannel = "scheduler_runs"

// RunFinishedChannel is the NOTIFY channel on which every run's end is announced, by the one
// statement that writes ends (endRunsSQL), at commit; the payload is the run id. A run a dead
// leader left is announced when the next leader's rescuer marks it abandoned.
const RunFinishedChannel = "scheduler_run_finished"

// ListenSession is a dedicated connection that receives notifications: listening belongs
// to a session, so it cannot be a pooled connection. The replica's notifier
// (internal/pglisten) holds the only one; nothing else listens.
type ListenSession struct {
	conn *pgx.Conn
}

// OpenListenSession connects a new session that listens on nothing yet.
func (db *DB) OpenListenSession(ctx context.Context) (*ListenSession, error) {
	conn, err := db.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &ListenSession{conn: conn}, nil
}

// Listen starts (on) or stops receiving channel's notifications. Notifications sent before
// it returns are not delivered: read the state once after it, then wait.
func (s *ListenSession) Listen(ctx context.Context, channel string, on bool) error {
	stmt := "LISTEN " + pgx.Identifier{channel}.Sanitize()
	if !on {
		stmt = "UN" + stmt
	}
	if _, err := s.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// Wait waits until ctx ends (ok false, err nil: the session stays usable, pgx only sets a
// read deadline) or a notification arrives, and returns its channel and payload. An error
// means the session failed: close it and open another.
func (s *ListenSession) Wait(ctx context.Context) (channel, payload string, ok bool, err error) {
	n, err := s.conn.WaitForNotification(ctx)
	switch {
	case n != nil:
		return n.Channel, n.Payload, true, nil
	case ctx.Err() != nil:
		return "", "", false, nil
	default:
		return "", "", false, err
	}
}

// Close ends the session.
func (s *ListenSession) Close() { closeConn(s.conn) }
