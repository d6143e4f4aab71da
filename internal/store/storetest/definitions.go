package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/store"
)

// DefinitionOpts are the fields of a runtime job definition a test sets.
type DefinitionOpts struct {
	Name string // required; "<namespace>/<name>" outside namespace default
	Kind string // defaults to http
	// Definition is stored as given, unchecked: a test may store what the API would refuse.
	// It defaults to an empty object.
	Definition json.RawMessage
}

// Definition stores a runtime job definition at version 1 and returns it as stored.
func Definition(ctx context.Context, t testing.TB, db DBTX, o DefinitionOpts) store.StoredDefinition {
	t.Helper()
	if o.Kind == "" {
		o.Kind = "http"
	}
	if o.Definition == nil {
		o.Definition = json.RawMessage(`{}`)
	}
	d, err := insertDefinition(ctx, db, o)
	if err != nil {
		t.Fatalf("storetest: insert the definition %s: %v", o.Name, err)
	}
	return d
}

func insertDefinition(ctx context.Context, db DBTX, o DefinitionOpts) (store.StoredDefinition, error) {
	rows, err := db.Query(ctx, `INSERT INTO job_definitions (name, kind, definition) VALUES ($1, $2, $3)
		RETURNING name, version, kind, definition, created_at, updated_at, partition_id`, o.Name, o.Kind, string(o.Definition))
	if err != nil {
		return store.StoredDefinition{}, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[store.StoredDefinition])
}

// NamespaceOpts are the fields of a namespace a test sets; a zero quota is unbounded.
type NamespaceOpts struct {
	Name               string // required
	MaxJobs            int
	MaxConcurrentCalls int
	MinInterval        time.Duration
}

// Namespace creates a namespace.
func Namespace(ctx context.Context, t testing.TB, db DBTX, o NamespaceOpts) {
	t.Helper()
	_, err := db.Exec(ctx, `INSERT INTO scheduler_namespaces (name, max_jobs, max_concurrent_calls, min_interval_ms)
		VALUES ($1, nullif($2, 0), nullif($3, 0), nullif($4, 0))`,
		o.Name, o.MaxJobs, o.MaxConcurrentCalls, o.MinInterval.Milliseconds())
	if err != nil {
		t.Fatalf("storetest: insert the namespace %s: %v", o.Name, err)
	}
}
