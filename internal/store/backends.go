package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Backends the scheduler ends because they stand in its way: a job's backend (another
// login, any application_name) holding the leader row or the election's lock, or a deposed
// leader's backends (docs/design.md guarantees 8 and 12). They are found by the locks they
// hold or wait for, and by login, never by a name alone: any backend can call itself
// scheduler:<instance>, or anything else.

// Backend is one PostgreSQL backend, as pg_stat_activity describes it: enough for an
// operator to find who it was.
type Backend struct {
	PID             int32
	User            string
	ApplicationName string
	ClientAddr      string // "" for a Unix socket
}

// String is "pid 123 user jobs application_name x client 10.0.0.5", for errors.
func (b Backend) String() string {
	return fmt.Sprintf("pid %d user %q application_name %q client %q", b.PID, b.User, b.ApplicationName, b.ClientAddr)
}

// insufficientPrivilege is SQLSTATE 42501: pg_terminate_backend on a backend this login may
// not signal (it is not a superuser nor in pg_signal_backend, or the backend is a
// superuser's).
const insufficientPrivilege = "42501"

// terminateWait is how long a termination waits for the backend to be gone, so a retry of
// what it blocked does not meet it still exiting.
const terminateWait = time.Second

// ErrCannotTerminate means the scheduler's login may not terminate a backend that blocks
// the election. The error names the backends and what to grant.
var ErrCannotTerminate = errors.New("the scheduler's login may not terminate a backend that blocks the election")

// backendColumns reads a Backend from pg_stat_activity a.
const backendColumns = `a.pid, coalesce(a.usename, ''), coalesce(a.application_name, ''), coalesce(host(a.client_addr), '')`

func scanBackends(rows pgx.Rows) ([]Backend, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Backend, error) {
		var b Backend
		err := row.Scan(&b.PID, &b.User, &b.ApplicationName, &b.ClientAddr)
		return b, err
	})
}

// terminateBackends terminates each backend, waiting up to terminateWait for it to be gone.
// It returns those it terminated (or found already gone); the backends its login may not
// terminate make an ErrCannotTerminate error, after the others were terminated.
func terminateBackends(ctx context.Context, q dbtx, list []Backend) ([]Backend, error) {
	var done, refused []Backend
	for _, b := range list {
		var ok bool
		err := q.QueryRow(ctx, `SELECT pg_terminate_backend($1, $2)`, b.PID, terminateWait.Milliseconds()).Scan(&ok)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == insufficientPrivilege:
			refused = append(refused, b)
		case err != nil:
			return done, fmt.Errorf("terminate backend %s: %w", b, err)
		default:
			// false: it was gone already, or still exiting after the wait; either way it
			// was sent the signal no statement can trap.
			done = append(done, b)
		}
	}
	if len(refused) > 0 {
		names := make([]string, len(refused))
		for i, b := range refused {
			names[i] = b.String()
		}
		var login string
		if err := q.QueryRow(ctx, `SELECT current_user`).Scan(&login); err != nil {
			login = "<the scheduler's login>"
		}
		return done, fmt.Errorf("%w: %s; as a superuser run GRANT pg_signal_backend TO %s "+
			"(a superuser's backend can be terminated only by a superuser: never give a job a superuser login)",
			ErrCannotTerminate, strings.Join(names, ", "), pgx.Identifier{login}.Sanitize())
	}
	return done, nil
}

// electionInterlopersSQL finds the backends of other logins that hold or await the
// election's advisory lock or a partition's (a job's backend holding partition p's lock
// would keep p from every replica), or a lock on the term rows beyond a plain read (a login
// granted UPDATE by mistake, holding the leader row FOR SHARE, would hold up the leader's
// renewal until its followers took it for paused). Any login on this database can take the
// advisory keys without a privilege; only the scheduler's login (current_user) has a reason
// to.
var electionInterlopersSQL = `
SELECT DISTINCT ` + backendColumns + `
FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE (` + isLeaderLock + `
       OR (` + advisoryOnThisDB + ` AND ` + advisoryKeyOf + ` IN (
           SELECT ` + fmt.Sprintf(partitionLockKey, "partition_id") + ` FROM scheduler_partitions))
       OR (l.relation IN ('scheduler_leader'::regclass, 'scheduler_partitions'::regclass)
           AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
           AND l.mode <> 'AccessShareLock'))
  AND a.usename IS DISTINCT FROM current_user
ORDER BY a.pid`

// EndElectionInterlopers terminates the backends of other logins that hold or await the
// election's lock, and returns them. Those its login may not terminate make an
// ErrCannotTerminate error naming the GRANT to run.
func (db *DB) EndElectionInterlopers(ctx context.Context) ([]Backend, error) {
	rows, err := db.pool.Query(ctx, electionInterlopersSQL)
	if err != nil {
		return nil, fmt.Errorf("find other logins' backends on the election's lock: %w", err)
	}
	found, err := scanBackends(rows)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return terminateBackends(ctx, db.pool, found)
}
