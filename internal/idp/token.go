package idp

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/namespace"
)

// Token is what one attempt's token says.
type Token struct {
	// Job is the key of the job that runs (internal/namespace): its namespace and name make
	// the subject.
	Job      string
	Audience string
	RunID    int64
	// ScheduledAt is the slot; zero for a manual run, then left out.
	ScheduledAt time.Time
	Attempt     int
}

// Claims are the scheduler's claims beside the registered ones (iss, sub, aud, iat, nbf, exp,
// jti), as a receiver reads them.
type Claims struct {
	Namespace   string `json:"namespace"`
	Job         string `json:"job"`
	RunID       int64  `json:"run_id"`
	ScheduledAt string `json:"scheduled_at,omitempty"` // RFC 3339, UTC
	Attempt     int    `json:"attempt,omitempty"`
	ID          string `json:"jti"`
}

// own are the claims signed beside jwt.Claims (which holds jti).
type own struct {
	Namespace   string `json:"namespace"`
	Job         string `json:"job"`
	RunID       int64  `json:"run_id,omitempty"`
	ScheduledAt string `json:"scheduled_at,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
}

// Subject is the sub of a job's tokens: "<namespace>/<name>", namespace default included,
// so a sub always says which namespace the job belongs to.
func Subject(jobKey string) string {
	ns, name := namespace.Split(jobKey)
	if ns == "" {
		ns = namespace.Default
	}
	return ns + "/" + name
}

type signer struct {
	kid  string
	priv *ecdsa.PrivateKey
	jose jose.Signer
}

func newSigner(kid string, priv *ecdsa.PrivateKey) (*signer, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("the OIDC signer of key %s: %w", kid, err)
	}
	return &signer{kid: kid, priv: priv, jose: s}, nil
}

// Sign makes t's token with the current key: issued now, valid TokenLifetime.
func (k *Keys) Sign(ctx context.Context, t Token) (string, error) {
	if err := k.CanSign(); err != nil {
		return "", err
	}
	if t.Audience == "" {
		return "", fmt.Errorf("sign an OIDC token for job %s: no audience", t.Job)
	}
	_, s, err := k.fresh(ctx)
	if s == nil || err != nil {
		return "", fmt.Errorf("sign an OIDC token for job %s: %w", t.Job, err)
	}
	now := k.tokenNow().Truncate(time.Second)
	ns, name := namespace.Split(Subject(t.Job))
	registered := jwt.Claims{Issuer: k.c.Issuer, Subject: ns + "/" + name, Audience: jwt.Audience{t.Audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(TokenLifetime)),
		ID: uuid.NewString()}
	mine := own{Namespace: ns, Job: name, RunID: t.RunID, Attempt: t.Attempt}
	if !t.ScheduledAt.IsZero() {
		mine.ScheduledAt = t.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	token, err := jwt.Signed(s.jose).Claims(registered).Claims(mine).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign an OIDC token for job %s: %w", t.Job, err)
	}
	return token, nil
}
