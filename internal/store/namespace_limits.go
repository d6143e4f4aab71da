package store

import (
	"context"
	"fmt"
)

// NamespaceCallLimits returns the namespaces' max_concurrent_calls, those that have one: the
// replica refreshes its per-namespace call bounds from it every few seconds.
func (q queries) NamespaceCallLimits(ctx context.Context) (map[string]int, error) {
	rows, err := q.q.Query(ctx, `SELECT name, max_concurrent_calls FROM scheduler_namespaces WHERE max_concurrent_calls IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read the namespaces' max_concurrent_calls: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("read the namespaces' max_concurrent_calls: %w", err)
		}
		out[name] = n
	}
	return out, rows.Err()
}
