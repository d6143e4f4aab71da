package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// scheduler_oidc_keys: the keys the scheduler signs its targets' OIDC tokens with
// (internal/idp says how they rotate). The private half reaches the store sealed
// (internal/secrets/seal) and leaves it sealed; only internal/idp opens it.

// States of an OIDC signing key, in the order a key goes through them.
const (
	OIDCKeyNext     = "next"     // published, signs nothing yet
	OIDCKeyCurrent  = "current"  // signs every token
	OIDCKeyPrevious = "previous" // published until every token it signed has expired
	OIDCKeyRetired  = "retired"  // unpublished, its private half erased
)

// OIDCKey is one row of scheduler_oidc_keys.
type OIDCKey struct {
	KID   string
	Alg   string
	State string
	// PublicJWK is the public half as a JSON Web Key.
	PublicJWK json.RawMessage
	// KeyID names the SCHEDULER_SECRET_KEY that sealed the private half; Sealed is it
	// (both empty once retired).
	KeyID     string
	Sealed    []byte
	CreatedAt time.Time
	// CurrentAt, PreviousAt, RetiredAt: when it entered each state, nil before.
	CurrentAt, PreviousAt, RetiredAt *time.Time
}

const oidcKeyColumns = `kid, alg, state, public_jwk, coalesce(key_id, ''), sealed, created_at, current_at, previous_at, retired_at`

// oidcKeysLock serialises the creation and rotation of the OIDC signing keys: every replica
// may find a key missing or a rotation due, and only one may act on it.
const oidcKeysLock = "scheduler:oidc_keys"

// LockOIDCKeys takes oidcKeysLock until the transaction ends; run it inside Atomically.
func (q queries) LockOIDCKeys(ctx context.Context) error { return lockRow(ctx, q.q, oidcKeysLock) }

// OIDCKeys returns the signing keys in their order of life (retired, previous, current, next): the published ones (next, current,
// previous), and the retired ones too when withRetired.
func (q queries) OIDCKeys(ctx context.Context, withRetired bool) ([]OIDCKey, error) {
	rows, err := q.q.Query(ctx, `SELECT `+oidcKeyColumns+` FROM scheduler_oidc_keys
		WHERE $1 OR state <> 'retired'
		ORDER BY array_position(ARRAY['retired', 'previous', 'current', 'next'], state), created_at, kid`, withRetired)
	if err != nil {
		return nil, fmt.Errorf("read the OIDC signing keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OIDCKey, error) {
		var k OIDCKey
		err := row.Scan(&k.KID, &k.Alg, &k.State, &k.PublicJWK, &k.KeyID, &k.Sealed, &k.CreatedAt, &k.CurrentAt, &k.PreviousAt, &k.RetiredAt)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the OIDC signing keys: %w", err)
	}
	return keys, nil
}

// InsertOIDCKey adds k in state k.State (next or current), created at `at`.
func (q queries) InsertOIDCKey(ctx context.Context, k OIDCKey, at time.Time) error {
	const insert = `
		INSERT INTO scheduler_oidc_keys (kid, alg, state, public_jwk, key_id, sealed, created_at, current_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $3 = 'current' THEN $7::timestamptz END)`
	if _, err := q.q.Exec(ctx, insert, k.KID, k.Alg, k.State, k.PublicJWK, k.KeyID, k.Sealed, at); err != nil {
		return fmt.Errorf("add the OIDC signing key %s: %w", k.KID, err)
	}
	return nil
}

// PromoteOIDCKey makes key kid current at `at`, and the current key (if any) previous.
func (q queries) PromoteOIDCKey(ctx context.Context, kid string, at time.Time) error {
	// Two statements: the unique index on the current state is checked per statement.
	const demote = `UPDATE scheduler_oidc_keys SET state = 'previous', previous_at = $1 WHERE state = 'current'`
	const promote = `UPDATE scheduler_oidc_keys SET state = 'current', current_at = $2 WHERE kid = $1 AND state = 'next'`
	if _, err := q.q.Exec(ctx, demote, at); err != nil {
		return fmt.Errorf("make the current OIDC signing key previous: %w", err)
	}
	tag, err := q.q.Exec(ctx, promote, kid, at)
	if err != nil {
		return fmt.Errorf("make the OIDC signing key %s current: %w", kid, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("make the OIDC signing key %s current: it is not the next key", kid)
	}
	return nil
}

// RetireOIDCKeys retires, at `at`, the previous keys that became previous before `before`:
// they leave the key set, and their sealed private half is erased. It returns their kids.
func (q queries) RetireOIDCKeys(ctx context.Context, before, at time.Time) ([]string, error) {
	const retire = `
		UPDATE scheduler_oidc_keys SET state = 'retired', retired_at = $2, sealed = NULL, key_id = NULL
		WHERE state = 'previous' AND previous_at < $1
		RETURNING kid`
	rows, err := q.q.Query(ctx, retire, before, at)
	if err != nil {
		return nil, fmt.Errorf("retire the OIDC signing keys: %w", err)
	}
	kids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("retire the OIDC signing keys: %w", err)
	}
	return kids, nil
}

// ResealOIDCKey replaces the sealed private half of key kid, if it is still sealed with
// oldKeyID (nobody re-sealed or retired it meanwhile), and reports whether it did.
func (q queries) ResealOIDCKey(ctx context.Context, kid, oldKeyID, keyID string, sealed []byte) (bool, error) {
	tag, err := q.q.Exec(ctx, `UPDATE scheduler_oidc_keys SET key_id = $3, sealed = $4
		WHERE kid = $1 AND key_id = $2 AND state <> 'retired'`, kid, oldKeyID, keyID, sealed)
	if err != nil {
		return false, fmt.Errorf("re-seal the OIDC signing key %s: %w", kid, err)
	}
	return tag.RowsAffected() == 1, nil
}
