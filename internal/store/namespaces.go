package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// scheduler_namespaces: the namespaces that own runtime jobs and secrets, with their quotas.

// Namespace is one row of scheduler_namespaces. A nil quota is unbounded.
type Namespace struct {
	Name               string
	MaxJobs            *int
	MaxConcurrentCalls *int
	MinInterval        *time.Duration
	// The namespace's outbound surface (internal/outbound): the SQL targets its jobs may
	// name, the private addresses and hosts they may call, and the operator's environment
	// secrets they may name. Nil is "never set", which only namespace default may be (it
	// then keeps what it had before, docs/operations.md); on a put, nil leaves the field as
	// it is.
	SQLTargets *[]string
	HTTPAllow  *[]string
	EnvSecrets *[]string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ErrNamespaceNotFound is a namespace that does not exist.
var ErrNamespaceNotFound = errors.New("no namespace has this name")

// GrantsEnvSecret reports whether the namespace's jobs may name the operator's environment
// secret name (SCHEDULER_SECRET_<NAME>): one an admin granted it (env_secrets), or, in a
// namespace default whose grants were never set, any (a target's password is never one:
// internal/outbound keeps those out of the operator's secrets).
func (n Namespace) GrantsEnvSecret(name string) bool {
	if n.EnvSecrets == nil {
		return n.Name == "default"
	}
	return slices.Contains(*n.EnvSecrets, name)
}

// ErrNamespaceQuota is a create beyond the namespace's max_jobs.
var ErrNamespaceQuota = errors.New("the namespace holds its maximum number of jobs")

const namespaceColumns = `name, max_jobs, max_concurrent_calls, min_interval_ms, sql_targets, http_allow, env_secrets, created_at, updated_at`

// scanNamespace scans namespaceColumns, then into extra the columns a query selects after
// them.
func scanNamespace(row pgx.Row, extra ...any) (Namespace, error) {
	var n Namespace
	var minMS *int64
	err := row.Scan(append([]any{&n.Name, &n.MaxJobs, &n.MaxConcurrentCalls, &minMS, &n.SQLTargets, &n.HTTPAllow, &n.EnvSecrets, &n.CreatedAt, &n.UpdatedAt}, extra...)...)
	if minMS != nil {
		d := time.Duration(*minMS) * time.Millisecond
		n.MinInterval = &d
	}
	return n, err
}

func millis(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// PutNamespace creates the namespace or sets its quotas and the outbound fields it gives
// (a nil one stays as it is; a new namespace starts with none), and reports whether it
// created it.
func (q queries) PutNamespace(ctx context.Context, n Namespace) (Namespace, bool, error) {
	const upsert = `
		INSERT INTO scheduler_namespaces (name, max_jobs, max_concurrent_calls, min_interval_ms,
			sql_targets, http_allow, env_secrets)
		VALUES ($1, $2, $3, $4, coalesce($5::text[], '{}'), coalesce($6::text[], '{}'), coalesce($7::text[], '{}'))
		ON CONFLICT (name) DO UPDATE SET max_jobs = EXCLUDED.max_jobs,
			max_concurrent_calls = EXCLUDED.max_concurrent_calls,
			min_interval_ms = EXCLUDED.min_interval_ms,
			sql_targets = coalesce($5::text[], scheduler_namespaces.sql_targets),
			http_allow = coalesce($6::text[], scheduler_namespaces.http_allow),
			env_secrets = coalesce($7::text[], scheduler_namespaces.env_secrets),
			updated_at = now()
		RETURNING ` + namespaceColumns + `, xmax = 0`
	var created bool
	out, err := scanNamespace(q.q.QueryRow(ctx, upsert, n.Name, n.MaxJobs, n.MaxConcurrentCalls, millis(n.MinInterval),
		n.SQLTargets, n.HTTPAllow, n.EnvSecrets), &created)
	if err != nil {
		return Namespace{}, false, fmt.Errorf("put namespace %s: %w", n.Name, err)
	}
	return out, created, nil
}

// Namespace returns the named namespace, or ErrNamespaceNotFound.
func (q queries) Namespace(ctx context.Context, name string) (Namespace, error) {
	n, err := scanNamespace(q.q.QueryRow(ctx, `SELECT `+namespaceColumns+` FROM scheduler_namespaces WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Namespace{}, ErrNamespaceNotFound
	}
	if err != nil {
		return Namespace{}, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return n, nil
}

// NamespaceCounts are a namespace's jobs and secrets.
type NamespaceCounts struct{ Jobs, Secrets int }

// Namespaces returns the namespaces named (all when names is nil) by name, with how many
// jobs and secrets each holds.
func (q queries) Namespaces(ctx context.Context, names []string) ([]Namespace, map[string]NamespaceCounts, error) {
	const list = `
		SELECT ` + namespaceColumns + `,
		       (SELECT count(*) FROM job_definitions d WHERE d.namespace = n.name),
		       (SELECT count(*) FROM scheduler_secrets s WHERE s.namespace = n.name)
		FROM scheduler_namespaces n
		WHERE $1::text[] IS NULL OR name = ANY($1)
		ORDER BY name`
	rows, err := q.q.Query(ctx, list, names)
	if err != nil {
		return nil, nil, fmt.Errorf("list namespaces: %w", err)
	}
	defer rows.Close()
	var out []Namespace
	counts := map[string]NamespaceCounts{}
	for rows.Next() {
		var c NamespaceCounts
		n, err := scanNamespace(rows, &c.Jobs, &c.Secrets)
		if err != nil {
			return nil, nil, fmt.Errorf("list namespaces: %w", err)
		}
		out = append(out, n)
		counts[n.Name] = c
	}
	return out, counts, rows.Err()
}
