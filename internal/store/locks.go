package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The scheduler's locks, and the locks of this database for GET /v1/locks.
//
// The scheduler excludes itself with row locks on its own table scheduler_locks (migration
// 0014): any login on this database can take any advisory lock, so a job's backend could
// take a fixed-key advisory lock and stall every claim, but a login without privileges on
// scheduler_locks cannot lock its rows (docs/design.md guarantee 12). Only the election
// stays an advisory lock: it must be a session's, and the elector ends other logins'
// backends that hold or await it (internal/leader/guard.go).

// Kinds of lock in the view.
const (
	LockAdvisory = "advisory"
	LockRow      = "row" // a row of scheduler_locks, locked FOR UPDATE
)

// KnownLock names a lock of the scheduler, so the lock view can say what it is for. An
// advisory one's key is hashtextextended(Name, 0); a row one is the row Name of
// scheduler_locks.
type KnownLock struct {
	Name    string
	Kind    string
	Meaning string
}

// KnownLocks are the scheduler's locks. Per-entity advisory locks of the jobs use
// hashtextextended('<job>:<entity id>', 0), which cannot be reversed, so they show as keys.
var KnownLocks = []KnownLock{
	{Name: "scheduler-leader", Kind: LockAdvisory, Meaning: "leader election: held by the leader's dedicated session"},
	{Name: activeRunsLock, Kind: LockRow, Meaning: "a job's bound of active runs: held by a transaction that claims slots or queues a run"},
	{Name: "scheduler:run_partitions", Kind: LockRow, Meaning: "adding the day partitions of job_runs and run_attempts"},
	{Name: definitionsLock, Kind: LockRow, Meaning: "creating a runtime job definition (the cap on their number)"},
	{Name: oidcKeysLock, Kind: LockRow, Meaning: "creating or rotating the OIDC signing keys of the targets' tokens"},
}

// activeRunsLock serialises the transactions that write a queued or running run: slot
// claims, manual runs, re-runs and recoveries. A job has a bound of active runs (overlap.go),
// which no index can hold: it is a count, and across the day partitions of job_runs. Under
// this lock each writer's count reads every earlier writer's commit; the trigger
// job_runs_active_bound (migrations 0021, 0030) takes it too, to count again after the insert.
//
// The bound is a job's, and a job lives in one partition, so the lock is a partition's
// (activeRunsLockOf): this row is partition 0's, partition p's is "scheduler:active_runs:p".
// One row for all would make every partition's claims wait for each other's, on whatever
// replica leads them.
const activeRunsLock = "scheduler:active_runs"

// activeRunsLockOf is the lock row of partition p's active runs (the SQL function
// scheduler_active_runs_lock, migration 0030, names the same rows).
func activeRunsLockOf(p int) string {
	if p == 0 {
		return activeRunsLock
	}
	return activeRunsLock + ":" + strconv.Itoa(p)
}

// definitionsLock serialises the creates of runtime jobs, so concurrent creates on several
// replicas cannot pass the cap on their number together.
const definitionsLock = "scheduler:job_definitions"

