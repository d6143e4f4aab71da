package oidc

import (
	"context"
	"errors"

	"github.com/schedulerhq/scheduler/internal/access"
)

// Identify is Verify as the API asks it: the service account's principal, found false for
// a token that is refused (401), and an error only when the issuer could not be asked (503).
func (v *Verifier) Identify(ctx context.Context, rawJWT string) (access.Principal, bool, error) {
	id, err := v.Verify(ctx, rawJWT)
	switch {
	case errors.Is(err, ErrUnavailable):
		return access.Principal{}, false, err
	case err != nil:
		return access.Principal{}, false, nil
	}
	p := access.Principal{Kind: access.KindOIDC, TokenID: "oidc:" + id.Subject, TokenName: id.Subject}
	for _, g := range id.Grants {
		p.Grants = append(p.Grants, access.Grant{Namespace: g.Namespace, Role: g.Role})
	}
	return p, true, nil
}
