// Package seal seals the secrets that teams store through the API, so that the
// database holds none of them in clear: a dump, a replica of the database or a reader of
// scheduler_secrets learns names, versions and hosts, never a value.
//
// A value is sealed with AES-256-GCM under the key of SCHEDULER_SECRET_KEY, with a random
// nonce of its own, and the namespace and name of its row as additional data: a sealed value
// copied into another row (another namespace's, another name's) does not open, so a person
// who may write the table but not read the key cannot move ops' secret to billing. Each value
// is stored with the id of its key, so that a rotation (SCHEDULER_SECRET_KEY_PREVIOUS holds
// the older keys, for reading only) can find what it has not re-sealed yet.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// aadPrefix starts the additional data of every sealed value: it names the format, so a
// later format cannot open this one's values by mistake, nor the other way round.
const aadPrefix = "scheduler-secret/v1\x00"

// NoKeyHint says how to give a replica a key; every refusal for want of one ends with it.
const NoKeyHint = "set SCHEDULER_SECRET_KEY on every replica to a key of 32 random bytes in standard base64 (make one with `openssl rand -base64 32`), then restart them"

// ErrNoKey is a seal asked of a box without a current key.
var ErrNoKey = errors.New("no SCHEDULER_SECRET_KEY is set, so secrets cannot be stored: " + NoKeyHint)

// Key is one parsed key. Its bytes never leave it: it prints as its id.
type Key struct {
	id   string
	aead cipher.AEAD
}

// ParseKey reads a key written in standard base64 (what `openssl rand -base64 32` prints).
// Its error never repeats the value.
func ParseKey(encoded string) (*Key, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return nil, errors.New("not standard base64")
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%d bytes once decoded; a key is %d", len(raw), KeySize)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{id: KeyID(raw), aead: aead}, nil
}

// KeyID names a key: the first 8 hex digits of its SHA-256. 32 bits of a hash of 256 random
// bits say nothing about the key, and tell two keys apart in a listing.
func KeyID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:4])
}

// ID is the key's id.
func (k *Key) ID() string { return k.id }

// String keeps a key out of every log line and error: %v prints its id alone.
func (k *Key) String() string { return "secretbox.Key(" + k.id + ")" }

// GoString is String, for %#v.
func (k *Key) GoString() string { return k.String() }

// Box seals with its current key and opens with any of its keys. A Box without a current key
// opens nothing and seals nothing; it still says what it lacks.
type Box struct {
	current *Key
	keys    map[string]*Key // by id, the current one included
}

// New makes a box of the current key (nil: none) and the previous ones, which only open.
func New(current *Key, previous ...*Key) *Box {
	b := &Box{current: current, keys: map[string]*Key{}}
	for _, k := range previous {
		if k != nil {
			b.keys[k.id] = k
		}
	}
	if current != nil {
		b.keys[current.id] = current
	}
	return b
}

// CanSeal reports whether the box has a current key.
func (b *Box) CanSeal() bool { return b != nil && b.current != nil }

// CurrentID is the current key's id, "" without one.
func (b *Box) CurrentID() string {
	if !b.CanSeal() {
		return ""
	}
	return b.current.id
}

// String prints the keys' ids, never their bytes.
func (b *Box) String() string {
	if b == nil {
		return "secretbox.Box(no key)"
	}
	ids := make([]string, 0, len(b.keys))
	for id := range b.keys {
		if id != b.CurrentID() {
			ids = append(ids, id)
		}
	}
	return fmt.Sprintf("secretbox.Box(current=%q, previous=%q)", b.CurrentID(), ids)
}

// GoString is String, for %#v.
func (b *Box) GoString() string { return b.String() }

// Seal seals value for the row (namespace, name) with the current key: the nonce, then the
// ciphertext and its tag.
func (b *Box) Seal(namespace, name string, value []byte) (keyID string, sealed []byte, err error) {
	if !b.CanSeal() {
		return "", nil, ErrNoKey
	}
	nonce := make([]byte, b.current.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("draw a nonce: %w", err)
	}
	return b.current.id, b.current.aead.Seal(nonce, nonce, value, aad(namespace, name)), nil
}

// OpenError says why a sealed value did not open. It names the row and the key id, never
// a byte of the value.
type OpenError struct {
	Namespace, Name, KeyID string
	Reason                 string
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("secret %s of namespace %s (sealed with key %s) does not open: %s", e.Name, e.Namespace, e.KeyID, e.Reason)
}

// Open opens what Seal sealed for the same row with the key keyID.
func (b *Box) Open(namespace, name, keyID string, sealed []byte) ([]byte, error) {
	fail := func(reason string) error {
		return &OpenError{Namespace: namespace, Name: name, KeyID: keyID, Reason: reason}
	}
	var k *Key
	if b != nil {
		k = b.keys[keyID]
	}
	switch {
	case k == nil && !b.CanSeal():
		return nil, fail("this replica has no key. " + NoKeyHint)
	case k == nil:
		return nil, fail(fmt.Sprintf("this replica does not have that key (its current key is %s): add the key to SCHEDULER_SECRET_KEY_PREVIOUS on every replica", b.CurrentID()))
	case len(sealed) < k.aead.NonceSize()+k.aead.Overhead():
		return nil, fail("the sealed value is too short")
	}
	n := k.aead.NonceSize()
	value, err := k.aead.Open(nil, sealed[:n], sealed[n:], aad(namespace, name))
	if err != nil {
		// GCM says only that the tag did not match: another key, another row, or altered bytes.
		return nil, fail("it was not sealed for this row with this key, or it was altered")
	}
	return value, nil
}

// aad binds a sealed value to its row. Neither part holds a NUL (a namespace is a DNS
// label, a name upper-case letters, digits and _), so the encoding is unambiguous.
func aad(namespace, name string) []byte {
	return []byte(aadPrefix + namespace + "\x00" + name)
}
