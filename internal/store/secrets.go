package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// scheduler_secrets: the secrets teams store through the API, per namespace, sealed
// (internal/secrets/seal) before they get here. The store never sees a value in clear, and the
// type the API lists and shows (Secret) has no field for the sealed bytes either: only the
// leader's call and a key rotation read them (SealedSecret).

// Secret is one row of scheduler_secrets without its sealed value.
type Secret struct {
	Namespace string
	Name      string
	// Version counts the puts: 1 when created, one more at each replacement.
	Version int64
	// KeyID names the key the value is sealed with.
	KeyID string
	// AllowedHosts are the hosts ("host" or "host:port") the value may be sent to.
	AllowedHosts []string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// SealedSecret is a row with its sealed value.
type SealedSecret struct {
	Secret
	Sealed []byte
}

// ErrSecretNotFound is a name no secret of the namespace has.
var ErrSecretNotFound = errors.New("no secret has this name in this namespace")

const secretColumns = `namespace, name, version, key_id, allowed_hosts, created_at, updated_at`

func scanSecret(row pgx.Row, extra ...any) (Secret, error) {
	var s Secret
	dest := append([]any{&s.Namespace, &s.Name, &s.Version, &s.KeyID, &s.AllowedHosts, &s.CreatedAt, &s.UpdatedAt}, extra...)
	return s, row.Scan(dest...)
}

// PutSecret stores s.Sealed under (s.Namespace, s.Name): created at version 1, or replaced
// at the next version. It reports whether it created the row; a namespace that does not
// exist is ErrNamespaceNotFound.
func (q queries) PutSecret(ctx context.Context, s SealedSecret) (Secret, bool, error) {
	const upsert = `
		INSERT INTO scheduler_secrets (namespace, name, key_id, sealed, allowed_hosts)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (namespace, name) DO UPDATE SET version = scheduler_secrets.version + 1,
			key_id = EXCLUDED.key_id, sealed = EXCLUDED.sealed, allowed_hosts = EXCLUDED.allowed_hosts,
			updated_at = now()
		RETURNING ` + secretColumns + `, xmax = 0`
	var created bool
	out, err := scanSecret(q.q.QueryRow(ctx, upsert, s.Namespace, s.Name, s.KeyID, s.Sealed, s.AllowedHosts), &created)
	if isForeignKeyViolation(err) {
		return Secret{}, false, ErrNamespaceNotFound
	}
	if err != nil {
		return Secret{}, false, fmt.Errorf("put secret %s of namespace %s: %w", s.Name, s.Namespace, err)
	}
	return out, created, nil
}

// Secret returns the named secret of namespace ns, without its value, or ErrSecretNotFound.
func (q queries) Secret(ctx context.Context, ns, name string) (Secret, error) {
	s, err := scanSecret(q.q.QueryRow(ctx, `SELECT `+secretColumns+` FROM scheduler_secrets WHERE namespace = $1 AND name = $2`, ns, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Secret{}, ErrSecretNotFound
	}
	if err != nil {
		return Secret{}, fmt.Errorf("read secret %s of namespace %s: %w", name, ns, err)
	}
	return s, nil
}

// Secrets lists namespace ns's secrets by name, without their values.
func (q queries) Secrets(ctx context.Context, ns string) ([]Secret, error) {
	rows, err := q.q.Query(ctx, `SELECT `+secretColumns+` FROM scheduler_secrets WHERE namespace = $1 ORDER BY name`, ns)
	if err != nil {
		return nil, fmt.Errorf("list the secrets of namespace %s: %w", ns, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Secret, error) { return scanSecret(row) })
	if err != nil {
		return nil, fmt.Errorf("list the secrets of namespace %s: %w", ns, err)
	}
	return list, nil
}

// SealedSecrets returns the named secrets of namespace ns with their sealed values, those
// that exist: one query for every secret a call uses.
func (q queries) SealedSecrets(ctx context.Context, ns string, names []string) ([]SealedSecret, error) {
	rows, err := q.q.Query(ctx, `SELECT `+secretColumns+`, sealed FROM scheduler_secrets WHERE namespace = $1 AND name = ANY($2)`, ns, names)
	if err != nil {
		return nil, fmt.Errorf("read the secrets of namespace %s: %w", ns, err)
	}
	list, err := pgx.CollectRows(rows, scanSealed)
	if err != nil {
		return nil, fmt.Errorf("read the secrets of namespace %s: %w", ns, err)
	}
	return list, nil
}

func scanSealed(row pgx.CollectableRow) (SealedSecret, error) {
	var s SealedSecret
	var err error
	s.Secret, err = scanSecret(row, &s.Sealed)
	return s, err
}

// DeleteSecret deletes the named secret of namespace ns and returns it, or
// ErrSecretNotFound.
func (q queries) DeleteSecret(ctx context.Context, ns, name string) (Secret, error) {
	s, err := scanSecret(q.q.QueryRow(ctx, `DELETE FROM scheduler_secrets WHERE namespace = $1 AND name = $2 RETURNING `+secretColumns, ns, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Secret{}, ErrSecretNotFound
	}
	if err != nil {
		return Secret{}, fmt.Errorf("delete secret %s of namespace %s: %w", name, ns, err)
	}
	return s, nil
}

// A key rotation (`scheduler secret-key rotate`) reads the rows not sealed with the current
// key a page at a time, and writes each back re-sealed only if nobody changed it meanwhile.

// SecretsToReseal returns up to limit rows whose key is not keyID, after the row
// (afterNamespace, afterName) in (namespace, name) order: a keyset page, so a row that
// cannot be re-sealed (its key is missing) does not come back on every page.
func (q queries) SecretsToReseal(ctx context.Context, keyID, afterNamespace, afterName string, limit int) ([]SealedSecret, error) {
	const page = `
		SELECT ` + secretColumns + `, sealed FROM scheduler_secrets
		WHERE key_id <> $1 AND (namespace, name) > ($2, $3)
		ORDER BY namespace, name
		LIMIT $4`
	rows, err := q.q.Query(ctx, page, keyID, afterNamespace, afterName, limit)
	if err != nil {
		return nil, fmt.Errorf("read the secrets to re-seal: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanSealed)
	if err != nil {
		return nil, fmt.Errorf("read the secrets to re-seal: %w", err)
	}
	return list, nil
}

// ResealSecret replaces the sealed value of the row s read, with the same value sealed under
// keyID, if the row still has s's version and key; it reports whether it did. The version
// stays: the value is the same, and a put made meanwhile (a newer version) is never
// overwritten with the older value.
func (q queries) ResealSecret(ctx context.Context, s SealedSecret, keyID string, sealed []byte) (bool, error) {
	const reseal = `
		UPDATE scheduler_secrets SET key_id = $5, sealed = $6
		WHERE namespace = $1 AND name = $2 AND version = $3 AND key_id = $4`
	tag, err := q.q.Exec(ctx, reseal, s.Namespace, s.Name, s.Version, s.KeyID, keyID, sealed)
	if err != nil {
		return false, fmt.Errorf("re-seal secret %s of namespace %s: %w", s.Name, s.Namespace, err)
	}
	return tag.RowsAffected() == 1, nil
}

// SecretKeyIDs counts the stored secrets by the id of the key that seals them.
func (q queries) SecretKeyIDs(ctx context.Context) (map[string]int, error) {
	rows, err := q.q.Query(ctx, `SELECT key_id, count(*) FROM scheduler_secrets GROUP BY key_id`)
	if err != nil {
		return nil, fmt.Errorf("count the secrets by key: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count the secrets by key: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}
