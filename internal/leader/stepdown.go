package leader

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
)

// An operator's step-down (POST /v1/leader/step-down on any replica) is a row of
// scheduler_control naming the epoch to end, written with its audit row; a NOTIFY, which
// the replica's notifier hands to the elector, wakes the leader to read it
// (store.RequestStepDown). Any login can NOTIFY any channel, so the leader acts on the row
// only: a notification with no row behind it is ignored and counted, and a flood of them
// costs one read of the rows per controlCooldown (docs/design.md guarantee 12).

const (
	// controlCooldown is the least time between two reads of the control rows: the bound on
	// what a flood of wake-ups costs, and on how much later than its NOTIFY a step-down that
	// arrives in one is obeyed.
	controlCooldown = 100 * time.Millisecond
	// ignoredLogEvery rate-limits the warning about ignored notifications; the metric counts
	// every one.
	ignoredLogEvery = time.Minute
)

// control is the elector's step-down state. The notifier's goroutine marks wake-ups
// (notified); Run's goroutine reads the rows (awaitStepDown).
type control struct {
	wake chan struct{} // one buffered wake-up: a burst of notifications is one

	mu sync.Mutex
	// armed is set from just before an epoch bump until the term ends: a follower's
	// notifications are for the leader, and mean nothing to it.
	armed bool
	epoch string // the term's epoch as a payload names it; "" until the term begins
	// pending counts the wake-ups naming the term's epoch not yet answered by a read; stale
	// says notifications may have been missed (the notifier resynced, or one came before the
	// term's epoch was known), which costs a read too.
	pending int
	stale   bool
	ignored int // ignored notifications since the last warning
	lastLog time.Time

	nextRead time.Time // the next read of the control rows waits until then; Run's only
}

// arm starts listening for a term about to begin: before the epoch bump, so a request for
// the new epoch cannot come before it.
func (c *control) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.epoch, c.pending, c.stale = true, "", 0, false
	c.nextRead = time.Time{}
}

// begin names the term's epoch, once the bump committed.
func (c *control) begin(epoch int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = strconv.FormatInt(epoch, 10)
}

// disarm ends a term's (or a failed election's) listening.
func (c *control) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.epoch, c.pending, c.stale = false, "", 0, false
}

// due reports whether a wake-up waits for a read of the control rows.
func (c *control) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending > 0 || c.stale
}

// notified takes the notifier's step-down events. A payload naming another epoch was meant
// for a term that has already ended, or for none, and costs no read.
func (e *Elector) notified(ev pglisten.Event) {
	c := &e.control
	c.mu.Lock()
	switch {
	case !c.armed:
		c.mu.Unlock()
		return
	case ev.Resync || c.epoch == "":
		c.stale = true
	case ev.Payload == c.epoch:
		c.pending++
	default:
		c.mu.Unlock()
		e.ignoreNotifications(store.StepDownChannel, 1)
		return
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// awaitStepDown waits until window ends (nil, nil: the heartbeat is due) or a step-down row
// for epoch is read after a wake-up (its messages). An error means the session failed. ctx
// bounds the reads.
func (e *Elector) awaitStepDown(ctx, window context.Context, session *store.LockSession, epoch int64) ([]store.ControlMessage, error) {
	c := &e.control
	for {
		due := c.due()
		if due && !time.Now().Before(c.nextRead) {
			msgs, err := e.readStepDown(ctx, session, epoch)
			if err != nil || len(msgs) > 0 {
				return msgs, err
			}
			continue
		}
		// Wake-ups in the cooldown are coalesced into the read at its end.
		cooldown := time.NewTimer(time.Until(c.nextRead))
		if !due {
			cooldown.Stop()
		}
		select {
		case <-window.Done():
			cooldown.Stop()
			return nil, nil // pending wake-ups carry over to the next wait
		case <-c.wake:
		case <-cooldown.C:
		}
		cooldown.Stop()
	}
}

// readStepDown takes this term's pending step-down rows, answering every wake-up since the
// last read.
func (e *Elector) readStepDown(ctx context.Context, session *store.LockSession, epoch int64) ([]store.ControlMessage, error) {
	c := &e.control
	c.mu.Lock()
	woken := c.pending
	c.pending, c.stale = 0, false
	c.mu.Unlock()
	c.nextRead = time.Now().Add(controlCooldown)
	e.testSignals.controlRead.Send(woken)
	qctx, cancel := context.WithTimeout(ctx, e.conf.LeaseTimeout)
	defer cancel()
	msgs, err := session.TakeStepDown(qctx, epoch, e.conf.InstanceID)
	if err != nil {
		return nil, err
	}
	e.ignoreNotifications(store.StepDownChannel, woken-len(msgs))
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ignored += n
	if time.Since(c.lastLog) < ignoredLogEvery {
		return
	}
	e.log.Warn("ignored notifications with no control row behind them: something other than the scheduler's API "+
		"sends on its channel (any login may NOTIFY); the leader obeys scheduler_control rows only",
		"channel", channel, "ignored", c.ignored, "log_every", ignoredLogEvery)
	c.ignored, c.lastLog = 0, time.Now()
}
