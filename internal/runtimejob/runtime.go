package runtimejob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/outbound"
	"github.com/schedulerhq/scheduler/internal/redact"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// Runtime is what the leader needs to run the jobs users define at runtime (docs/design.md
// guarantee 11): the engine asks it to Build the body of each checked definition.
type Runtime struct {
	// Caller makes the HTTP jobs' calls, through the outbound guard.
	Caller *targets.Caller
	// Secrets resolves the secrets a job names, by the job's namespace, when it runs
	// (internal/secrets); nil resolves none, and a job that names one fails.
	Secrets SecretSource
	// SQLTargets are the databases SQL jobs run in.
	SQLTargets *targets.SQLTargets
	// Tokens signs the OIDC token of each attempt of a job whose http.auth asks for one
	// (internal/idp); nil signs none, and such a job's attempts fail with the reason.
	Tokens *idp.Keys
	// Outbound says what each namespace's jobs may reach (internal/outbound), read at every
	// run: a SQL job runs only in a target of its namespace, an HTTP job calls through its
	// namespace's guard. Nil: every declared target and the caller's guard.
	Outbound *outbound.Policy
}

// guard is the outbound guard of the job's namespace for one run's call; nil (the caller's)
// without a policy.
func (rt *Runtime) guard(ctx context.Context, c *Checked) (*targets.Guard, error) {
	if rt.Outbound == nil {
		return nil, nil
	}
	g, err := rt.Outbound.GuardFor(ctx, namespace.Of(c.Def.Key()))
	if err != nil {
		return nil, fmt.Errorf("not attempted: %w", err)
	}
	return g, nil
}

// Build makes the body the engine runs for a checked definition.
func (rt *Runtime) Build(c *Checked) jobcontract.Job {
	if c.Def.SQL != nil || c.Def.River != nil {
		return &sqlRunner{rt: rt, def: c}
	}
	if c.Def.NATS != nil {
		return &natsRunner{rt: rt, def: c}
	}
	return &httpRunner{rt: rt, def: c}
}

// httpRunner calls its target at least once per slot: every attempt, and the recovery run
// after a failover, carry the same Idempotency-Key, so a receiver that deduplicates by it
// applies the slot once.
type httpRunner struct {
	rt  *Runtime
	def *Checked
}

func (j *httpRunner) Name() string                   { return j.def.Def.Key() }
func (j *httpRunner) Defaults() jobcontract.Defaults { return jobcontract.Defaults{} }

