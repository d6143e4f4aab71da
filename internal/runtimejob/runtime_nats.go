package runtimejob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/redact"
	"github.com/schedulerhq/scheduler/internal/secrets/allowedhosts"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// natsRunner publishes its message at least once per slot, every attempt and every
// recovery of the slot with the same Nats-Msg-Id, the slot's key: the stream's duplicate
// window keeps one message per slot, and its duplicate ack counts as success. It goes
// through the HTTP jobs' caller (targets.Caller.Publish): the same bounds, retries,
// deadline and recorded attempts.
type natsRunner struct {
	rt  *Runtime
	def *Checked
}

func (j *natsRunner) Name() string                   { return j.def.Def.Key() }
func (j *natsRunner) Defaults() jobcontract.Defaults { return jobcontract.Defaults{} }

func (j *natsRunner) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	var stats jobcontract.Stats
	n := j.def.Def.NATS
	if env.Params.DryRun {
		recordNote(ctx, env, fmt.Sprintf("dry run: would publish %d bytes to NATS subject %s with Nats-Msg-Id %s; nothing was sent",
			len(n.Body), n.Subject, env.Call.IdempotencyKey))
		return stats, nil
	}
	guard, err := j.rt.guard(ctx, j.def)
	if err != nil {
		return stats, err
	}
	serverURL, allowed, err := j.serverURL(ctx)
	if err != nil {
		return stats, err
	}
	// The URL's password must not reach the run's attempts or error through a server's
	// or the client's words.
	red := redact.New(secretParts(serverURL)...)
	res := j.rt.Caller.Publish(ctx, targets.Request{
		Job: j.def.Def.Key(), Namespace: namespace.Of(j.def.Def.Key()), AllowedHosts: allowed, Guard: guard,
		URL: serverURL, Subject: n.Subject, Body: []byte(n.Body),
		AttemptTimeout: j.def.AttemptTimeout,
		IdempotencyKey: env.Call.IdempotencyKey, RunID: env.RunID, ScheduledAt: env.Call.ScheduledAt,
		Retry: targets.RetryPolicy{MaxAttempts: j.def.Retry.MaxAttempts,
			InitialBackoff: j.def.Retry.InitialBackoff, MaxBackoff: j.def.Retry.MaxBackoff},
		Deadline: env.Call.Deadline,
		OnAttempt: func(a targets.Attempt) {
			a.Body, a.Error = red.Text(a.Body), red.Text(a.Error)
			if err := env.Call.RecordAttempt(ctx, attemptRecord(a)); err != nil {
				env.Log.Warn("recording the publish attempt failed", "attempt", a.Number, "error", err)
			}
			attrs := []any{"attempt", a.Number, "duration", a.Duration}
			if a.Error != "" {
				attrs = append(attrs, "error", a.Error)
			}
			env.Log.Info("publish attempt", attrs...)
		},
		OnWait: func(next time.Time) { recordNextAttempt(ctx, env, next) },
	})
	stats.Processed = int64(len(res.Attempts))
	for _, a := range res.Attempts {
		class := targets.NoAnswer
		if a.Error == "" {
			class = targets.PublishAcked
		}
		stats.Count(class, 1)
	}
	if res.Err != nil {
		stats.Errors = 1
		return stats, errors.New(red.Text(res.Err.Error()))
	}
	stats.Changed = 1
	return stats, nil
}

// serverURL is the server's URL: the definition's, or its secret's value resolved now, if
// the secret may go to the URL's host (checked again on every connection, with the hosts
// returned).
func (j *natsRunner) serverURL(ctx context.Context) (string, []targets.AllowedHosts, error) {
	n := j.def.Def.NATS
	if n.URLSecret == "" {
		return n.URL, nil, nil
	}
	ns := namespace.Of(j.def.Def.Key())
	if j.rt.Secrets == nil {
		return "", nil, errors.New(SecretMissing(ns, n.URLSecret))
	}
	values, err := j.rt.Secrets.Resolve(ctx, ns, []string{n.URLSecret})
	if err != nil {
		return "", nil, err
	}
	v, ok := values[n.URLSecret]
	if !ok || v.Value == "" {
		return "", nil, errors.New(SecretMissing(ns, n.URLSecret))
	}
	if v.AllowedHosts == nil {
		return v.Value, nil, nil // an operator's secret: any host the guard allows
	}
	host, port, err := allowedhosts.FromURL(v.Value)
	if err != nil || host == "" {
		return "", nil, fmt.Errorf("not attempted: the value of secret %s is not a NATS URL: store nats://user:password@host:4222 in it", n.URLSecret)
	}
	if !allowedhosts.Match(v.AllowedHosts, host, port) {
		return "", nil, fmt.Errorf("not attempted, nothing was sent: secret %s of namespace %s may be sent only to %s, and its URL's host is %s: bind the secret to that host (PUT /v1/namespaces/%s/secrets/%s)",
			n.URLSecret, ns, allowedhosts.Describe(v.AllowedHosts), net.JoinHostPort(host, port), ns, n.URLSecret)
	}
	return v.Value, []targets.AllowedHosts{{Secret: n.URLSecret, Hosts: v.AllowedHosts}}, nil
}

// secretParts are what a URL holds that no record may show: the whole URL, and its
// password, or its user when it has none (nats://TOKEN@host is a token).
func secretParts(raw string) []string {
	parts := []string{raw}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			parts = append(parts, p)
		} else {
			parts = append(parts, u.User.Username())
		}
	}
	return parts
}
