package leader

import (
	"context"
	"strconv"

	"github.com/schedulerhq/scheduler/internal/store"
)

// An operator's step-down (POST /v1/leader/step-down on any replica) reaches the leader as a
// NOTIFY on its lock session naming the epoch to end (store.RequestStepDown).

// awaitStepDown waits until ctx ends (false, nil: nobody asked) or a step-down request for
// epoch arrives on the lock session (true). A request naming another epoch was meant for a
// term that has already ended and is ignored. An error means the session failed.
func awaitStepDown(ctx context.Context, session *store.LockSession, epoch int64) (bool, error) {
	want := strconv.FormatInt(epoch, 10)
	for {
		channel, payload, ok, err := session.AwaitNotification(ctx)
		switch {
		case err != nil || !ok:
			return false, err
		case channel == store.StepDownChannel && payload == want:
			return true, nil
		}
	}
}
