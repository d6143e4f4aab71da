package store

import (
	"context"
	"fmt"
	"time"
)

// Advisory locks of this database, for GET /v1/locks.

// KnownLock names an advisory lock the scheduler takes with a fixed key,
// hashtextextended(Name, 0), so the lock view can say what it is for.
type KnownLock struct {
	Name    string
	Meaning string
}

// KnownLocks are the scheduler's fixed-key advisory locks. Per-entity locks of the jobs use
// hashtextextended('<job>:<entity id>', 0), which cannot be reversed, so they show as keys.
var KnownLocks = []KnownLock{
	{Name: "scheduler-leader", Meaning: "leader election: held by the leader's dedicated session"},
	{Name: activeRunsLock, Meaning: "one active run per job: held by a transaction that claims slots or queues a run"},
	{Name: "scheduler:run_partitions", Meaning: "adding the day partitions of job_runs and run_attempts"},
	{Name: "scheduler:job_definitions", Meaning: "creating a runtime job definition (the cap on their number)"},
}

// activeRunsLock serialises the transactions that write a queued or running run: slot
// claims, manual runs and recoveries. Each partition of job_runs has a unique index on its
// job's active run, but a partitioned table has no index across partitions: two
// transactions writing an active run of the same job into two days (a catch-up slot of
// yesterday, a manual run of today) would both pass it. Under this lock each writer's
// "no active run" check reads every earlier writer's commit.
const activeRunsLock = "scheduler:active_runs"

// lockActiveRuns takes activeRunsLock until the transaction ends. The check that follows it
// must be a later statement: a statement's snapshot is taken when it starts.
func lockActiveRuns(ctx context.Context, q dbtx) error {
	_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('`+activeRunsLock+`', 0))`)
	if err != nil {
		return fmt.Errorf("take the lock on active runs: %w", err)
	}
	return nil
}

// AdvisoryLock is one advisory lock held or awaited in this database.
type AdvisoryLock struct {
	PID             int32
	ApplicationName string
	Granted         bool
	Mode            string
	// Key is the 64-bit key of pg_advisory_lock(bigint) (ObjSubID 1); for the two-int4 form
	// (ObjSubID 2) it is ClassID and ObjID side by side the same way.
	Key      int64
	ClassID  uint32
	ObjID    uint32
	ObjSubID int16
	// Since is when the wait began (waiting) or, for a granted lock, the start of the
	// holder's transaction, or of its session when it is idle (a session-level lock such as
	// the leader's) — PostgreSQL does not record when an advisory lock was granted.
	Since *time.Time
	// AgeMS is now() - Since in milliseconds, on the database clock.
	AgeMS *int64
	Known *KnownLock
}

// AdvisoryLocks lists the advisory locks of the current database from pg_locks joined with
// pg_stat_activity, holders first, oldest first.
func (q queries) AdvisoryLocks(ctx context.Context) ([]AdvisoryLock, error) {
	names := make([]string, len(KnownLocks))
	for i, k := range KnownLocks {
		names[i] = k.Name
	}
	rows, err := q.q.Query(ctx, `
		WITH known AS (
			SELECT name, hashtextextended(name, 0) AS key FROM unnest($1::text[]) AS name
		), locks AS (
			SELECT l.pid, l.granted, l.mode, l.classid::int8 AS classid, l.objid::int8 AS objid, l.objsubid,
			       (l.classid::int8 << 32) | l.objid::int8 AS key,
			       CASE WHEN l.granted THEN coalesce(a.xact_start, a.backend_start) ELSE l.waitstart END AS since,
			       coalesce(a.application_name, '') AS application_name
			FROM pg_locks l
			LEFT JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory'
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		)
		SELECT locks.pid, locks.application_name, locks.granted, locks.mode, locks.key,
		       locks.classid, locks.objid, locks.objsubid, locks.since,
		       (extract(epoch FROM now() - locks.since) * 1000)::int8, known.name
		FROM locks
		LEFT JOIN known ON known.key = locks.key AND locks.objsubid = 1
		ORDER BY locks.granted DESC, locks.since NULLS LAST, locks.key, locks.pid`, names)
	if err != nil {
		return nil, fmt.Errorf("list advisory locks: %w", err)
	}
	defer rows.Close()
	var list []AdvisoryLock
	for rows.Next() {
		var l AdvisoryLock
		var classID, objID int64
		var known *string
		if err := rows.Scan(&l.PID, &l.ApplicationName, &l.Granted, &l.Mode, &l.Key, &classID, &objID,
			&l.ObjSubID, &l.Since, &l.AgeMS, &known); err != nil {
			return nil, fmt.Errorf("list advisory locks: %w", err)
		}
		l.ClassID, l.ObjID = uint32(classID), uint32(objID)
		if known != nil {
			for i := range KnownLocks {
				if KnownLocks[i].Name == *known {
					l.Known = &KnownLocks[i]
				}
			}
		}
		list = append(list, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list advisory locks: %w", err)
	}
	return list, nil
}