// lockRow takes the named row of scheduler_locks until the transaction ends. The check that
// follows it must be a later statement: a statement's snapshot is taken when it starts.
// (scheduler_add_run_day takes scheduler:run_partitions the same way, in SQL.)
func lockRow(ctx context.Context, q dbtx, name string) error {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM scheduler_locks WHERE name = $1 FOR UPDATE) AS locked`, name).Scan(&n)
	switch {
	case err != nil:
		return fmt.Errorf("take the lock %s: %w", name, err)
	case n != 1:
		// A missing row would lock nothing and exclude nobody: refuse rather than race.
		return fmt.Errorf("take the lock %s: no such row in scheduler_locks; run the migrations", name)
	}
	return nil
}

// lockActiveRuns takes the active runs' lock of the transaction's partition until it ends.
func (tx *Tx) lockActiveRuns(ctx context.Context) error {
	return lockRow(ctx, tx, activeRunsLockOf(tx.partition))
}

// lockActiveRunsOf takes the active runs' lock of job's partition (its definition's; 0 for a
// built-in job) until the transaction ends: the API's writers of queued runs, which run on
// any replica, outside a term.
func lockActiveRunsOf(ctx context.Context, q dbtx, job string) error {
	var p int
	if err := q.QueryRow(ctx, `SELECT job_run_partition($1)`, job).Scan(&p); err != nil {
		return fmt.Errorf("read the partition of %s: %w", job, err)
	}
	return lockRow(ctx, q, activeRunsLockOf(p))
}

// Lock is one lock held or awaited in this database: an advisory lock, or a row of
// scheduler_locks.
type Lock struct {
	Kind            string // LockAdvisory or LockRow
	PID             int32
	ApplicationName string
	Granted         bool
	// Mode is pg_locks' mode for an advisory lock, "FOR UPDATE" for a row.
	Mode string
	// Key is the 64-bit key of pg_advisory_lock(bigint) (ObjSubID 1); for the two-int4 form
	// (ObjSubID 2) it is ClassID and ObjID side by side the same way. All four are zero for
	// a row lock.
	Key      int64
	ClassID  uint32
	ObjID    uint32
	ObjSubID int16
	// Since is when the wait began (waiting) or, for a granted lock, the start of the
	// holder's transaction, or of its session when it is idle (a session-level lock such as
	// the leader's) — PostgreSQL does not record when a lock was granted.
	Since *time.Time
	// AgeMS is now() - Since in milliseconds, on the database clock.
	AgeMS *int64
	// Known is set for the scheduler's own locks: every row lock, and the leader's.
	Known *KnownLock
}

// locksSQL lists the advisory locks of the current database from pg_locks, and the holders
// and waiters of scheduler_locks' rows, joined with pg_stat_activity; holders first, oldest
// first. $1 are the known advisory locks' names: only those are named, so another login's
// advisory lock on a retired key such as 'scheduler:active_runs' shows as a bare key.
//
// PostgreSQL shows no row lock in pg_locks while it is only held: a row locked FOR UPDATE
// carries its locker's transaction id in xmax, and that transaction holds the lock on its
// own id while it runs (xmax outlives the locker; the join on a granted lock keeps the
// running ones). A waiter queues on the row's tuple lock (the first one holds it while it
// waits for the holder's transaction id).
const locksSQL = `
WITH known AS (
    SELECT name, hashtextextended(name, 0) AS key FROM unnest($1::text[]) AS name
), advisory AS (
    SELECT l.pid, l.granted, l.mode, l.classid::int8 AS classid, l.objid::int8 AS objid, l.objsubid,
           (l.classid::int8 << 32) | l.objid::int8 AS key,
           CASE WHEN l.granted THEN coalesce(a.xact_start, a.backend_start) ELSE l.waitstart END AS since,
           coalesce(a.application_name, '') AS application_name
    FROM pg_locks l
    LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), row_holders AS (
    SELECT s.name, l.pid, true AS granted, a.xact_start AS since, coalesce(a.application_name, '') AS application_name
    FROM scheduler_locks s
    JOIN pg_locks l ON l.locktype = 'transactionid' AND l.granted AND l.mode = 'ExclusiveLock'
                   AND l.transactionid = s.xmax
    LEFT JOIN pg_stat_activity a ON a.pid = l.pid
), row_waiters AS (
    SELECT s.name, l.pid, false AS granted,
           (SELECT min(w.waitstart) FROM pg_locks w WHERE w.pid = l.pid AND NOT w.granted) AS since,
           coalesce(a.application_name, '') AS application_name
    FROM scheduler_locks s
    JOIN pg_locks l ON l.locktype = 'tuple' AND l.relation = 'scheduler_locks'::regclass
                   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND format('(%s,%s)', l.page, l.tuple)::tid = s.ctid
    LEFT JOIN pg_stat_activity a ON a.pid = l.pid
), locks AS (
    SELECT 'advisory' AS kind, advisory.pid, advisory.application_name, advisory.granted, advisory.mode,
           advisory.key, advisory.classid, advisory.objid, advisory.objsubid, advisory.since, known.name
    FROM advisory
    LEFT JOIN known ON known.key = advisory.key AND advisory.objsubid = 1
    UNION ALL
    SELECT 'row', pid, application_name, granted, 'FOR UPDATE', 0, 0, 0, 0, since, name FROM row_holders
    UNION ALL
    SELECT 'row', pid, application_name, granted, 'FOR UPDATE', 0, 0, 0, 0, since, name FROM row_waiters
)
SELECT kind, pid, application_name, granted, mode, key, classid, objid, objsubid, since,
       (extract(epoch FROM now() - since) * 1000)::int8, name
FROM locks
ORDER BY granted DESC, since NULLS LAST, kind, key, name, pid`

// Locks lists the locks of the current database (locksSQL).
func (q queries) Locks(ctx context.Context) ([]Lock, error) {
	var names []string
	for _, k := range KnownLocks {
		if k.Kind == LockAdvisory {
			names = append(names, k.Name)
		}
	}
	rows, err := q.q.Query(ctx, locksSQL, names)
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	defer rows.Close()
	var list []Lock
	for rows.Next() {
		var l Lock
		var classID, objID int64
		var known *string
		if err := rows.Scan(&l.Kind, &l.PID, &l.ApplicationName, &l.Granted, &l.Mode, &l.Key, &classID, &objID,
			&l.ObjSubID, &l.Since, &l.AgeMS, &known); err != nil {
			return nil, fmt.Errorf("list locks: %w", err)
		}
		l.ClassID, l.ObjID = uint32(classID), uint32(objID)
		if known != nil {
			name := *known
			if strings.HasPrefix(name, activeRunsLock+":") {
				name = activeRunsLock // a partition's row of the same lock
			}
			for i := range KnownLocks {
				if KnownLocks[i].Name == name && KnownLocks[i].Kind == l.Kind {
					l.Known = &KnownLocks[i]
				}
			}
		}
		list = append(list, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	return list, nil
}
