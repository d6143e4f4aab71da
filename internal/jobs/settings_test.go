package jobs_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobs"
)

func TestLoadSettingsDefaults(t *testing.T) {
	env := config.NewEnv(nil)
	s := jobs.LoadSettings(env)
	require.NoError(t, env.Err())
	assert.Equal(t, jobs.Settings{
		Abandon: jobs.AbandonSettings{Delay: 30 * time.Minute, ClaimTimeout: 10 * time.Minute, BatchSize: 100},
		Sender: jobs.SenderSettings{Kind: "log", Webhook: jobs.WebhookSettings{
			Timeout: 10 * time.Second, MaxAttempts: 4, Backoff: 500 * time.Millisecond}},
		Retention: jobs.RetentionSettings{JobRuns: 30 * day, MessageDeliveries: 90 * day, Leads: 180 * day, OperatorActions: 365 * day,
			BatchSize: 5000, Pause: 50 * time.Millisecond},
		Appointments: jobs.AppointmentSettings{ClaimTimeout: 10 * time.Minute},
	}, s)
	assert.IsType(t, &jobs.LogSender{}, jobs.NewSender(s.Sender, slog.New(slog.DiscardHandler)))
}

func TestLoadSettingsReadsEveryVariable(t *testing.T) {
	env := config.NewEnv([]string{
		"SCHEDULER_ABANDON_DELAY=45m",
		"SCHEDULER_ABANDON_CLAIM_TIMEOUT=1h",
		"SCHEDULER_ABANDON_BATCH_SIZE=50",
		"SCHEDULER_SENDER=webhook",
		"SCHEDULER_WEBHOOK_URL=https://hooks.example.com/messages",
		"SCHEDULER_WEBHOOK_TIMEOUT=3s",
		"SCHEDULER_WEBHOOK_MAX_ATTEMPTS=5",
		"SCHEDULER_WEBHOOK_BACKOFF=1s",
		"SCHEDULER_RETENTION_JOB_RUNS=7d",
		"SCHEDULER_RETENTION_MESSAGE_DELIVERIES=2160h",
		"SCHEDULER_RETENTION_LEADS=365d",
		"SCHEDULER_RETENTION_OPERATOR_ACTIONS=730d",
		"SCHEDULER_RETENTION_BATCH_SIZE=1000",
		"SCHEDULER_RETENTION_PAUSE=0",
	})
	s := jobs.LoadSettings(env)
	require.NoError(t, env.Err())
	assert.Equal(t, jobs.Settings{
		Abandon: jobs.AbandonSettings{Delay: 45 * time.Minute, ClaimTimeout: time.Hour, BatchSize: 50},
		Sender: jobs.SenderSettings{Kind: "webhook", Webhook: jobs.WebhookSettings{
			URL: "https://hooks.example.com/messages", Timeout: 3 * time.Second, MaxAttempts: 5, Backoff: time.Second}},
		Retention: jobs.RetentionSettings{JobRuns: 7 * day, MessageDeliveries: 90 * day, Leads: 365 * day, OperatorActions: 730 * day,
			BatchSize: 1000, Pause: 0},
		Appointments: jobs.AppointmentSettings{ClaimTimeout: time.Hour},
	}, s)
	assert.IsType(t, &jobs.WebhookSender{}, jobs.NewSender(s.Sender, nil))
}

func TestLoadSettingsReportsEveryMistake(t *testing.T) {
	env := config.NewEnv([]string{
		"SCHEDULER_ABANDON_DELAY=-5m",
		"SCHEDULER_ABANDON_BATCH_SIZE=0",
		"SCHEDULER_SENDER=webhook",
		"SCHEDULER_WEBHOOK_URL=ftp://example.com",
		"SCHEDULER_WEBHOOK_TIMEOUT=3m",
		"SCHEDULER_RETENTION_JOB_RUNS=thirty days",
		"SCHEDULER_RETENTION_LEADS=0d",
		"SCHEDULER_RETENTION_PAUSE=-1s",
	})
	s := jobs.LoadSettings(env)
	err := env.Err()
	require.Error(t, err)
	for _, want := range []string{
		`SCHEDULER_ABANDON_DELAY="-5m" is not valid: want a duration above 0`,
		`SCHEDULER_ABANDON_BATCH_SIZE="0" is not valid: want a whole number from 1 to 10000`,
		`SCHEDULER_WEBHOOK_URL="ftp://example.com" is not valid: want an http:// or https:// URL`,
		// 4 attempts of 3m plus 3.5s of backoff exceed the default 10m claim timeout.
		`SCHEDULER_ABANDON_CLAIM_TIMEOUT is not set: want more than the longest webhook send, 12m3.5s`,
		`SCHEDULER_RETENTION_JOB_RUNS="thirty days" is not valid`,
		`SCHEDULER_RETENTION_LEADS="0d" is not valid`,
		`SCHEDULER_RETENTION_PAUSE="-1s" is not valid`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, 30*time.Minute, s.Abandon.Delay, "a bad value falls back to its default")

	env = config.NewEnv([]string{"SCHEDULER_SENDER=webhook"})
	jobs.LoadSettings(env)
	assert.ErrorContains(t, env.Err(), "SCHEDULER_WEBHOOK_URL is not set: want an http:// or https:// URL (required with SCHEDULER_SENDER=webhook)")

	env = config.NewEnv([]string{"SCHEDULER_SENDER=smtp"})
	jobs.LoadSettings(env)
	assert.ErrorContains(t, env.Err(), `SCHEDULER_SENDER="smtp" is not valid: want one of log, webhook`)
}
