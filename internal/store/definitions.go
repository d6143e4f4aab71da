package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// job_definitions: runtime jobs, written by the API (any replica) and read by the leader,
// which reloads a definition when DefinitionsChannel names it.

// DefinitionsChannel is the NOTIFY channel of definition changes (migration 0012's trigger);
// the payload is the job's name.
const DefinitionsChannel = "scheduler_definitions"

// StoredDefinition is one row of job_definitions.
type StoredDefinition struct {
	Name       string
	Version    int64
	Kind       string
	Definition json.RawMessage
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Partition is the partition whose leader runs the job (scheduler_partition_of its name).
	Partition int `db:"partition_id"`
}

// Errors of definition writes the API answers with their own status.
var (
	ErrDefinitionExists   = errors.New("a runtime job with this name exists")
	ErrDefinitionNotFound = errors.New("no runtime job has this name")
	// ErrVersionMismatch is a write whose If-Match names a version that is no longer current.
	ErrVersionMismatch = errors.New("the definition changed since the version given")
	// ErrTooManyJobs is a create beyond SCHEDULER_MAX_JOBS.
	ErrTooManyJobs = errors.New("the scheduler holds its maximum number of runtime jobs")
)

const definitionColumns = `name, version, kind, definition, created_at, updated_at, partition_id`

func scanDefinition(row pgx.Row) (StoredDefinition, error) {
	var d StoredDefinition
	err := row.Scan(&d.Name, &d.Version, &d.Kind, &d.Definition, &d.CreatedAt, &d.UpdatedAt, &d.Partition)
	return d, err
}

// definitionPartitionSQL is the partition of the job named $1: its key's hash over the
// cluster's partitions, 0 in a cluster that has not written its number yet (one partition).
// The key is the name as stored ("ns/name" outside namespace default), so every replica and
// version places a job in the same partition.
const definitionPartitionSQL = `coalesce(scheduler_partition_of($1, (SELECT partitions FROM scheduler_cluster WHERE id = 1)), 0)`

// CreateDefinition stores a new runtime job at version 1, in its partition
// (definitionPartitionSQL), unless the name is taken
// (ErrDefinitionExists) or maxJobs runtime jobs exist (ErrTooManyJobs). Creates lock the
// row definitionsLock of scheduler_locks, so concurrent creates on several replicas cannot
// pass the limit together; run it inside Atomically so the lock lasts until commit.
func (q queries) CreateDefinition(ctx context.Context, name, kind string, def json.RawMessage, maxJobs int) (StoredDefinition, error) {
	const count = `SELECT count(*) FROM job_definitions`
	const insert = `
		INSERT INTO job_definitions (name, kind, definition, partition_id) VALUES ($1, $2, $3, ` + definitionPartitionSQL + `)
		RETURNING ` + definitionColumns
	if err := lockRow(ctx, q.q, definitionsLock); err != nil {
		return StoredDefinition{}, err
	}
	var n int64
	if err := q.q.QueryRow(ctx, count).Scan(&n); err != nil {
		return StoredDefinition{}, fmt.Errorf("count runtime jobs: %w", err)
	}
	if n >= int64(maxJobs) {
		return StoredDefinition{}, fmt.Errorf("%w (%d; SCHEDULER_MAX_JOBS)", ErrTooManyJobs, maxJobs)
	}
	if err := q.checkNamespaceQuota(ctx, name); err != nil {
		return StoredDefinition{}, err
	}
	d, err := scanDefinition(q.q.QueryRow(ctx, insert, name, kind, def))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return StoredDefinition{}, ErrDefinitionExists
	}
	if err != nil {
		return StoredDefinition{}, fmt.Errorf("create runtime job %s: %w", name, err)
	}
	return d, nil
}

