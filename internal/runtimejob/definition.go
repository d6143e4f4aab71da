// Package runtimejob is the one home of a runtime job, the job a user defines through the
// API, `scheduler apply -f` or the console instead of compiling it in: its JSON (and YAML)
// form, its defaults and its validation (definition.go, check*.go), the loading of a stored
// definition (checked.go: Load, decoded and checked once for the engine and the API alike),
// and the bodies the leader runs for it (runtime.go: the HTTP call with its secrets and
// attempts, the SQL statements). A definition is untrusted input: Check reports every wrong
// field at once, caps every size, and refuses a target an operator did not allow, before
// anything is stored. internal/targets keeps the HTTP caller with its guard and the SQL
// targets' pools.
package runtimejob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/notify"
)

// Kinds of runtime job (the API's `kind`; built-in jobs are "builtin").
const (
	KindHTTP = "http"
	KindSQL  = "sql"
	// KindRiver inserts a River job into a SQL target's database, once per slot.
	KindRiver = "river"
	// KindNATS publishes a message to a NATS JetStream stream, once per slot.
	KindNATS = "nats"
)

// Overlap policies: what a slot that comes due while the job still runs becomes.
const (
	OverlapSkip     = "skip"      // recorded skipped (reason overlap), as built-in jobs do
	OverlapQueueOne = "queue-one" // waits for the running run, then runs; a further slot is skipped
	// OverlapReplace cancels the running run and runs the slot once it ended; a further
	// slot that comes while one waits for that is skipped.
	OverlapReplace = "replace"
	// OverlapAllow runs up to MaxConcurrent runs at once; a slot past them is skipped.
	OverlapAllow = "allow"
)

// MaxConcurrentCap bounds max_concurrent: each run holds a goroutine and, for an HTTP job,
// waits its turn in the job's share of the calls (SCHEDULER_HTTP_JOB_CONCURRENCY).
const MaxConcurrentCap = 50

// Definition is a runtime job as users write it. Durations are Go duration strings ("30s"),
// kept as text so that Check can report every malformed one at once. Check fills in the
// defaults of the fields left out and writes durations the short way, so a definition read
// back is the normal form of what was written.
type Definition struct {
	Name string `json:"name"`
	// Namespace owns the job; Check writes namespace default as "" (left out), so the
	// definitions written before namespaces read back unchanged.
	Namespace string `json:"namespace,omitempty"`
	// Schedule may be left out by a job that names parents in After (after.go).
	Schedule Schedules `json:"schedule,omitempty"`
	// After names the job's parents, in its namespace: the job also runs once per slot of
	// its first parent whose parents' runs all succeeded (after.go).
	After    []string `json:"after,omitempty"`
	TimeZone string   `json:"time_zone,omitempty"`
	// DST, StartAt, EndAt and MaxRuns shape the slots (calendar.go); left out, they are
	// left out of the normal form too, so definitions from before them read back unchanged.
	DST         *DST              `json:"dst,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	EndAt       string            `json:"end_at,omitempty"`
	MaxRuns     int               `json:"max_runs,omitempty"`
	Description string            `json:"description,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Enabled     *bool             `json:"enabled,omitempty"`
	Timeout     string            `json:"timeout,omitempty"`
	// Catchup empty means one period of the schedule (as for built-in jobs); "0s" disables.
	Catchup string `json:"catchup,omitempty"`
	MinGap  string `json:"min_gap,omitempty"`
	Overlap string `json:"overlap,omitempty"`
	// MaxConcurrent bounds the runs at once of an "allow" job (only with it).
	MaxConcurrent int    `json:"max_concurrent,omitempty"`
	Jitter        string `json:"jitter,omitempty"`
	Retry         *Retry `json:"retry,omitempty"`
	// PauseAfterFailures pauses the job after this many failed runs in a row (0: never).
	PauseAfterFailures int          `json:"pause_after_failures,omitempty"`
	HTTP               *HTTPTarget  `json:"http,omitempty"`
	SQL                *SQLTarget   `json:"sql,omitempty"`
	NATS               *NATSTarget  `json:"nats,omitempty"`
	River              *RiverTarget `json:"river,omitempty"`
	// Notify says whom to tell when a run fails, times out or misses its slot, when the job
	// recovers or is paused (internal/notify).
	Notify []notify.Rule `json:"notify,omitempty"`
}

// Retry is an HTTP job's retry policy within one run.
type Retry struct {
	MaxAttempts    int    `json:"max_attempts"`
	InitialBackoff string `json:"initial_backoff,omitempty"`
	MaxBackoff     string `json:"max_backoff,omitempty"`
}

// HTTPTarget is the call an HTTP job makes.
type HTTPTarget struct {
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// Timeout bounds one attempt; the job's timeout bounds them all.
	Timeout       string `json:"timeout,omitempty"`
	Auth          *Auth  `json:"auth,omitempty"`
	SigningSecret string `json:"signing_secret,omitempty"`
	// Success lists the statuses that count as success; empty: any 2xx.
	Success []int `json:"success,omitempty"`
	// Completion is CompletionResponse (the answer ends the run) or CompletionCallback
	// (a success answer only accepts it; the target posts the outcome later, callbacks.go).
	Completion string `json:"completion,omitempty"`
	// HeartbeatTimeout bounds the time between a callback run's heartbeats.
	HeartbeatTimeout string `json:"heartbeat_timeout,omitempty"`
}

