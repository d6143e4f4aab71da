package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The definitions' side of `after` (after.go has the runs'): what the API reads to refuse a
// definition whose parents are missing, close a cycle or make a chain too long, and a delete
// of a job that children still name. Both take definitionsLock when asked (lock), inside the
// API's transaction: two writes that would close a cycle together, or a delete and a create
// naming the job deleted, then decide one after the other, the second seeing the first.

// AfterGraph returns namespace ns's runtime jobs, by key, each with its parents' keys (nil:
// none).
func (q queries) AfterGraph(ctx context.Context, ns string, lock bool) (map[string][]string, error) {
	if lock {
		if err := lockRow(ctx, q.q, definitionsLock); err != nil {
			return nil, err
		}
	}
	rows, err := q.q.Query(ctx, `SELECT name, after_keys FROM job_definitions WHERE namespace = $1`, ns)
	if err != nil {
		return nil, fmt.Errorf("read the parents of namespace %s's jobs: %w", ns, err)
	}
	graph := map[string][]string{}
	var name string
	var parents []string
	_, err = pgx.ForEachRow(rows, []any{&name, &parents}, func() error {
		graph[name] = parents
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the parents of namespace %s's jobs: %w", ns, err)
	}
	return graph, nil
}

// Children returns the keys of the runtime jobs that name key as a parent, by key.
func (q queries) Children(ctx context.Context, key string, lock bool) ([]string, error) {
	if lock {
		if err := lockRow(ctx, q.q, definitionsLock); err != nil {
			return nil, err
		}
	}
	rows, err := q.q.Query(ctx, `SELECT name FROM job_definitions WHERE after_keys @> ARRAY[$1::text] ORDER BY name`, key)
	if err != nil {
		return nil, fmt.Errorf("read the jobs after %s: %w", key, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the jobs after %s: %w", key, err)
	}
	return names, nil
}
