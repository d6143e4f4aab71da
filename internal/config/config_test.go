package config_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
)

const goodURL = "postgres://user:pass@localhost:5432/scheduler"

var jobs = []config.JobDefaults{
	{Name: "plan-change", Schedule: "0 2 * * *", Timeout: 10 * time.Minute},
	{Name: "rounds-open", Schedule: "*/5 * * * *", Timeout: time.Minute, MinGap: 30 * time.Second},
	{Name: "tick", Schedule: "@every 90s", Timeout: time.Minute},
}

// load runs Load on kv ("NAME=value") plus a valid DATABASE_URL, which
// comes last so that kv can override it (the first entry wins).
func load(t *testing.T, kv ...string) (*config.Config, error) {
	t.Helper()
	return loadAll(config.NewEnv(append(kv, "DATABASE_URL="+goodURL)), jobs)
}

// lines splits a joined error into its messages.
func lines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestErrorMessage(t *testing.T) {
	assert.Equal(t, `SCHEDULER_LOG_LEVEL="loud" is not valid: want one of debug, info, warn, error`,
		(&config.Error{Var: "SCHEDULER_LOG_LEVEL", Value: "loud", Want: "one of debug, info, warn, error"}).Error())
	assert.Equal(t, `X="a\nb" is not valid: want c`, (&config.Error{Var: "X", Value: "a\nb", Want: "c"}).Error(), "one line")

	_, err := loadAll(config.NewEnv(nil), jobs)
	assert.EqualError(t, err, "DATABASE_URL is not set: want a PostgreSQL URL such as postgres://user:pass@localhost:5432/scheduler")
	var cerr *config.Error
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, "DATABASE_URL", cerr.Var)
}

func TestDefaults(t *testing.T) {
	c, err := load(t)
	require.NoError(t, err)
	assert.Equal(t, goodURL, c.DatabaseURL)
	assert.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	assert.NotEmpty(t, c.InstanceID)
	assert.LessOrEqual(t, len(c.InstanceID), 53)
	assert.Empty(t, c.APIToken)
	assert.Equal(t, slog.LevelInfo, c.LogLevel)
	assert.Equal(t, "json", c.LogFormat)
	assert.Equal(t, config.HTTPJobConcurrencyDefault, c.Runtime.HTTPJobConcurrency)
	assert.Equal(t, config.RunConcurrencyDefault, c.Runtime.RunConcurrency)
	assert.Equal(t, 5*time.Second, c.LeaseTimeout)
	assert.Equal(t, 24*time.Hour, c.IdempotencyTTL)
	assert.Equal(t, 2*time.Second, c.PollInterval)
	assert.Equal(t, 25*time.Second, c.ShutdownTimeout)
	assert.Equal(t, 15*time.Minute, c.NoShowGrace)
	assert.Equal(t, 16, c.SendConcurrency)
	assert.Zero(t, c.SendRate, "no rate bound")

	require.Len(t, c.Jobs, 3)
	want := []struct {
		name, spec               string
		timeout, catchup, minGap time.Duration
	}{
		{"plan-change", "0 2 * * *", 10 * time.Minute, 24 * time.Hour, 0},
		{"rounds-open", "*/5 * * * *", time.Minute, 5 * time.Minute, 30 * time.Second},
		{"tick", "@every 90s", time.Minute, 90 * time.Second, 0},
	}
	for i, w := range want {
		j := c.Jobs[i]
		assert.Equal(t, w.name, j.Name)
		assert.Equal(t, w.spec, j.Schedule.String())
		assert.True(t, j.Enabled, w.name)
		assert.Equal(t, w.timeout, j.Timeout, w.name)
		assert.Equal(t, w.catchup, j.Catchup, w.name+": catch-up defaults to the period")
		assert.Equal(t, w.minGap, j.MinGap, w.name)
	}
}

