package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/store"
)

// callKey is the Idempotency-Key of a runtime job's calls in run: a UUID derived from the
// deployment and the slot (job and scheduled_at), or from the manual run, so every attempt
// and every recovery of the same slot sends the same key, on whichever leader. It also
// returns the slot the run does (a recovery run does its abandoned run's slot; zero for a
// manual run).
func (e *Engine) callKey(ctx context.Context, run *store.Run) (key string, slot time.Time, err error) {
	var src store.CallKeySource
	if run.Trigger == store.TriggerRecovery {
		// The run it recovers, and the slot that one did, are in the database.
		if src, err = e.conf.DB.CallKeySource(ctx, run.ID); err != nil {
			return "", slot, err
		}
	} else {
		if src.Deployment, err = e.deploymentID(ctx); err != nil {
			return "", slot, err
		}
		src.RootRunID, src.Job, src.ScheduledAt = run.ID, run.Job, run.ScheduledAt
	}
	name := fmt.Sprintf("run/%d", src.RootRunID)
	if src.ScheduledAt != nil {
		slot = src.ScheduledAt.UTC()
		name = fmt.Sprintf("slot/%s/%d", src.Job, slot.Unix())
	}
	return uuid.NewSHA1(src.Deployment, []byte(name)).String(), slot, nil
}

// deploymentID is the database's deployment id, read once: it never changes.
func (e *Engine) deploymentID(ctx context.Context) (uuid.UUID, error) {
	e.deploymentMu.Lock()
	defer e.deploymentMu.Unlock()
	if e.deployment == uuid.Nil {
		id, err := e.conf.DB.Deployment(ctx)
		if err != nil {
			return id, err
		}
		e.deployment = id
	}
	return e.deployment, nil
}

// deadlineFor is when a slot's retries must end: when the job's next slot is due after the
// run started (a queue-one slot starts after its own period).
func deadlineFor(en *entry, run *store.Run) time.Time {
	if run.ScheduledAt == nil || en.conf.Schedule == nil {
		return time.Time{}
	}
	from := *run.ScheduledAt
	if run.StartedAt != nil && run.StartedAt.After(from) {
		from = *run.StartedAt
	}
	return en.conf.Schedule.Next(from)
}
