package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// scheduler_tokens: API tokens made through the API. Only a SHA-256 of each value is kept.

// Token is one row of scheduler_tokens. Namespace is nil for an admin token.
type Token struct {
	ID        string
	Name      string
	Role      string
	Namespace *string
	CreatedAt time.Time
	CreatedBy string
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// ErrTokenNotFound is a token id that names no token.
var ErrTokenNotFound = errors.New("no token has this id")

const tokenColumns = `id, name, role, namespace, created_at, created_by, expires_at, revoked_at`

func scanToken(row pgx.Row) (Token, error) {
	var t Token
	err := row.Scan(&t.ID, &t.Name, &t.Role, &t.Namespace, &t.CreatedAt, &t.CreatedBy, &t.ExpiresAt, &t.RevokedAt)
	return t, err
}

// CreateToken stores a token under the hash of its value. A namespace that does not exist
// is ErrNamespaceNotFound.
func (q queries) CreateToken(ctx context.Context, t Token, hash []byte) (Token, error) {
	const insert = `
		INSERT INTO scheduler_tokens (id, name, role, namespace, hash, created_by, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING ` + tokenColumns
	out, err := scanToken(q.q.QueryRow(ctx, insert, t.ID, t.Name, t.Role, t.Namespace, hash, t.CreatedBy, t.ExpiresAt))
	if isForeignKeyViolation(err) {
		return Token{}, ErrNamespaceNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("create token: %w", err)
	}
	return out, nil
}

// Tokens returns every token, revoked ones too, newest first.
func (q queries) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := q.q.Query(ctx, `SELECT `+tokenColumns+` FROM scheduler_tokens ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token (once: a revoked token keeps its first revocation time).
func (q queries) RevokeToken(ctx context.Context, id string) (Token, error) {
	const revoke = `
		UPDATE scheduler_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
		RETURNING ` + tokenColumns
	t, err := scanToken(q.q.QueryRow(ctx, revoke, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrTokenNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return t, nil
}

// ActiveToken returns the token whose value hashes to hash, when it is neither revoked nor
// expired by the database's clock; ok is false otherwise.
func (q queries) ActiveToken(ctx context.Context, hash []byte) (t Token, ok bool, err error) {
	const active = `
		SELECT ` + tokenColumns + ` FROM scheduler_tokens
		WHERE hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`
	t, err = scanToken(q.q.QueryRow(ctx, active, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("look up a token: %w", err)
	}
	return t, true, nil
}

// isForeignKeyViolation reports a write that names a row another table does not hold.
func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}
