package api

import (
	"context"
	"net/http"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/store"
)

// GET …/jobs/{name}/notifications: what the job's notify rules sent, newest first, and the
// events still waiting for their coalescing interval, so a team can see that a failure was
// heard before its message goes out.

// notificationsDefault is how many messages an answer lists without ?limit.
const notificationsDefault = 50

func newNotificationView(d store.Delivery) client.Notification {
	v := client.Notification{ID: d.ID, Event: d.Event, Type: notify.Type(d.Event), Kind: d.Kind, WebhookID: d.WebhookID.String(),
		Runs: d.RunIDs, Count: d.Count, Status: d.Status, Attempts: d.Attempts, StatusCode: d.LastStatus,
		Error: d.LastError, CreatedAt: d.CreatedAt.UTC(), SentAt: utcPtr(d.SentAt)}
	if v.Runs == nil {
		v.Runs = []int64{}
	}
	switch {
	case d.Kind == notify.KindSlack && d.Secret != nil:
		v.Destination = "slack:" + *d.Secret // the URL is the secret's value: never shown
	case d.URL != nil:
		v.Destination = logging.RedactURL(*d.URL)
	}
	if d.Status == store.DeliveryPending {
		v.NextAttemptAt = utcPtr(&d.NextAttemptAt)
	}
	return v
}

func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) {
	j := s.job(w, r)
	if j == nil {
		return
	}
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return
	}
	limit, ok := httpx.QueryLimit(w, r, q, notificationsDefault, limitMax)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	sent, err := s.cfg.DB.Deliveries(ctx, j.conf.Name, limit)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	waiting, err := s.cfg.DB.Waiting(ctx, j.conf.Name)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	views := make([]client.Notification, len(sent))
	for i, d := range sent {
		views[i] = newNotificationView(d)
	}
	for i := range waiting {
		waiting[i].CreatedAt = waiting[i].CreatedAt.UTC()
		waiting[i].ScheduledAt = utcPtr(waiting[i].ScheduledAt)
	}
	if waiting == nil {
		waiting = []store.WaitingNotification{}
	}
	ns, name := namespace.Split(j.conf.Name)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"job": name, "namespace": ns, "notifications": views, "waiting": waiting})
}

// pauseEvent is the notification of an operator's pause, recorded with the pause and its
// audit row when the job's rules want it.
func pauseEvent(ctx context.Context, ex store.Executor, j *jobRef, who string, reason *string) error {
	if !notify.EventsOf(j.conf.Notify).Has(notify.Paused) {
		return nil
	}
	detail := "paused by " + who
	if reason != nil && *reason != "" {
		detail += ": " + *reason
	}
	_, err := ex.RecordNotifications(ctx, []store.NotificationEvent{{Job: j.conf.Name, Event: notify.Paused, Detail: &detail}})
	return err
}

// principalName names the caller in a pause's notification: its token's name, else the kind
// of credential it used.
func principalName(r *http.Request) string {
	p := principal(r.Context())
	if p.TokenName != "" {
		return p.TokenName
	}
	if p.Kind != "" {
		return "a " + p.Kind + " token"
	}
	return "an operator"
}