func (j *httpRunner) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	var stats jobcontract.Stats
	h := j.def.Def.HTTP
	body := h.Body
	if env.Params.Body != nil {
		body = *env.Params.Body
	}
	if env.Params.DryRun {
		recordNote(ctx, env, fmt.Sprintf("dry run: would call %s %s with %d headers of its own and %d of the trigger's, a body of %d bytes, and Idempotency-Key %s; nothing was sent",
			h.Method, h.URL, len(h.Headers), len(env.Params.Headers), len(body), env.Call.IdempotencyKey))
		return stats, nil
	}
	guard, err := j.rt.guard(ctx, j.def)
	if err != nil {
		return stats, err
	}
	values, allowedHosts, err := j.callSecrets(ctx)
	if err != nil {
		return stats, err
	}
	header := http.Header{}
	var secrets []string // the values used, kept out of what is recorded
	for k, v := range h.Headers {
		header.Set(k, v)
	}
	for k, v := range env.Params.Headers { // a trigger's, checked by the API; the auth below wins
		header.Set(k, v)
	}
	var authorize func(ctx context.Context, attempt int) (string, error)
	if a := h.Auth; a != nil {
		if a.OIDC != nil {
			authorize = j.tokens(env, a.OIDC.Audience, &secrets)
		} else if a.BearerSecret != "" {
			v := values[a.BearerSecret]
			header.Set("Authorization", "Bearer "+v)
			secrets = append(secrets, v)
		} else {
			v := values[a.HeaderSecret]
			header.Set(a.Header, v)
			secrets = append(secrets, v)
		}
	}
	if cb := env.Call.Callback; cb != nil {
		// The token authenticates the target's completion of this run only; it is redacted
		// like a secret, so an echoing target does not put it into the run's attempts.
		header.Set("X-Scheduler-Callback-Url", cb.URL)
		header.Set("X-Scheduler-Callback-Token", cb.Token)
		secrets = append(secrets, cb.Token)
	}
	var signingKey []byte
	if h.SigningSecret != "" {
		v := values[h.SigningSecret]
		signingKey = targets.SignatureKey(v)
		secrets = append(secrets, v)
	}
	// A target that echoes its request would otherwise put the secret into run_attempts,
	// which every API reader sees, in whatever encoding it echoes it. An attempt's token
	// joins secrets when it is made, so the redactor is made anew for each attempt.
	redactor := func() *redact.Redactor { return redact.New(secrets...) }
	req := targets.Request{
		Job: j.def.Def.Key(), Namespace: namespace.Of(j.def.Def.Key()), AllowedHosts: allowedHosts, Guard: guard,
		Method: h.Method, URL: h.URL, Header: header, Body: []byte(body),
		AttemptTimeout: j.def.AttemptTimeout, Success: h.Success,
		IdempotencyKey: env.Call.IdempotencyKey, RunID: env.RunID, ScheduledAt: env.Call.ScheduledAt,
		SigningKey: signingKey, Authorize: authorize,
		Retry: targets.RetryPolicy{MaxAttempts: j.def.Retry.MaxAttempts,
			InitialBackoff: j.def.Retry.InitialBackoff, MaxBackoff: j.def.Retry.MaxBackoff},
		Deadline: env.Call.Deadline,
		OnAttempt: func(a targets.Attempt) {
			red := redactor()
			a.Body, a.Error = red.Text(a.Body), red.Text(a.Error)
			if err := env.Call.RecordAttempt(ctx, attemptRecord(a)); err != nil {
				env.Log.Warn("recording the call attempt failed", "attempt", a.Number, "error", err)
			}
			attrs := []any{"attempt", a.Number, "status_code", a.StatusCode, "duration", a.Duration}
			if a.Error != "" {
				attrs = append(attrs, "error", a.Error)
			}
			env.Log.Info("call attempt", attrs...)
		},
		OnWait: func(next time.Time) { recordNextAttempt(ctx, env, next) },
	}
	res := j.rt.Caller.Do(ctx, req)
	stats.Processed = int64(len(res.Attempts))
	for _, a := range res.Attempts {
		stats.Count(targets.StatusClass(a.StatusCode), 1)
	}
	if res.Err != nil {
		stats.Errors = 1
		return stats, errors.New(redactor().Text(res.Err.Error()))
	}
	stats.Changed = 1
	return stats, nil
}

// tokens makes each attempt's Authorization: a token for audience, signed by the scheduler
// for this job and run. Its sub is the job's key, the stored definition's namespace and
// name, so no field of the definition can make it name another namespace. Each token joins
// secrets, so an echoing target does not put it into the run's attempts.
func (j *httpRunner) tokens(env *jobcontract.Env, audience string, secrets *[]string) func(ctx context.Context, attempt int) (string, error) {
	return func(ctx context.Context, attempt int) (string, error) {
		if j.rt.Tokens == nil {
			return "", idp.ErrNoSecretKey
		}
		token, err := j.rt.Tokens.Sign(ctx, idp.Token{Job: j.def.Def.Key(), Audience: audience,
			RunID: env.RunID, ScheduledAt: env.Call.ScheduledAt, Attempt: attempt})
		if err != nil {
			return "", err
		}
		*secrets = append(*secrets, token)
		return "Bearer " + token, nil
	}
}

// recordNote keeps what a run did, or a dry run would have done, on the run, as its one
// attempt's body, so the run says it (GET /v1/runs/{id}) instead of only a log line.
func recordNote(ctx context.Context, env *jobcontract.Env, what string) {
	env.Log.Info(what)
	a := store.Attempt{Number: 1, StartedAt: time.Now(), Body: &what}
	if err := env.Call.RecordAttempt(ctx, a); err != nil {
		env.Log.Warn("recording the dry run failed", "error", err)
	}
}

// recordNextAttempt records when a retrying run tries again (zero: the wait is over).
func recordNextAttempt(ctx context.Context, env *jobcontract.Env, next time.Time) {
	if env.Call.RecordNextAttempt == nil {
		return
	}
	var at *time.Time
	if !next.IsZero() {
		at = &next
	}
	if err := env.Call.RecordNextAttempt(ctx, at); err != nil {
		env.Log.Warn("recording the next attempt's time failed", "error", err)
	}
}

// attemptRecord is a call attempt as run_attempts stores it: an HTTP answer's status and
// body, or a NATS publish's acknowledgement in words (no status).
func attemptRecord(a targets.Attempt) store.Attempt {
	r := store.Attempt{Number: a.Number, StartedAt: a.StartedAt, Duration: a.Duration}
	if a.StatusCode != 0 {
		code := a.StatusCode
		r.StatusCode = &code
	}
	if a.StatusCode != 0 || a.Body != "" {
		body := a.Body
		r.Body = &body
	}
	if a.Error != "" {
		msg := a.Error
		r.Error = &msg
	}
	return r
}