func TestOverrides(t *testing.T) {
	c, err := load(t,
		"SCHEDULER_HTTP_ADDR=0.0.0.0:9090", "SCHEDULER_API_TOKEN=s3cret", "SCHEDULER_INSTANCE_ID=replica-1",
		"SCHEDULER_LOG_LEVEL=DEBUG", "SCHEDULER_LOG_FORMAT=text", "SCHEDULER_LEASE_TIMEOUT=2s",
		"SCHEDULER_IDEMPOTENCY_TTL=1h", "SCHEDULER_POLL_INTERVAL=500ms", "SCHEDULER_SHUTDOWN_TIMEOUT=0",
		"SCHEDULER_NO_SHOW_GRACE=20m",
		"SCHEDULER_SEND_CONCURRENCY=64", "SCHEDULER_SEND_RATE=2.5",
		"SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE=CRON_TZ=Europe/Berlin 30 1 * * *",
		"SCHEDULER_JOB_PLAN_CHANGE_ENABLED=no",
		"SCHEDULER_JOB_PLAN_CHANGE_TIMEOUT=1h",
		"SCHEDULER_JOB_PLAN_CHANGE_CATCHUP=0",
		"SCHEDULER_JOB_PLAN_CHANGE_MIN_GAP=5m",
		"SCHEDULER_JOB_TICK_SCHEDULE=@every 1s",
		"SCHEDULER_JOB_ROUNDS_OPEN_CATCHUP=", // empty: the default
		"SCHEDULER_SOMETHING_ELSE=x",         // other packages own other SCHEDULER_ variables
	)
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:9090", c.HTTPAddr)
	assert.Equal(t, "s3cret", c.APIToken)
	assert.Equal(t, "replica-1", c.InstanceID)
	assert.Equal(t, slog.LevelDebug, c.LogLevel)
	assert.Equal(t, "text", c.LogFormat)
	assert.Equal(t, 2*time.Second, c.LeaseTimeout)
	assert.Equal(t, time.Hour, c.IdempotencyTTL)
	assert.Equal(t, 500*time.Millisecond, c.PollInterval)
	assert.Equal(t, time.Duration(0), c.ShutdownTimeout)
	assert.Equal(t, 20*time.Minute, c.NoShowGrace)
	assert.Equal(t, 64, c.SendConcurrency)
	assert.Equal(t, 2.5, c.SendRate)

	pc := c.Jobs[0]
	assert.Equal(t, "CRON_TZ=Europe/Berlin 30 1 * * *", pc.Schedule.String())
	assert.False(t, pc.Enabled)
	assert.Equal(t, time.Hour, pc.Timeout)
	assert.Equal(t, time.Duration(0), pc.Catchup)
	assert.Equal(t, 5*time.Minute, pc.MinGap)
	assert.Equal(t, 5*time.Minute, c.Jobs[1].Catchup)
	assert.Equal(t, time.Second, c.Jobs[2].Catchup, "catch-up follows the overridden schedule")
}