// checkNamespaceQuota refuses a create in a namespace that does not exist
// (ErrNamespaceNotFound) or holds its max_jobs (ErrNamespaceQuota). The caller holds
// definitionsLock, so two creates cannot pass the quota together. A namespace without
// max_jobs (default among them) has its jobs not counted: a count a create would grow with
// every job defined, which made 10 000 creates one after the other take twice as long.
func (q queries) checkNamespaceQuota(ctx context.Context, key string) error {
	const quota = `
		SELECT n.max_jobs,
		       CASE WHEN n.max_jobs IS NULL THEN 0
		            ELSE (SELECT count(*) FROM job_definitions d WHERE d.namespace = n.name) END
		FROM scheduler_namespaces n
		WHERE n.name = CASE WHEN strpos($1, '/') > 0 THEN split_part($1, '/', 1) ELSE 'default' END`
	var max *int
	var n int
	err := q.q.QueryRow(ctx, quota, key).Scan(&max, &n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNamespaceNotFound
	case err != nil:
		return fmt.Errorf("read the namespace's quota: %w", err)
	case max != nil && n >= *max:
		return fmt.Errorf("%w (%d)", ErrNamespaceQuota, *max)
	}
	return nil
}

// ReplaceDefinition replaces a runtime job's definition and bumps its version, when
// ifVersion is 0 or the current version (else ErrVersionMismatch). It returns the
// definition before and after. An unchanged definition keeps its version, so applying the
// same file twice changes nothing.
func (q queries) ReplaceDefinition(ctx context.Context, name, kind string, def json.RawMessage, ifVersion int64) (before, after StoredDefinition, err error) {
	const update = `
		UPDATE job_definitions
		SET kind = $2, definition = $3, version = version + 1, updated_at = now()
		WHERE name = $1 AND definition IS DISTINCT FROM $3::jsonb
		RETURNING ` + definitionColumns
	before, err = q.lockDefinition(ctx, name, ifVersion)
	if err != nil {
		return before, after, err
	}
	after, err = scanDefinition(q.q.QueryRow(ctx, update, name, kind, def))
	if errors.Is(err, pgx.ErrNoRows) {
		return before, before, nil
	}
	if err != nil {
		return before, after, fmt.Errorf("replace runtime job %s: %w", name, err)
	}
	return before, after, nil
}

// DeleteDefinition deletes a runtime job (its runs stay in job_runs) when ifVersion is 0
// or the current version, and returns what it was.
func (q queries) DeleteDefinition(ctx context.Context, name string, ifVersion int64) (StoredDefinition, error) {
	before, err := q.lockDefinition(ctx, name, ifVersion)
	if err != nil {
		return before, err
	}
	// Its slots waiting for its active run (store/after.go) go with it: nothing would queue them.
	if _, err := q.q.Exec(ctx, `WITH w AS (DELETE FROM scheduler_after_waiting WHERE job = $1)
		DELETE FROM job_definitions WHERE name = $1`, name); err != nil {
		return before, fmt.Errorf("delete runtime job %s: %w", name, err)
	}
	return before, nil
}

// lockDefinition reads a definition FOR UPDATE and checks its version.
func (q queries) lockDefinition(ctx context.Context, name string, ifVersion int64) (StoredDefinition, error) {
	d, err := scanDefinition(q.q.QueryRow(ctx,
		`SELECT `+definitionColumns+` FROM job_definitions WHERE name = $1 FOR UPDATE`, name))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return d, ErrDefinitionNotFound
	case err != nil:
		return d, fmt.Errorf("read runtime job %s: %w", name, err)
	case ifVersion != 0 && d.Version != ifVersion:
		return d, fmt.Errorf("%w (given %d, current %d)", ErrVersionMismatch, ifVersion, d.Version)
	}
	return d, nil
}

