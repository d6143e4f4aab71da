package deliver

import (
	"context"
	"errors"

	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Coalescing: the events of one job and type wait for the interval after the oldest of them,
// then become one message per destination that wants them, listing them all (up to
// notify.MaxRuns and notify.MaxBody; the rest wait for the next interval). So a job failing
// every second makes one message a minute per destination, and no event is listed twice.

// group makes the messages of every (job, event) whose interval is over, each group in its
// own fenced transaction so that one group's failure costs no other its message.
func (t *term) group(ctx context.Context) {
	var groups []store.NotificationGroup
	err := t.s.c.DB.Fenced(ctx, t.fence, func(tx *store.Tx) error {
		var err error
		groups, err = tx.WaitingGroups(ctx, t.s.c.Interval)
		return err
	})
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, store.ErrNotLeader) {
			t.log.Warn("reading the waiting notifications failed; the next pass retries", "error", err)
		}
		return
	}
	for i, g := range groups {
		if i == maxGroupsPerPass || ctx.Err() != nil {
			return
		}
		if err := t.groupOne(ctx, g); err != nil && ctx.Err() == nil {
			t.log.Warn("making a notification message failed; the next pass retries", "job", g.Job, "event", g.Event, "error", err)
		}
	}
}

// groupOne makes the messages of one group: one per destination whose rule wants the event.
// Events no rule wants any longer (the definition changed, or the job was deleted) are
// marked grouped with no message, so that they do not wait for ever.
func (t *term) groupOne(ctx context.Context, g store.NotificationGroup) error {
	rules, known := t.rules(g.Job)
	dests := wanted(rules, g.Event)
	var made []store.NewDelivery
	var listed int
	err := t.s.c.DB.Fenced(ctx, t.fence, func(tx *store.Tx) error {
		made, listed = nil, 0
		waiting, err := tx.TakeWaiting(ctx, g, notify.MaxRuns)
		if err != nil || len(waiting) == 0 {
			return err
		}
		n := len(waiting)
		for {
			made, err = t.messages(g, dests, waiting[:n])
			if err == nil || n == 1 {
				break
			}
			n /= 2 // too large a body: half the events now, the rest at the next interval
		}
		if err != nil {
			return err
		}
		ids := make([]int64, n)
		for i, w := range waiting[:n] {
			ids[i] = w.ID
		}
		listed = n
		return tx.GroupNotifications(ctx, ids, made)
	})
	if err != nil {
		return err
	}
	switch {
	case listed == 0:
	case len(made) == 0:
		t.log.Info("notification events dropped: no rule of the job wants them any longer",
			"job", g.Job, "event", g.Event, "count", listed, "job_known", known)
	default:
		t.log.Info("notification messages made", "job", g.Job, "event", g.Event, "count", listed, "destinations", len(made))
	}
	return nil
}

// errTooLarge is a message whose body would pass notify.MaxBody.
var errTooLarge = errors.New("the message's body is larger than its bound")

// messages builds the deliveries of events to dests.
func (t *term) messages(g store.NotificationGroup, dests []notify.Rule, waiting []store.WaitingNotification) ([]store.NewDelivery, error) {
	events := make([]notify.Event, len(waiting))
	var runIDs []int64
	for i, w := range waiting {
		events[i] = notify.Event{RunID: w.RunID, ScheduledAt: w.ScheduledAt, Status: w.Status, Error: w.Error, Detail: w.Detail}
		if w.RunID != nil {
			runIDs = append(runIDs, *w.RunID)
		}
	}
	if runIDs == nil {
		runIDs = []int64{}
	}
	msg := notify.NewMessage(g.Job, g.Event, t.s.c.PublicURL, events)
	var out []store.NewDelivery
	for _, r := range dests {
		body, err := msg.Body(r.Kind())
		if err != nil {
			return nil, err
		}
		if len(body) > notify.MaxBody {
			return nil, errTooLarge
		}
		d := store.NewDelivery{Job: g.Job, Event: g.Event, Kind: r.Kind(), RunIDs: runIDs, Count: len(events), Body: body}
		if r.Webhook != nil {
			url := r.Webhook.URL
			d.URL = &url
			if r.Webhook.SigningSecret != "" {
				secret := r.Webhook.SigningSecret
				d.Secret = &secret
			}
		} else {
			secret := r.Slack.URLSecret
			d.Secret = &secret
		}
		out = append(out, d)
	}
	return out, nil
}
