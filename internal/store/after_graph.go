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

// runLinksSQL is the run's parents (its parent_run_ids) and the runs it caused: the child
// rows whose parents name it, among its job's children's slots from the run's slot up to
// its job's next recorded slot (a later parent's slot completes the first parent's slots in
// that range; the first parent's, its own slot only).
const runLinksSQL = `
WITH r AS (
	SELECT id, job, parent_run_ids, job_run_slot(id) AS slot FROM job_runs WHERE id = $1
), upto AS (
	SELECT coalesce((SELECT min(x.scheduled_at) FROM job_runs x, r WHERE x.job = r.job AND x.scheduled_at > r.slot), 'infinity') AS t
)
SELECT coalesce((SELECT parent_run_ids FROM r), '{}'),
       ARRAY(SELECT c.id FROM r, upto, job_definitions d
             JOIN job_runs c ON c.job = d.name
             WHERE d.after_keys @> ARRAY[r.job] AND c.scheduled_at >= r.slot AND c.scheduled_at < upto.t
               AND c.rerun = 0 AND c.parent_run_ids @> ARRAY[r.id]
             ORDER BY c.id)`

// RunLinks returns the runs a run came from (a child's parent runs) and the child runs it
// caused.
func (q queries) RunLinks(ctx context.Context, id int64) (parents, caused []int64, err error) {
	if err := q.q.QueryRow(ctx, runLinksSQL, id).Scan(&parents, &caused); err != nil {
		return nil, nil, fmt.Errorf("read the runs linked to run %d: %w", id, err)
	}
	// None is nil, so that a run of a job without parents or children shows neither.
	if len(parents) == 0 {
		parents = nil
	}
	if len(caused) == 0 {
		caused = nil
	}
	return parents, caused, nil
}
