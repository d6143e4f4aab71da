package idp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Rotation is what a change of the keys did.
type Rotation struct {
	// Current is the key that signs after it; Previous the one it replaced ("" when none
	// was replaced).
	Current, Previous string
	// Retired are the previous keys unpublished by it.
	Retired []string
}

// Maintain brings the keys to what is due now: the first key and its next key when there
// are none, a rotation when the current key has signed RotateEvery, the retirement of a
// previous key whose tokens have all expired. It reads the keys without a lock first, and
// changes nothing when nothing is due, so every replica may call it often.
func (k *Keys) Maintain(ctx context.Context) error {
	_, err := k.change(ctx, false, nil)
	return err
}

// Rotate makes the next key current now, whatever the schedule, and record (when set) runs
// in the same transaction (the API's audit row). It is refused with a *TooSoonError while the
// next key has not been published for PrePublication.
func (k *Keys) Rotate(ctx context.Context, record func(ex store.Executor, r Rotation) error) (Rotation, error) {
	return k.change(ctx, true, record)
}

// List returns the keys, retired ones too, for an admin's view; no private half.
func (k *Keys) List(ctx context.Context) ([]store.OIDCKey, error) {
	keys, err := k.c.DB.OIDCKeys(ctx, true)
	for i := range keys {
		keys[i].Sealed, keys[i].KeyID = nil, ""
	}
	return keys, err
}

func (k *Keys) change(ctx context.Context, force bool, record func(ex store.Executor, r Rotation) error) (Rotation, error) {
	if err := k.CanSign(); err != nil {
		return Rotation{}, err
	}
	if !force {
		keys, err := k.c.DB.OIDCKeys(ctx, false)
		if err != nil {
			return Rotation{}, err
		}
		now, err := k.now(ctx, k.c.DB)
		if err != nil {
			return Rotation{}, err
		}
		if !k.due(keys, now) {
			return Rotation{}, k.remember(keys)
		}
	}
	var rot Rotation
	err := k.c.DB.Atomically(ctx, func(ex store.Executor) error {
		rot = Rotation{}
		if err := ex.LockOIDCKeys(ctx); err != nil {
			return err
		}
		// Read under the lock: another replica may have done it all meanwhile.
		now, err := k.now(ctx, ex)
		if err != nil {
			return err
		}
		keys, err := ex.OIDCKeys(ctx, false)
		if err != nil {
			return err
		}
		current, next := find(keys)
		switch {
		case current == nil && next != nil:
			// Never reached by this code (the first key is made current); a row written by
			// hand: the published next key is the best to sign with.
			if err := ex.PromoteOIDCKey(ctx, next.KID, now); err != nil {
				return err
			}
			current, next = next, nil
		case current == nil:
			// The first key signs at once: no verifier can hold a key set without it, since
			// the key set is never served before it exists (and go-oidc fetches the key set
			// again on an unknown kid).
			made, err := k.newKey(store.OIDCKeyCurrent)
			if err != nil {
				return err
			}
			if err := ex.InsertOIDCKey(ctx, made, now); err != nil {
				return err
			}
			current = &made
		case force || !now.Before(current.CurrentAt.Add(k.c.RotateEvery)):
			if next == nil {
				break // made below; it signs after its pre-publication
			}
			if ready := next.CreatedAt.Add(k.c.PrePublication); now.Before(ready) {
				if force {
					return &TooSoonError{Next: next.KID, Published: next.CreatedAt, ReadyAt: ready}
				}
				break
			}
			if err := ex.PromoteOIDCKey(ctx, next.KID, now); err != nil {
				return err
			}
			rot.Previous = current.KID
			current, next = next, nil
		}
		rot.Current = current.KID
		if next == nil {
			made, err := k.newKey(store.OIDCKeyNext)
			if err != nil {
				return err
			}
			if err := ex.InsertOIDCKey(ctx, made, now); err != nil {
				return err
			}
		}
		if rot.Retired, err = ex.RetireOIDCKeys(ctx, now.Add(-k.retention()), now); err != nil {
			return err
		}
		if record != nil {
			return record(ex, rot)
		}
		return nil
	})
	if err != nil {
		return Rotation{}, err
	}
	if rot.Previous != "" || len(rot.Retired) > 0 {
		k.c.Log.Info("the OIDC signing keys changed", "current", rot.Current, "previous", rot.Previous, "retired", rot.Retired, "forced", force)
	}
	keys, err := k.c.DB.OIDCKeys(ctx, false)
	if err != nil {
		return rot, err
	}
	return rot, k.remember(keys)
}

