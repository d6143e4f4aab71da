package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A key rotation: once every replica has the new key as SCHEDULER_SECRET_KEY and the old one
// in SCHEDULER_SECRET_KEY_PREVIOUS, Rotate re-seals every stored value the current key did
// not seal, so that the old key can then be dropped. It is idempotent: a second run finds
// nothing to do. Replicas go on reading through it, since they open with either key.

// RotateStore is what Rotate reads and writes: the store's re-seal queries.
type RotateStore interface {
	SecretsToReseal(ctx context.Context, keyID, afterNamespace, afterName string, limit int) ([]store.SealedSecret, error)
	ResealSecret(ctx context.Context, s store.SealedSecret, keyID string, sealed []byte) (bool, error)
	SecretKeyIDs(ctx context.Context) (map[string]int, error)
}

// rotatePage is how many rows a rotation reads at once.
const rotatePage = 100

// RotateReport is what a rotation did.
type RotateReport struct {
	// KeyID is the current key's id, the one every value is re-sealed with.
	KeyID string
	// Resealed counts the values re-sealed by this run.
	Resealed int
	// Unopened are the values no key of the box opens (their key is not in
	// SCHEDULER_SECRET_KEY_PREVIOUS): they stay as they were.
	Unopened []error
	// Remaining counts the stored values by key id, the current key's left out: empty once
	// the rotation is done.
	Remaining map[string]int
}

// Rotate re-seals with box's current key every stored value sealed with another key.
func Rotate(ctx context.Context, db RotateStore, box *seal.Box) (RotateReport, error) {
	if !box.CanSeal() {
		return RotateReport{}, seal.ErrNoKey
	}
	report := RotateReport{KeyID: box.CurrentID()}
	afterNS, afterName := "", ""
	for {
		page, err := db.SecretsToReseal(ctx, report.KeyID, afterNS, afterName, rotatePage)
		if err != nil {
			return report, err
		}
		for _, row := range page {
			done, err := reseal(ctx, db, box, row)
			switch {
			case err == nil && done:
				report.Resealed++
			case err != nil && ctx.Err() == nil && isOpenError(err):
				report.Unopened = append(report.Unopened, err)
			case err != nil:
				return report, err
			}
			// !done: a put changed the row since it was read; the put sealed it anew.
		}
		if len(page) < rotatePage {
			break
		}
		last := page[len(page)-1]
		afterNS, afterName = last.Namespace, last.Name
	}
	ids, err := db.SecretKeyIDs(ctx)
	if err != nil {
		return report, err
	}
	delete(ids, report.KeyID)
	report.Remaining = ids
	return report, nil
}

// reseal opens one row and writes it back sealed with the current key, if the row is still
// as it was read.
func reseal(ctx context.Context, db RotateStore, box *seal.Box, row store.SealedSecret) (bool, error) {
	value, err := box.Open(row.Namespace, row.Name, row.KeyID, row.Sealed)
	if err != nil {
		return false, err
	}
	defer clear(value) // the clear value lives no longer than it must
	id, sealed, err := box.Seal(row.Namespace, row.Name, value)
	if err != nil {
		return false, fmt.Errorf("re-seal secret %s of namespace %s: %w", row.Name, row.Namespace, err)
	}
	return db.ResealSecret(ctx, row, id, sealed)
}

func isOpenError(err error) bool {
	var oe *seal.OpenError
	return errors.As(err, &oe)
}
