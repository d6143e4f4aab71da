package leader

import (
	"context"
	"strconv"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// An operator's step-down (POST /v1/leader/step-down on any replica) is a row of
// scheduler_control naming the epoch to end, written with its audit row; a NOTIFY on the
// lock session wakes the leader to read it (store.RequestStepDown). Any login can NOTIFY
// any channel, so the leader acts on the row only: a notification with no row behind it is
// ignored and counted, and a flood of them costs one read of the rows per controlCooldown
// (docs/design.md guarantee 12).

const (
	// controlCooldown is the least time between two reads of the control rows: the bound on
	// what a flood of wake-ups costs, and on how much later than its NOTIFY a step-down that
	// arrives in one is obeyed.
	controlCooldown = 100 * time.Millisecond
	// ignoredLogEvery rate-limits the warning about ignored notifications; the metric counts
	// every one.
	ignoredLogEvery = time.Minute
)

// control is the elector's state between wake-ups, touched only by Run's goroutine.
type control struct {
	pending  int       // step-down wake-ups for this term not yet answered by a read
	nextRead time.Time // the next read of the control rows waits until then
	ignored  int       // ignored notifications since the last warning
	lastLog  time.Time
}

// awaitStepDown waits until window ends (nil, nil: the heartbeat is due) or a step-down row
// for epoch is read after a wake-up (its messages). A wake-up naming another epoch was
// meant for a term that has already ended, or for none, and costs no read. An error means
// the session failed. ctx bounds the reads.
func (e *Elector) awaitStepDown(ctx, window context.Context, session *store.LockSession, epoch int64) ([]store.ControlMessage, error) {
	want := strconv.FormatInt(epoch, 10)
	c := &e.control
	for {
		if c.pending > 0 && !time.Now().Before(c.nextRead) {
			msgs, err := e.readStepDown(ctx, session, epoch)
			if err != nil || len(msgs) > 0 {
				return msgs, err
			}
		}
		wait, cancel := window, context.CancelFunc(func() {})
		if c.pending > 0 {
			// Wake-ups in the cooldown are coalesced into the read at its end.
			wait, cancel = context.WithDeadline(window, c.nextRead)
		}
		channel, payload, ok, err := session.AwaitNotification(wait)
		cancel()
		switch {
		case err != nil:
			return nil, err
		case !ok && window.Err() != nil:
			return nil, nil // pending wake-ups carry over to the next wait
		case !ok:
			// The cooldown is over: read at the top of the loop.
		case channel == store.StepDownChannel && payload == want:
			c.pending++
		default:
			e.ignoreNotifications(channel, 1)
		}
	}
}

// readStepDown takes this term's pending step-down rows, answering every wake-up since the
// last read.
func (e *Elector) readStepDown(ctx context.Context, session *store.LockSession, epoch int64) ([]store.ControlMessage, error) {
	c := &e.control
	c.nextRead = time.Now().Add(controlCooldown)
	e.testSignals.controlRead.Send(c.pending)
	qctx, cancel := context.WithTimeout(ctx, e.conf.LeaseTimeout)
	defer cancel()
	msgs, err := session.TakeStepDown(qctx, epoch, e.conf.InstanceID)
	if err != nil {
		return nil, err
	}
	e.ignoreNotifications(store.StepDownChannel, c.pending-len(msgs))
	c.pending = 0
	return msgs, nil
}

// ignoreNotifications counts n notifications that asked nothing, and warns about them at
// most once per ignoredLogEvery.
func (e *Elector) ignoreNotifications(channel string, n int) {
	if n <= 0 {
		return
	}
	e.conf.Metrics.ControlNotificationsIgnored(channel, n)
	c := &e.control
	c.ignored += n
	if time.Since(c.lastLog) < ignoredLogEvery {
		return
	}
	e.log.Warn("ignored notifications with no control row behind them: something other than the scheduler's API "+
		"sends on its channel (any login may NOTIFY); the leader obeys scheduler_control rows only",
		"channel", channel, "ignored", c.ignored, "log_every", ignoredLogEvery)
	c.ignored, c.lastLog = 0, time.Now()
}
