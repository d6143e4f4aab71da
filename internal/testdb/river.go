package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverGrants let a SQL target's login insert River jobs and touch nothing else of River's:
// what a team grants the login its river jobs use (River's insert is an INSERT … ON CONFLICT
// DO UPDATE, hence UPDATE). Pass them to Login after MigrateRiver.
var RiverGrants = []string{
	`GRANT SELECT, INSERT, UPDATE ON river_job TO %s`,
	`GRANT USAGE ON SEQUENCE river_job_id_seq TO %s`,
}

// MigrateRiver migrates River's schema up, as its administrator does, in the public schema of
// the database at u, a River job target's database.
func MigrateRiver(t testing.TB, u string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("testdb: open pool for River's migration: %v", err)
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatalf("testdb: River's migrator: %v", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("testdb: migrate River's schema: %v", err)
	}
}
