package store

import "time"

// ListRunsSQL lets the external tests EXPLAIN the history query.
var ListRunsSQL = listRunsSQL

// RecentRunsSQL is the history query ListRuns sends first: bounded to the cursor's day and
// the day before.
func RecentRunsSQL(f RunFilter, now time.Time) (string, []any) {
	f.fromID = recentIDFloor(f.BeforeID, now)
	return listRunsSQL(f)
}

// ClaimSettings and ClaimSQL let the external tests EXPLAIN the bulk claim as ClaimSlots
// sends it.
const ClaimSettings = claimSettings

var ClaimSQL = claimSQL

// EndRunsSQL lets the external tests EXPLAIN the one statement that ends runs.
const EndRunsSQL = endRunsSQL

// PoolMaxConns is the cap of db's pool.
func PoolMaxConns(db *DB) int32 { return db.pool.Config().MaxConns }
