package idp

import (
	"context"
	"errors"

	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
)

// ResealReport is what Reseal did.
type ResealReport struct {
	Resealed int
	// Unopened are the keys no key of the box opens: they stay as they were, and this
	// replica's successors cannot sign with them once the old SCHEDULER_SECRET_KEY is gone.
	Unopened []error
}

// Reseal re-seals with box's current key every published signing key sealed with another:
// the OIDC part of a rotation of SCHEDULER_SECRET_KEY (`scheduler secret-key rotate`), so
// that the old key can be dropped. Idempotent; safe while replicas sign, since each row is
// replaced only if it is still sealed as it was read.
func Reseal(ctx context.Context, db *store.DB, box *seal.Box) (ResealReport, error) {
	var report ResealReport
	if !box.CanSeal() {
		return report, seal.ErrNoKey
	}
	keys, err := db.OIDCKeys(ctx, false)
	if err != nil {
		return report, err
	}
	for _, key := range keys {
		if key.KeyID == box.CurrentID() {
			continue
		}
		der, err := box.Open("", sealName(key.KID), key.KeyID, key.Sealed)
		var open *seal.OpenError
		if errors.As(err, &open) {
			report.Unopened = append(report.Unopened, err)
			continue
		}
		if err != nil {
			return report, err
		}
		keyID, sealed, err := box.Seal("", sealName(key.KID), der)
		if err != nil {
			return report, err
		}
		done, err := db.ResealOIDCKey(ctx, key.KID, key.KeyID, keyID, sealed)
		if err != nil {
			return report, err
		}
		if done {
			report.Resealed++
		}
	}
	return report, nil
}
