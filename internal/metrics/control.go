package metrics

import "github.com/prometheus/client_golang/prometheus"

// newControlIgnoredTotal counts the NOTIFYs that woke a reader and asked nothing of it, by
// channel (the scheduler's own channel names: a closed set). Any login on the database can
// NOTIFY, so these are the trace of something else sending on the scheduler's channels.
func newControlIgnoredTotal() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "control_notifications_ignored_total",
		Help: "NOTIFYs on the scheduler's channels that asked nothing of it, by channel: a step-down wake-up " +
			"with no scheduler_control row for the leader's term, or a payload that names nothing. Any login " +
			"can NOTIFY; a rise means something other than the scheduler is sending on its channels.",
	}, []string{"channel"})
}

// ControlNotificationsIgnored counts n notifications on channel that asked nothing of the
// scheduler (no control row behind them, or a payload naming nothing).
func (m *Metrics) ControlNotificationsIgnored(channel string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.controlIgnoredTotal.WithLabelValues(channel).Add(float64(n))
}