// sqlRunner runs its statements in the target it names, on a connection of its own, with the
// slot's marker in their transaction (targets.SQLTarget.Run): a slot's statements commit
// once, and a retry or a recovery of a slot that committed records it succeeded without
// running it again. The run is recorded after the target's commit.
type sqlRunner struct {
	rt  *Runtime
	def *Checked
}

func (j *sqlRunner) Name() string                   { return j.def.Def.Key() }
func (j *sqlRunner) Defaults() jobcontract.Defaults { return jobcontract.Defaults{} }

func (j *sqlRunner) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	if j.def.Def.TargetName() == "" {
		return jobcontract.Stats{}, fmt.Errorf("this %s job names no target: an operator declares SCHEDULER_SQL_TARGET_<NAME>, and the job's definition names it in %s.target",
			j.def.Def.Kind(), j.def.Def.Kind())
	}
	target, err := j.target(ctx)
	if err != nil {
		return jobcontract.Stats{}, err
	}
	run := targets.SQLRun{Key: env.Call.IdempotencyKey, Job: j.def.Def.Key(),
		RunID: env.RunID, ScheduledAt: env.Call.ScheduledAt, Vars: env.Params.Vars, Timeout: j.def.Timeout,
		Connected: func(ctx context.Context, pid uint32, started time.Time) error {
			return env.Call.RecordBackend(ctx, store.SQLBackend{Target: target.Name(), PID: pid, BackendStart: started})
		}}
	what := ""
	if r := j.def.Def.River; r != nil {
		run.River = &targets.RiverJob{Kind: r.Kind, Args: r.Args, Queue: r.Queue, Unique: r.Unique}
		what = fmt.Sprintf("insert a River job of kind %s into queue %s (%d bytes of args)", r.Kind, r.Queue, len(r.Args))
	} else {
		run.Statements = j.def.Def.SQL.Statements
		what = fmt.Sprintf("run %d bytes of statements", len(run.Statements))
	}
	if env.Params.DryRun { // nothing is changed, and nothing can be counted without running
		recordNote(ctx, env, fmt.Sprintf("dry run: would %s in SQL target %s with %d vars, under marker key %s; nothing ran",
			what, target.Name(), len(env.Params.Vars), env.Call.IdempotencyKey))
		return jobcontract.Stats{}, nil
	}
	res, err := target.Run(ctx, run)
	env.Call.ForgetBackend(ctx)
	if err != nil {
		return jobcontract.Stats{}, err
	}
	if res.AppliedBy != 0 {
		env.Log.Info("the slot's marker is already in the target: it committed in an earlier run; not run again", "applied_by_run_id", res.AppliedBy)
		stats := jobcontract.Stats{}
		stats.Count("already_applied", 1)
		return stats, nil
	}
	stats := jobcontract.Stats{Processed: int64(res.Statements), Changed: res.RowsAffected}
	if run.River != nil {
		j.recordRiver(ctx, env, res.River)
		if res.River.Duplicate {
			stats.Count("river_duplicate", 1)
		}
	}
	return stats, nil
}

// recordRiver keeps the River job's id on the run, as its one attempt's body, so that the
// run names the job a worker got (GET /v1/runs/{id}).
func (j *sqlRunner) recordRiver(ctx context.Context, env *jobcontract.Env, ins targets.RiverInserted) {
	what := fmt.Sprintf("inserted River job %d", ins.JobID)
	if ins.Duplicate {
		what = fmt.Sprintf("inserted no River job: job %d of the same kind, args and queue still waits or runs (unique)", ins.JobID)
	}
	recordNote(ctx, env, what)
}

// target is the SQL target the job names, if its namespace may use it now: a definition
// stored before an admin took the target from the namespace (or bound its login elsewhere)
// fails its run, nothing run, with what to do.
func (j *sqlRunner) target(ctx context.Context) (*targets.SQLTarget, error) {
	name := j.def.Def.TargetName()
	if j.rt.Outbound == nil {
		return j.rt.SQLTargets.Lookup(name)
	}
	ns := namespace.Of(j.def.Def.Key())
	surface, err := j.rt.Outbound.For(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("not run: reading the SQL targets of namespace %s failed: %w", ns, err)
	}
	t, err := surface.SQLTarget(name)
	if err != nil {
		return nil, fmt.Errorf("not run: %w", err)
	}
	return t, nil
}
