package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// max_runs: once a job's max_runs slots ran, its schedule is over. The claim decides it,
// counting under the lock every claim takes (store.Claim.MaxRuns), so two leaders racing
// cannot both run the last one; the engine then only remembers it, so that it stops
// claiming the job's slots, catch-up records none of them missed, and the slot audit does
// not take them for lost. A new version of the definition is a new entry, which counts
// again under its own max_runs.

// spent marks the job spent at slot, the first slot found after its max_runs ran, and
// says so once in the log.
func (e *Engine) spent(log *slog.Logger, en *entry, slot time.Time) {
	if en.spentFrom.CompareAndSwap(0, slot.Unix()) {
		log.Info("the job ran its max_runs slots: no later slot is claimed", "max_runs", en.conf.MaxRuns)
	}
	e.testSignals.spent.Send(fmt.Sprintf("%s@%d", en.conf.Name, slot.Unix()))
}

// passOver reports whether slot comes after the job's max_runs ran, and then claims
// nothing for it.
func (e *Engine) passOver(en *entry, slot time.Time) bool {
	from := en.spentFrom.Load()
	if from == 0 || slot.Unix() < from {
		return false
	}
	e.testSignals.spent.Send(fmt.Sprintf("%s@%d", en.conf.Name, slot.Unix()))
	return true
}

// spentSince is when the job's slots stopped being due because its max_runs ran; zero
// while they are.
func (en *entry) spentSince() time.Time {
	if from := en.spentFrom.Load(); from != 0 {
		return time.Unix(from, 0).UTC()
	}
	return time.Time{}
}

// spentJobs returns, of batch, the jobs whose max_runs slots ran, read in the catch-up's
// transaction: their missed slots are no slots at all.
func spentJobs(ctx context.Context, tx *store.Tx, batch []*entry) (map[string]bool, error) {
	var names []string
	for _, en := range batch {
		if en.conf.MaxRuns > 0 {
			names = append(names, en.conf.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	ran, err := tx.RanRuns(ctx, names)
	if err != nil {
		return nil, err
	}
	spent := map[string]bool{}
	for _, en := range batch {
		if en.conf.MaxRuns > 0 && ran[en.conf.Name].Count >= int64(en.conf.MaxRuns) {
			spent[en.conf.Name] = true
		}
	}
	return spent, nil
}