// Definition returns one runtime job's definition, or ErrDefinitionNotFound.
func (q queries) Definition(ctx context.Context, name string) (StoredDefinition, error) {
	d, err := scanDefinition(q.q.QueryRow(ctx, `SELECT `+definitionColumns+` FROM job_definitions WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, ErrDefinitionNotFound
	}
	if err != nil {
		return d, fmt.Errorf("read runtime job %s: %w", name, err)
	}
	return d, nil
}

// Definitions returns every runtime job, by name.
func (q queries) Definitions(ctx context.Context) ([]StoredDefinition, error) {
	return q.definitions(ctx, `SELECT `+definitionColumns+` FROM job_definitions ORDER BY name`)
}

// PartitionDefinitions returns the runtime jobs of partition, by name: what its leader runs.
func (q queries) PartitionDefinitions(ctx context.Context, partition int) ([]StoredDefinition, error) {
	return q.definitions(ctx, `SELECT `+definitionColumns+` FROM job_definitions WHERE partition_id = $1 ORDER BY name`, partition)
}

func (q queries) definitions(ctx context.Context, sql string, args ...any) ([]StoredDefinition, error) {
	rows, err := q.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list runtime jobs: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredDefinition, error) { return scanDefinition(row) })
	if err != nil {
		return nil, fmt.Errorf("list runtime jobs: %w", err)
	}
	return list, nil
}

// DefinitionHead names a runtime job's current version: enough for a reader that keeps
// what it derived from each version to know whether it must read the definition again.
type DefinitionHead struct {
	Name    string
	Version int64
}

// DefinitionHeadsAfter is DefinitionsAfter without the definitions: a page of GET /v1/jobs
// on a replica that already decoded and checked most of them (reading 10 000 definitions
// costs more than the rest of the list's queries).
// Only namespace ns's jobs are listed, by key (names in default, "ns/name" elsewhere).
func (q queries) DefinitionHeadsAfter(ctx context.Context, ns, after string, limit int) ([]DefinitionHead, error) {
	rows, err := q.q.Query(ctx, `SELECT name, version FROM job_definitions WHERE namespace = $1 AND name > $2 ORDER BY name LIMIT $3`,
		ns, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list runtime job versions after %q: %w", after, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DefinitionHead])
	if err != nil {
		return nil, fmt.Errorf("list runtime job versions after %q: %w", after, err)
	}
	return list, nil
}

// EveryDefinitionHeadAfter is DefinitionHeadsAfter over every namespace, in (namespace,
// key) order: the admin's list of every team's jobs (GET /v1/jobs?namespace=*). A page
// starts after the key after of namespace afterNS ("" and "": from the first).
func (q queries) EveryDefinitionHeadAfter(ctx context.Context, afterNS, after string, limit int) ([]DefinitionHead, error) {
	rows, err := q.q.Query(ctx, `SELECT name, version FROM job_definitions WHERE (namespace, name) > ($1, $2)
		ORDER BY namespace, name LIMIT $3`, afterNS, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list every namespace's runtime job versions after %q: %w", after, err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DefinitionHead])
	if err != nil {
		return nil, fmt.Errorf("list every namespace's runtime job versions after %q: %w", after, err)
	}
	return list, nil
}

// DefinitionsNamed returns the named runtime jobs that exist, by name.
func (q queries) DefinitionsNamed(ctx context.Context, names []string) ([]StoredDefinition, error) {
	rows, err := q.q.Query(ctx, `SELECT `+definitionColumns+` FROM job_definitions WHERE name = ANY ($1::text[]) ORDER BY name`,
		names)
	if err != nil {
		return nil, fmt.Errorf("read %d runtime jobs: %w", len(names), err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredDefinition, error) { return scanDefinition(row) })
	if err != nil {
		return nil, fmt.Errorf("read %d runtime jobs: %w", len(names), err)
	}
	return list, nil
}

// DefinitionVersions returns the current version of every runtime job of partition, by name:
// what its leader's poll compares with what it runs, so it reloads only what changed.
func (q queries) DefinitionVersions(ctx context.Context, partition int) (map[string]int64, error) {
	rows, err := q.q.Query(ctx, `SELECT name, version FROM job_definitions WHERE partition_id = $1`, partition)
	if err != nil {
		return nil, fmt.Errorf("list runtime job versions: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("list runtime job versions: %w", err)
		}
		out[name] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runtime job versions: %w", err)
	}
	return out, nil
}