// due reports whether keys need a change at now.
func (k *Keys) due(keys []store.OIDCKey, now time.Time) bool {
	current, next := find(keys)
	if current == nil || next == nil {
		return true
	}
	if !now.Before(current.CurrentAt.Add(k.c.RotateEvery)) && !now.Before(next.CreatedAt.Add(k.c.PrePublication)) {
		return true
	}
	for _, key := range keys {
		if key.State == store.OIDCKeyPrevious && key.PreviousAt.Before(now.Add(-k.retention())) {
			return true
		}
	}
	return false
}

func find(keys []store.OIDCKey) (current, next *store.OIDCKey) {
	for i := range keys {
		switch keys[i].State {
		case store.OIDCKeyCurrent:
			current = &keys[i]
		case store.OIDCKeyNext:
			next = &keys[i]
		}
	}
	return current, next
}

// now is the time the keys change at: Config.Now, else the database's clock, so that
// replicas whose clocks differ agree on when a key was published and when it may sign.
func (k *Keys) now(ctx context.Context, ex store.Executor) (time.Time, error) {
	if k.c.Now != nil {
		return k.c.Now(), nil
	}
	return ex.Now(ctx)
}

// newKey makes a key in state: a P-256 key whose kid is its RFC 7638 thumbprint, its
// public half as a JWK, its private half sealed.
func (k *Keys) newKey(state string) (store.OIDCKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return store.OIDCKey{}, fmt.Errorf("make an OIDC signing key: %w", err)
	}
	pub := jose.JSONWebKey{Key: &priv.PublicKey, Algorithm: Alg, Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return store.OIDCKey{}, fmt.Errorf("make an OIDC signing key: %w", err)
	}
	pub.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	jwk, err := pub.MarshalJSON()
	if err != nil {
		return store.OIDCKey{}, fmt.Errorf("make an OIDC signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return store.OIDCKey{}, fmt.Errorf("make an OIDC signing key: %w", err)
	}
	keyID, sealed, err := k.c.Box.Seal("", sealName(pub.KeyID), der)
	if err != nil {
		return store.OIDCKey{}, err
	}
	return store.OIDCKey{KID: pub.KeyID, Alg: Alg, State: state, PublicJWK: jwk, KeyID: keyID, Sealed: sealed}, nil
}

// sealName binds a sealed private half to its key: secretbox's additional data is the
// namespace and the name, and no namespace is "", so no secret's row can take it.
func sealName(kid string) string { return "oidc-signing-key/" + kid }

// open opens the private half of key.
func (k *Keys) open(key store.OIDCKey) (*ecdsa.PrivateKey, error) {
	der, err := k.c.Box.Open("", sealName(key.KID), key.KeyID, key.Sealed)
	if err != nil {
		return nil, fmt.Errorf("open the OIDC signing key %s: %w", key.KID, err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("open the OIDC signing key %s: %w", key.KID, err)
	}
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("open the OIDC signing key " + key.KID + ": not an ECDSA key")
	}
	return priv, nil
}

// remember keeps keys, and the current one opened to sign, until RefreshEvery. A current
// key this replica cannot open (its SCHEDULER_SECRET_KEY is not the one that sealed it) is
// kept as the reason it cannot sign: the key set, which needs no private half, is still
// served.
func (k *Keys) remember(keys []store.OIDCKey) error {
	current, _ := find(keys)
	var s *signer
	var openErr error
	if current != nil {
		k.mu.Lock()
		priv := k.openings[current.KID]
		k.mu.Unlock()
		if priv == nil {
			priv, openErr = k.open(*current)
		}
		if openErr == nil {
			s, openErr = newSigner(current.KID, priv)
		}
	} else {
		openErr = errors.New("no current OIDC signing key")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys, k.signer, k.signErr, k.read = keys, s, openErr, time.Now()
	if s != nil {
		k.openings = map[string]*ecdsa.PrivateKey{s.kid: s.priv}
	}
	return nil
}

// fresh returns the keys read less than RefreshEvery ago, reading them (and changing what is
// due) otherwise, with the current key's signer, or why there is none.
func (k *Keys) fresh(ctx context.Context) ([]store.OIDCKey, *signer, error) {
	k.mu.Lock()
	read := k.read
	k.mu.Unlock()
	if read.IsZero() || k.c.RefreshEvery <= 0 || time.Since(read) >= k.c.RefreshEvery {
		if err := k.Maintain(ctx); err != nil {
			// The keys read before, stale, for the key set: a verifier is better served by
			// them than by a 503 while the database is away. Nothing is signed meanwhile.
			k.mu.Lock()
			defer k.mu.Unlock()
			return k.keys, nil, err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.signer, k.signErr
}
