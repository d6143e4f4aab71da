package metrics

import "github.com/prometheus/client_golang/prometheus"

// The jobs' notifications (internal/notify/deliver), by event type and destination kind:
// two closed sets, so the series stay few whatever the jobs.
type notificationCounters struct {
	sent, failed *prometheus.CounterVec
}

func newNotificationCounters() notificationCounters {
	labels := []string{"event", "kind"}
	return notificationCounters{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "notifications_sent_total",
			Help: "Notification messages a receiver accepted (2xx), by event (failed, timed_out, missed, recovered, paused) and kind (webhook, slack).",
		}, labels),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "notifications_failed_total",
			Help: "Attempts to send a notification message that failed (no answer, or not 2xx), by event and kind; " +
				"a message is retried with backoff until it is accepted or its attempts run out.",
		}, labels),
	}
}

// NotificationSent counts a message a receiver accepted.
func (m *Metrics) NotificationSent(event, kind string) {
	if m == nil {
		return
	}
	m.notifications.sent.WithLabelValues(event, kind).Inc()
}

// NotificationFailed counts a failed attempt to send a message.
func (m *Metrics) NotificationFailed(event, kind string) {
	if m == nil {
		return
	}
	m.notifications.failed.WithLabelValues(event, kind).Inc()
}