// TestBadVariable checks, for each variable, that one bad value gives one
// error that names the variable, shows the value, and says what is wanted.
func TestBadVariable(t *testing.T) {
	tests := []struct {
		env  string   // the bad variable, NAME=value
		want []string // parts of the message
	}{
		{"DATABASE_URL=mysql://localhost/db", []string{`DATABASE_URL="mysql://localhost/db" is not valid: want a PostgreSQL URL such as postgres://`, "postgres:// or postgresql://"}},
		{"DATABASE_URL=scheduler", []string{`DATABASE_URL="scheduler"`, "keyword/value string such as host=localhost dbname=scheduler"}},
		{"DATABASE_URL=postgres://user:secret@host:port/db", []string{`DATABASE_URL="postgres://user:xxxxx@host:port/db"`, "malformed URL"}},
		{"DATABASE_URL=host=localhost password='secret", []string{`DATABASE_URL="host=localhost password=xxxxx"`, "unterminated"}},
		// Refused now, as pgx would refuse it on connecting, rather than at the first connection.
		{"DATABASE_URL=postgres://u:secret@db/x?sslmode=bogus", []string{`DATABASE_URL="postgres://u:xxxxx@db/x?sslmode=bogus"`, "sslmode is invalid"}},
		{"DATABASE_URL=host=db password=secret port=many", []string{`DATABASE_URL="host=db password=xxxxx port=many"`, "invalid port"}},
		{"SCHEDULER_HTTP_ADDR=8080", []string{`SCHEDULER_HTTP_ADDR="8080" is not valid: want host:port such as 127.0.0.1:8080`}},
		{"SCHEDULER_HTTP_ADDR=localhost:http", []string{`SCHEDULER_HTTP_ADDR="localhost:http"`, "host:port"}},
		{"SCHEDULER_INSTANCE_ID=" + strings.Repeat("x", 54), []string{`SCHEDULER_INSTANCE_ID="xxx`, "at most 53 printable ASCII characters"}},
		{"SCHEDULER_OIDC_KEY_ROTATION=10m", []string{`SCHEDULER_OIDC_KEY_ROTATION="10m" is not valid: want a duration from 1h to 8760h`}},
		{"SCHEDULER_OIDC_KEY_ROTATION=monthly", []string{`SCHEDULER_OIDC_KEY_ROTATION="monthly" is not valid: want a Go duration`}},
		{"SCHEDULER_LOG_LEVEL=loud", []string{`SCHEDULER_LOG_LEVEL="loud" is not valid: want one of debug, info, warn, error`}},
		{"SCHEDULER_LOG_FORMAT=XML", []string{`SCHEDULER_LOG_FORMAT="XML" is not valid: want one of json, text`}},
		{"SCHEDULER_LEASE_TIMEOUT=5", []string{`SCHEDULER_LEASE_TIMEOUT="5" is not valid: want a Go duration such as "30s"`}},
		{"SCHEDULER_LEASE_TIMEOUT=500ms", []string{`SCHEDULER_LEASE_TIMEOUT="500ms" is not valid: want a duration of at least 1s`}},
		{"SCHEDULER_IDEMPOTENCY_TTL=0", []string{`SCHEDULER_IDEMPOTENCY_TTL="0" is not valid: want a duration above 0`}},
		{"SCHEDULER_POLL_INTERVAL=-1s", []string{`SCHEDULER_POLL_INTERVAL="-1s" is not valid: want a duration above 0`}},
		{"SCHEDULER_SHUTDOWN_TIMEOUT=-1s", []string{`SCHEDULER_SHUTDOWN_TIMEOUT="-1s" is not valid: want a duration of 0 or more`}},
		{"SCHEDULER_NO_SHOW_GRACE=0", []string{`SCHEDULER_NO_SHOW_GRACE="0" is not valid: want a duration above 0 such as "15m"`}},
		{"SCHEDULER_SEND_CONCURRENCY=0", []string{`SCHEDULER_SEND_CONCURRENCY="0" is not valid: want a whole number from 1 to 1024`}},
		{"SCHEDULER_SEND_CONCURRENCY=many", []string{`SCHEDULER_SEND_CONCURRENCY="many" is not valid: want a whole number`}},
		{"SCHEDULER_SEND_RATE=-1", []string{`SCHEDULER_SEND_RATE="-1" is not valid: want messages per second, 0 (no bound) or more`}},
		{"SCHEDULER_SEND_RATE=fast", []string{`SCHEDULER_SEND_RATE="fast" is not valid: want messages per second`}},
		{"SCHEDULER_HTTP_JOB_CONCURRENCY=0", []string{`SCHEDULER_HTTP_JOB_CONCURRENCY="0" is not valid: want a whole number from 1 to 65536`}},
		{"SCHEDULER_RUN_CONCURRENCY=0", []string{`SCHEDULER_RUN_CONCURRENCY="0" is not valid: want a whole number from 1 to 1048576 such as 1024`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE=*/5 * *", []string{`SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE="*/5 * *" is not valid: want a valid schedule: expected 5 or 6 fields (e.g. "0 2 * * *"`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE=0 0 30 2 *", []string{`SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE="0 0 30 2 *"`, "never fires"}},
		{"SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE=CRON_TZ=Mars/Olympus 0 2 * * *", []string{`SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE="CRON_TZ=Mars/Olympus 0 2 * * *"`, `unknown time zone "Mars/Olympus"`}},
		{"SCHEDULER_JOB_TICK_SCHEDULE=@every 1.5s", []string{`SCHEDULER_JOB_TICK_SCHEDULE="@every 1.5s"`, "whole number of seconds, at least 1s"}},
		{"SCHEDULER_JOB_PLAN_CHANGE_ENABLED=maybe", []string{`SCHEDULER_JOB_PLAN_CHANGE_ENABLED="maybe" is not valid: want one of true, false, 1, 0, yes, no`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_TIMEOUT=0", []string{`SCHEDULER_JOB_PLAN_CHANGE_TIMEOUT="0" is not valid: want a maximum runtime above 0 such as "10m"`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_TIMEOUT=-5m", []string{`SCHEDULER_JOB_PLAN_CHANGE_TIMEOUT="-5m" is not valid: want a maximum runtime above 0`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_CATCHUP=-1h", []string{`SCHEDULER_JOB_PLAN_CHANGE_CATCHUP="-1h" is not valid: want a duration of 0 (no catch-up) or more`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_MIN_GAP=-1s", []string{`SCHEDULER_JOB_PLAN_CHANGE_MIN_GAP="-1s" is not valid: want a duration of 0 or more`}},
		{"SCHEDULER_JOB_PLAN_CHANG_SCHEDULE=0 2 * * *", []string{`SCHEDULER_JOB_PLAN_CHANG_SCHEDULE="0 2 * * *" is not valid: want a known job in place of "PLAN_CHANG": one of PLAN_CHANGE, ROUNDS_OPEN, TICK`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_TIMEOUTS=5m", []string{`SCHEDULER_JOB_PLAN_CHANGE_TIMEOUTS="5m" is not valid: want one of the settings SCHEDULER_JOB_PLAN_CHANGE_{SCHEDULE,ENABLED,TIMEOUT,CATCHUP,MIN_GAP,NOTIFY_URL,NOTIFY_ON,NOTIFY_SIGNING_SECRET,NOTIFY_SLACK_URL_SECRET}`}},
		{"SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_URL=ftp://alerts.example.com", []string{`SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_URL="ftp://alerts.example.com"`, "an http(s) URL"}},
		{"SCHEDULER_PUBLIC_URL=scheduler.example.com", []string{`SCHEDULER_PUBLIC_URL="scheduler.example.com"`, "http(s) URL"}},
		{"SCHEDULER_NOTIFY_INTERVAL=100ms", []string{`SCHEDULER_NOTIFY_INTERVAL="100ms"`, "at least 1s"}},
		{"SCHEDULER_JOB_TICK=1", []string{`SCHEDULER_JOB_TICK="1" is not valid: want SCHEDULER_JOB_TICK_<SETTING> with SETTING one of SCHEDULE`}},
	}
	for _, tt := range tests {
		name, _, _ := strings.Cut(tt.env, "=")
		t.Run(tt.env, func(t *testing.T) {
			_, err := load(t, tt.env)
			require.Error(t, err)
			require.Len(t, lines(err), 1, err.Error())
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "secret", "passwords are not printed")
			var cerr *config.Error
			require.ErrorAs(t, err, &cerr)
			assert.Equal(t, name, cerr.Var)
		})
	}
}

func TestJobTimeoutRequired(t *testing.T) {
	_, err := loadAll(config.NewEnv([]string{"DATABASE_URL=" + goodURL}),
		[]config.JobDefaults{{Name: "no-timeout", Schedule: "@hourly"}})
	assert.EqualError(t, err, `SCHEDULER_JOB_NO_TIMEOUT_TIMEOUT is not set: want a maximum runtime above 0 such as "10m"`)
}

func TestJobNamesSharingAPrefix(t *testing.T) {
	defaults := []config.JobDefaults{
		{Name: "plan", Schedule: "@daily", Timeout: time.Minute},
		{Name: "plan-change", Schedule: "@daily", Timeout: time.Minute},
	}
	c, err := loadAll(config.NewEnv([]string{"DATABASE_URL=" + goodURL,
		"SCHEDULER_JOB_PLAN_TIMEOUT=2m", "SCHEDULER_JOB_PLAN_CHANGE_TIMEOUT=3m"}), defaults)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, c.Jobs[0].Timeout)
	assert.Equal(t, 3*time.Minute, c.Jobs[1].Timeout)

	_, err = loadAll(config.NewEnv([]string{"DATABASE_URL=" + goodURL, "SCHEDULER_JOB_PLAN_CHANGE_TIMEOT=3m"}), defaults)
	assert.ErrorContains(t, err, "want one of the settings SCHEDULER_JOB_PLAN_CHANGE_{", "the longest known job is named")

	_, err = loadAll(config.NewEnv([]string{"DATABASE_URL=" + goodURL}), append(defaults, config.JobDefaults{Name: "PLAN_change"}))
	assert.ErrorContains(t, err, `job names "plan-change" and "PLAN_change" share the variables SCHEDULER_JOB_PLAN_CHANGE_*`)
}

func TestSeveralBadVariablesReportedTogether(t *testing.T) {
	_, err := loadAll(config.NewEnv([]string{
		"SCHEDULER_LOG_LEVEL=loud",
		"SCHEDULER_JOB_TICK_TIMEOUT=soon",
		"SCHEDULER_JOB_NOPE_ENABLED=true",
	}), jobs)
	require.Error(t, err)
	got := lines(err)
	require.Len(t, got, 4, err.Error())
	assert.Contains(t, got[0], "DATABASE_URL is not set")
	assert.Contains(t, got[1], `SCHEDULER_LOG_LEVEL="loud"`)
	assert.Contains(t, got[2], `SCHEDULER_JOB_TICK_TIMEOUT="soon"`)
	assert.Contains(t, got[3], `SCHEDULER_JOB_NOPE_ENABLED="true" is not valid: want a known job in place of "NOPE"`)

	var all []*config.Error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var cerr *config.Error
		require.True(t, errors.As(e, &cerr))
		all = append(all, cerr)
	}
	assert.Len(t, all, 4)
}

func TestTokenRequiredOffLoopback(t *testing.T) {
	tests := []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.0.0.2:8080", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"[::]:8080", "", false},
		{"10.1.2.3:8080", "", false},
		{"scheduler.internal:8080", "", false},
		{"0.0.0.0:8080", "t0ken", true},
		{":8080", "t0ken", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr+"/"+tt.token, func(t *testing.T) {
			_, err := load(t, "SCHEDULER_HTTP_ADDR="+tt.addr, "SCHEDULER_API_TOKEN="+tt.token)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			_, port, _ := strings.Cut(tt.addr, "]:")
			if port == "" {
				port = tt.addr[strings.LastIndex(tt.addr, ":")+1:]
			}
			assert.EqualError(t, err, `SCHEDULER_API_TOKEN is not set: want a bearer token because SCHEDULER_HTTP_ADDR="`+tt.addr+
				`" is reachable from other hosts (set a token, or bind 127.0.0.1:`+port+`)`)
		})
	}
}

func TestDatabaseURLAccepts(t *testing.T) {
	for _, u := range []string{
		"postgres://user:pass@localhost:5432/scheduler",
		"postgresql://localhost/scheduler?sslmode=disable&application_name=x",
		"postgres:///scheduler?host=/var/run/postgresql",
		"postgres://user:p%40ss@db1:5432,db2:5432/scheduler",
		"host=localhost dbname=scheduler",
		`host = localhost  port=5432 password=it\'s user=me`,
		`host=localhost password='a b\'c' dbname=x`,
	} {
		env := config.NewEnv([]string{"DATABASE_URL=" + u})
		assert.Equal(t, u, config.DatabaseURL(env), u)
		assert.NoError(t, env.Err(), u)
	}
}

func TestEnv(t *testing.T) {
	env := config.NewEnv([]string{
		"A=1", "A=2", "B= yes ", "C=", "D=0", "E=42", "F=off", "G=1x", "NOEQUALS",
		"SCHEDULER_JOB_X=1", "SCHEDULER_JOB_Y=", "SCHEDULER_OTHER=1",
	})
	assert.Equal(t, "1", env.String("A", "d"), "the first entry wins, as in os.Getenv")
	assert.Equal(t, "d", env.String("C", "d"), "empty counts as not set")
	assert.True(t, env.Bool("B", false))
	assert.False(t, env.Bool("D", true))
	assert.True(t, env.Bool("MISSING", true))
	assert.Equal(t, time.Duration(0), env.Duration("D", time.Hour), `a bare "0" is a duration`)
	assert.Equal(t, time.Hour, env.Duration("C", time.Hour))
	assert.Equal(t, 42, env.Int("E", 0))
	assert.Equal(t, 7, env.Int("MISSING", 7))
	assert.NoError(t, env.Err())

	assert.True(t, env.Bool("F", true), "bad values give the default")
	assert.Equal(t, 3, env.Int("G", 3))
	env.Fail("CUSTOM", "v", "w")
	assert.EqualError(t, env.Err(), strings.Join([]string{
		`F="off" is not valid: want one of true, false, 1, 0, yes, no`,
		`G="1x" is not valid: want a whole number such as 10`,
		`CUSTOM="v" is not valid: want w`,
	}, "\n"))

	assert.Equal(t, []string{"SCHEDULER_JOB_X"}, env.Names("SCHEDULER_JOB_"))
	assert.Equal(t, []string{"SCHEDULER_JOB_X", "SCHEDULER_OTHER"}, env.Names("SCHEDULER_"))
}

// loadAll loads the whole configuration as serve does: the service settings, then the jobs'.
func loadAll(env *config.Env, defaults []config.JobDefaults) (*config.Config, error) {
	c := config.Load(env)
	if err := c.LoadJobs(env, defaults); err != nil {
		return nil, err
	}
	return c, nil
}

func TestReadAndNextTokens(t *testing.T) {
	c, err := load(t, "SCHEDULER_API_TOKEN=full", "SCHEDULER_API_TOKEN_NEXT=next", "SCHEDULER_API_READ_TOKEN=read")
	require.NoError(t, err)
	assert.Equal(t, "next", c.APITokenNext)
	assert.Equal(t, "read", c.APIReadToken)

	// Without the full token /v1 is open, so the others would protect nothing.
	_, err = load(t, "SCHEDULER_API_READ_TOKEN=read", "SCHEDULER_API_TOKEN_NEXT=next")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SCHEDULER_API_TOKEN")
	assert.Len(t, strings.Split(err.Error(), "\n"), 1, "one line for the missing token")
	_, err = load(t, "SCHEDULER_API_TOKEN=same", "SCHEDULER_API_READ_TOKEN=same")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SCHEDULER_API_READ_TOKEN")
	assert.NotContains(t, err.Error(), "same", "a token is never printed")
}

// A built-in job's notifications come from SCHEDULER_JOB_<NAME>_NOTIFY_*: a webhook and a
// Slack URL secret, both on the events NOTIFY_ON names (every event by default).
func TestBuiltinJobNotifications(t *testing.T) {
	c, err := load(t, "SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_URL=https://alerts.example.com/ops",
		"SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_SIGNING_SECRET=OPS_SIGNING", "SCHEDULER_SECRET_OPS_SIGNING=whsec_abc",
		"SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_ON=failed, recovered", "SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_SLACK_URL_SECRET=OPS_SLACK",
		"SCHEDULER_SECRET_OPS_SLACK=https://hooks.slack.com/services/T/B/x", "SCHEDULER_PUBLIC_URL=https://scheduler.example.com/")
	require.NoError(t, err)
	var plan config.Job
	for _, j := range c.Jobs {
		if j.Name == "plan-change" {
			plan = j
		}
	}
	require.Len(t, plan.Notify, 2)
	assert.Equal(t, []string{"failed", "recovered"}, plan.Notify[0].On)
	assert.Equal(t, "https://alerts.example.com/ops", plan.Notify[0].Webhook.URL)
	assert.Equal(t, "OPS_SIGNING", plan.Notify[0].Webhook.SigningSecret)
	assert.Equal(t, "OPS_SLACK", plan.Notify[1].Slack.URLSecret)
	assert.Equal(t, "https://scheduler.example.com", c.Notifications.PublicURL)
	assert.Equal(t, config.NotifyIntervalDefault, c.Notifications.Interval)

	c, err = load(t)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:8080", c.Notifications.PublicURL, "the default is the listen address")

	// Every wrong variable at once, each named.
	_, err = load(t, "SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_URL=https://alerts.example.com/ops",
		"SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_ON=failed,exploded", "SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_SLACK_URL_SECRET=OPS_SLACK",
		"SCHEDULER_JOB_ROUNDS_OPEN_NOTIFY_ON=failed")
	require.Error(t, err)
	assert.Len(t, lines(err), 3, err.Error())
	assert.Contains(t, err.Error(), `SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_ON="failed,exploded" is not valid: want "exploded" is not an event`)
	assert.Contains(t, err.Error(), `SCHEDULER_JOB_PLAN_CHANGE_NOTIFY_SLACK_URL_SECRET="OPS_SLACK" is not valid: want secret OPS_SLACK is not set: set SCHEDULER_SECRET_OPS_SLACK`)
	assert.Contains(t, err.Error(), `SCHEDULER_JOB_ROUNDS_OPEN_NOTIFY_URL is not set: want a webhook URL`)
}