// Completion modes of an HTTP job.
const (
	CompletionResponse = "response"
	CompletionCallback = "callback"
)

// HeartbeatTimeoutDefault is a callback job's heartbeat_timeout when it names none (or its
// timeout, when shorter).
const HeartbeatTimeoutDefault = 5 * time.Minute

// IsCallback reports whether the job's runs end by the target's callback.
func (j *Checked) IsCallback() bool {
	return j.Def.HTTP != nil && j.Def.HTTP.Completion == CompletionCallback
}

// Auth says how the call authenticates: with a secret (a bearer token, or a header's value),
// or with an OIDC token the scheduler signs for each attempt (internal/idp).
type Auth struct {
	BearerSecret string    `json:"bearer_secret,omitempty"`
	Header       string    `json:"header,omitempty"`
	HeaderSecret string    `json:"header_secret,omitempty"`
	OIDC         *OIDCAuth `json:"oidc,omitempty"`
}

// OIDCAuth asks for an OIDC token in Authorization: Bearer, signed by the scheduler, whose
// aud is Audience. Its sub names the job's namespace and name; the definition cannot choose it.
type OIDCAuth struct {
	Audience string `json:"audience"`
}

// MaxAudience bounds an OIDC token's audience.
const MaxAudience = 256

// SQLTarget is the statements a SQL job runs and the target they run in.
type SQLTarget struct {
	// Target names an operator's SCHEDULER_SQL_TARGET_<NAME> (case-insensitive).
	Target     string `json:"target"`
	Statements string `json:"statements"`
}

// RiverTarget is the River job a river job inserts into a SQL target's database for each
// slot, in one transaction with the slot's marker (internal/targets, river.go).
type RiverTarget struct {
	// Target names an operator's SCHEDULER_SQL_TARGET_<NAME>, as a SQL job's does.
	Target string `json:"target"`
	// Kind is the River job's kind: what the worker that takes it is registered for.
	Kind string `json:"kind"`
	// Args is the River job's args, a JSON object ({} when left out).
	Args json.RawMessage `json:"args,omitempty"`
	// Queue is River's queue ("default" when left out).
	Queue string `json:"queue,omitempty"`
	// Unique inserts no job while one of the same kind, args and queue still waits or runs.
	Unique bool `json:"unique,omitempty"`
}

// TargetName is the SQL target a sql or river job runs in ("" for an http job).
func (d *Definition) TargetName() string {
	switch {
	case d.SQL != nil:
		return d.SQL.Target
	case d.River != nil:
		return d.River.Target
	}
	return ""
}

// NATSTarget is the message a NATS job publishes to a JetStream stream, once per slot.
type NATSTarget struct {
	// URL is the server (nats://host:4222 or tls://host:4222), without credentials; or
	// URLSecret names a secret whose value is the URL, credentials included, sent only to
	// the hosts the secret is bound to. Exactly one of the two.
	URL       string `json:"url,omitempty"`
	URLSecret string `json:"url_secret,omitempty"`
	// Subject is where the message goes: a literal subject, no wildcard, that a stream
	// captures.
	Subject string `json:"subject"`
	Body    string `json:"body,omitempty"`
}

// Kind is KindHTTP, KindSQL, KindNATS or KindRiver (empty when no target is set).
func (d *Definition) Kind() string {
	switch {
	case d.HTTP != nil:
		return KindHTTP
	case d.SQL != nil:
		return KindSQL
	case d.NATS != nil:
		return KindNATS
	case d.River != nil:
		return KindRiver
	}
	return ""
}

// Key is the job's key: what the engine, its runs and its metrics name it by
// (internal/namespace).
func (d *Definition) Key() string { return namespace.Key(d.Namespace, d.Name) }

// IsEnabled reports whether the job's slots fire (enabled defaults to true).
func (d *Definition) IsEnabled() bool { return d.Enabled == nil || *d.Enabled }

// Secrets lists the secret names the definition uses, in a stable order.
func (d *Definition) Secrets() []string {
	return append(notify.Secrets(d.Notify), d.CallSecrets()...)
}

// CallSecrets lists the secrets a job's own call uses (an HTTP job's auth and signing
// secrets, a NATS job's url_secret), in a stable order: what its runs resolve and hold to
// the call's host.
func (d *Definition) CallSecrets() []string {
	if d.NATS != nil && d.NATS.URLSecret != "" {
		return []string{d.NATS.URLSecret}
	}
	if d.HTTP == nil {
		return nil
	}
	var names []string
	if a := d.HTTP.Auth; a != nil {
		for _, n := range []string{a.BearerSecret, a.HeaderSecret} {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	if d.HTTP.SigningSecret != "" {
		names = append(names, d.HTTP.SigningSecret)
	}
	return names
}

// Decode parses one JSON definition, refusing unknown fields (a misspelt "time_zone" must
// not silently leave the job in UTC) and trailing data.
func Decode(data []byte) (Definition, error) {
	var d Definition
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("the definition is not valid JSON of a job: %w", err)
	}
	if dec.More() {
		return d, errors.New("the definition is not valid JSON of a job: data after the object")
	}
	return d, nil
}
