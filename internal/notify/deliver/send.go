package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/redact"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// send makes one attempt of d and records its outcome under the term's fence. ctx ending
// (the term) leaves d pending, unrecorded: the next leader sends it again, same bytes, same
// webhook-id.
func (t *term) send(ctx context.Context, d store.Delivery) {
	log := t.log.With("job", d.Job, "event", d.Event, "notification_id", d.ID, "webhook_id", d.WebhookID, "kind", d.Kind,
		"run_ids", d.RunIDs, "attempt", d.Attempts+1)
	req, secrets, err := t.request(ctx, d)
	// A secret this leader lacks may be set on the next one: tried again, as an answer
	// that may change is.
	retryable := err != nil
	var res targets.Result
	if err == nil {
		res = t.s.c.Caller.Do(ctx, req)
		err = res.Err
		retryable = len(res.Attempts) > 0 && res.Attempts[len(res.Attempts)-1].Retryable
	}
	if ctx.Err() != nil {
		return
	}
	o := store.DeliveryOutcome{ID: d.ID, Status: store.DeliverySent}
	if n := len(res.Attempts); n > 0 && res.Attempts[n-1].StatusCode != 0 {
		code := res.Attempts[n-1].StatusCode
		o.LastStatus = &code
	}
	if err != nil {
		// The error may quote the URL (a Slack URL is the secret) or what the receiver
		// answered, in any encoding: it goes to the namespace's viewers and to the log.
		msg := redact.New(secrets...).Text(err.Error())
		o.LastError = &msg
		switch {
		case retryable && d.Attempts+1 < maxAttempts:
			o.Status, o.RetryIn = store.DeliveryPending, retryIn(d.Attempts+1)
		default:
			o.Status = store.DeliveryFailed
		}
	}
	recordCtx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	if err := t.s.c.DB.Fenced(recordCtx, t.fence, func(tx *store.Tx) error { return tx.RecordDeliveryOutcome(recordCtx, o) }); err != nil {
		// The message stays pending as it was: it is sent again, under the same webhook-id.
		if ctx.Err() == nil {
			log.Warn("recording a notification's attempt failed; it is sent again", "error", err)
		}
		return
	}
	switch o.Status {
	case store.DeliverySent:
		t.s.c.Metrics.NotificationSent(d.Event, d.Kind)
		log.Info("notification sent", "status_code", derefInt(o.LastStatus))
	case store.DeliveryPending:
		t.s.c.Metrics.NotificationFailed(d.Event, d.Kind)
		log.Warn("sending a notification failed; retrying", "error", *o.LastError, "retry_in", o.RetryIn)
	default:
		t.s.c.Metrics.NotificationFailed(d.Event, d.Kind)
		log.Error("sending a notification failed; giving up", "error", *o.LastError)
	}
}

// request is d's HTTP request, with the secret values it uses (kept out of what is recorded).
func (t *term) request(ctx context.Context, d store.Delivery) (targets.Request, []string, error) {
	ns := namespace.Of(d.Job)
	req := targets.Request{
		// A bound of the caller's own per job: one job's receiver cannot hold another's slot.
		Job:    "notify/" + d.Job,
		Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: d.Body,
		AttemptTimeout: t.s.c.AttemptTimeout, IdempotencyKey: d.WebhookID.String(),
		Retry: targets.RetryPolicy{MaxAttempts: 1}, // a later pass retries, so a slow receiver holds one goroutine
	}
	if t.s.c.Guard != nil {
		g, err := t.s.c.Guard(ctx, ns)
		if err != nil {
			return req, nil, err
		}
		req.Guard = g
	}
	var secrets []string
	switch d.Kind {
	case notify.KindSlack:
		if d.Secret == nil {
			return req, nil, errors.New("a Slack notification names no secret")
		}
		hook, hosts, err := t.s.c.Secret(ctx, ns, *d.Secret)
		if err != nil {
			return req, nil, err
		}
		parts, err := slackURL(*d.Secret, hook)
		if err != nil {
			return req, nil, err
		}
		req.URL, req.AllowedHosts, secrets = hook, allowed(*d.Secret, hosts), append(parts, hook)
	default:
		if d.URL == nil {
			return req, nil, errors.New("a webhook notification names no URL")
		}
		req.URL = *d.URL
		if d.Secret != nil {
			// A signing secret is a signing oracle wherever its HMACs go: the caller
			// holds the call to the secret's allowed hosts.
			key, hosts, err := t.s.c.Secret(ctx, ns, *d.Secret)
			if err != nil {
				return req, nil, err
			}
			req.SigningKey, req.AllowedHosts, secrets = targets.SignatureKey(key), allowed(*d.Secret, hosts), append(secrets, key)
		}
	}
	return req, secrets, nil
}

// slackURL checks that a Slack secret's value is a URL before anything quotes it: the
// caller's words for a URL that does not parse, or lacks a scheme or a host, show parts of
// it. It returns the parts that hold the credential, the path and the query, to be hidden
// wherever they show alone (a receiver that redirects elsewhere with the same path).
func slackURL(secret, value string) ([]string, error) {
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("secret %s does not hold a Slack incoming webhook's URL (https://hooks.slack.com/services/...): "+
			"store the URL Slack gave for the webhook as its value", secret)
	}
	var parts []string
	for _, p := range []string{u.Path, u.RawQuery} {
		if len(p) >= minURLPart {
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// minURLPart is the shortest path or query of a Slack URL hidden on its own: "/" or "/hook"
// alone say nothing, and would hide every slash.
const minURLPart = 8

// allowed is the call's bound for a secret with hosts (none: an operator's, any host).
func allowed(secret string, hosts []string) []targets.AllowedHosts {
	if hosts == nil {
		return nil
	}
	return []targets.AllowedHosts{{Secret: secret, Hosts: hosts}}
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
