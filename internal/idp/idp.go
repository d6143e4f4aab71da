// Package idp makes the scheduler an OpenID Connect identity provider for its targets: an
// HTTP job whose auth asks for {"oidc": {"audience": "billing"}} sends, on every attempt, a
// short-lived JWT the scheduler signed, which the target verifies with a stock OIDC library
// through the replicas' discovery document. No secret is copied to the target.
//
// A token's issuer is SCHEDULER_PUBLIC_URL; its subject is "<namespace>/<job>", taken from
// the key of the job that runs (the stored definition's namespace and name), never from a
// field the job's author writes, so a job of teama cannot be given a token naming teamb. It
// carries the run id, the slot and the attempt, and lives TokenLifetime.
//
// The signing keys (ES256) live in scheduler_oidc_keys, their private halves sealed with
// SCHEDULER_SECRET_KEY (internal/secrets/seal). A key goes next -> current -> previous ->
// retired, and the key set published at JWKSPath holds next, current and previous:
//
//   - a key is published as next at least PrePublication before it signs, longer than a
//     verifier caches the key set (JWKSMaxAge) plus a replica's cache of the keys, so a
//     verifier that fetched the key set before a rotation already holds the new key;
//   - a key that stops signing stays published as previous until every token it signed has
//     expired (TokenLifetime, plus a replica's cache of the keys, plus clock skew), then is
//     retired and its private half erased.
//
// Every replica may find the first key missing or a rotation due (every RotateEvery, or
// when an admin asks); the row scheduler:oidc_keys of scheduler_locks serialises them, and
// unique indexes allow one current and one next key, so concurrent replicas make one key.
package idp

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	// TokenLifetime is how long a token verifies after it is issued: an attempt's token is
	// made just before the attempt, so minutes are plenty, and a token that leaks is soon
	// worthless.
	TokenLifetime = 5 * time.Minute
	// JWKSMaxAge is how long a verifier may cache the key set and the discovery document
	// (their Cache-Control).
	JWKSMaxAge = 5 * time.Minute
	// RefreshEveryDefault is how long a replica keeps the keys it read from the database
	// before reading them again: a rotation made on another replica reaches its signing
	// within it.
	RefreshEveryDefault = 30 * time.Second
	// PrePublicationDefault is how long a next key is published before it may sign: more
	// than a verifier's cache of the key set plus a replica's cache of the keys.
	PrePublicationDefault = 15 * time.Minute
	// RotateEveryDefault is how long a key signs before the next one takes over
	// (SCHEDULER_OIDC_KEY_ROTATION).
	RotateEveryDefault = config.OIDCKeyRotationDefault
	// clockSkew is the difference between clocks a verifier may allow; a previous key stays
	// published this much longer than its tokens live.
	clockSkew = time.Minute
	// Alg is the one signing algorithm: ECDSA P-256 with SHA-256.
	Alg = "ES256"
)

// Paths of the public documents, served by every replica without a token.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// ErrNoSecretKey is a replica without SCHEDULER_SECRET_KEY: it cannot seal a signing key
// nor open one, so it signs no token.
var ErrNoSecretKey = errors.New("this scheduler signs no OIDC token: the operator must set SCHEDULER_SECRET_KEY, which seals its signing keys in the database; " + seal.NoKeyHint)

// Config is what Keys are built from; zero durations take their defaults.
type Config struct {
	DB *store.DB
	// Box seals and opens the private halves (config's SCHEDULER_SECRET_KEY).
	Box *seal.Box
	// Issuer is SCHEDULER_PUBLIC_URL: the iss of every token, and where verifiers fetch the
	// discovery document.
	Issuer string
	// RotateEvery is how long a key signs (SCHEDULER_OIDC_KEY_ROTATION).
	RotateEvery time.Duration
	// PrePublication is how long a next key is published before it signs.
	PrePublication time.Duration
	// RefreshEvery is how long the keys read are kept; < 0: read at every use (tests).
	RefreshEvery time.Duration
	// Now is the time; nil: the database's clock, read at each change of the keys, and the
	// replica's clock for a token's times.
	Now func() time.Time
	Log *slog.Logger
}

// Keys signs the tokens and publishes the keys of one replica. Safe for concurrent use.
type Keys struct {
	c Config

	mu       sync.Mutex
	read     time.Time // when keys was read, zero: never
	keys     []store.OIDCKey
	signer   *signer // the current key, opened
	signErr  error   // why signer is nil
	openings map[string]*ecdsa.PrivateKey
}

// New makes the Keys of a replica; it touches no database until used.
func New(c Config) *Keys {
	if c.RotateEvery <= 0 {
		c.RotateEvery = RotateEveryDefault
	}
	if c.PrePublication <= 0 {
		c.PrePublication = PrePublicationDefault
	}
	if c.RefreshEvery == 0 {
		c.RefreshEvery = RefreshEveryDefault
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Issuer = strings.TrimRight(c.Issuer, "/")
	return &Keys{c: c, openings: map[string]*ecdsa.PrivateKey{}}
}

// CanSign reports why this replica cannot sign tokens (ErrNoSecretKey), or nil.
func (k *Keys) CanSign() error {
	if k == nil || !k.c.Box.CanSeal() {
		return ErrNoSecretKey
	}
	return nil
}

// Issuer is the iss of the tokens.
func (k *Keys) Issuer() string { return k.c.Issuer }

// retention is how long a previous key stays published: every token it signed, the last
// one signed by a replica that had not yet read the rotation, has expired by then.
func (k *Keys) retention() time.Duration {
	return max(k.c.RefreshEvery, 0) + TokenLifetime + clockSkew
}

// tokenNow is the time a token is issued at.
func (k *Keys) tokenNow() time.Time {
	if k.c.Now != nil {
		return k.c.Now()
	}
	return time.Now()
}

// TooSoonError is a rotation asked before the next key was published long enough: a
// verifier that fetched the key set just before it was added would not know the key.
type TooSoonError struct {
	Next      string
	Published time.Time
	ReadyAt   time.Time
}

func (e *TooSoonError) Error() string {
	return fmt.Sprintf("the next key %s was published at %s; it may sign from %s, once every verifier's cached key set holds it (retry then)",
		e.Next, e.Published.UTC().Format(time.RFC3339), e.ReadyAt.UTC().Format(time.RFC3339))
}
