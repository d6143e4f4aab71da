package store

import (
	"context"
	"fmt"
)

// scheduler_sql_logins: the SQL target logins each namespace has bound. A login serves one
// namespace, so that one team's jobs can never run as the login another team's jobs use
// (and so read its tables, or make its slots look done).

// BindSQLLogins makes logins (each "user@host:port/database") the ones namespace ns has
// bound, releasing those it no longer names, and returns the logins another namespace holds,
// with that namespace, which it did not bind: the caller refuses the whole change then (its
// transaction rolls back).
//
// Two namespaces binding one login at once meet on the table's primary key: the second
// insert waits for the first transaction, and once that commits it finds the row (ON
// CONFLICT DO NOTHING), and the read that follows, a statement of its own, sees it. So
// never do both win.
func (q queries) BindSQLLogins(ctx context.Context, ns string, logins []string) (map[string]string, error) {
	const (
		release = `DELETE FROM scheduler_sql_logins WHERE namespace = $1 AND NOT (login = ANY($2))`
		bind    = `
			INSERT INTO scheduler_sql_logins (login, namespace)
			SELECT DISTINCT l, $1 FROM unnest($2::text[]) AS l
			ON CONFLICT (login) DO NOTHING`
		held = `SELECT login, namespace FROM scheduler_sql_logins WHERE login = ANY($2) AND namespace <> $1`
	)
	if logins == nil {
		logins = []string{}
	}
	if _, err := q.q.Exec(ctx, release, ns, logins); err != nil {
		return nil, fmt.Errorf("release the SQL logins of namespace %s: %w", ns, err)
	}
	if _, err := q.q.Exec(ctx, bind, ns, logins); err != nil {
		return nil, fmt.Errorf("bind the SQL logins of namespace %s: %w", ns, err)
	}
	return q.sqlLogins(ctx, held, ns, logins)
}

// SQLLogins returns every bound login with its namespace.
func (q queries) SQLLogins(ctx context.Context) (map[string]string, error) {
	return q.sqlLogins(ctx, `SELECT login, namespace FROM scheduler_sql_logins`)
}

func (q queries) sqlLogins(ctx context.Context, query string, args ...any) (map[string]string, error) {
	rows, err := q.q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the bound SQL logins: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var login, ns string
		if err := rows.Scan(&login, &ns); err != nil {
			return nil, fmt.Errorf("read the bound SQL logins: %w", err)
		}
		out[login] = ns
	}
	return out, rows.Err()
}
