package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/tracing"
)

const (
	// maxReasonRunes caps a trigger's reason.
	maxReasonRunes = 500
)

// triggerRun queues a manual run; the leader's engine executes it (the insert NOTIFYs it).
//
// Without an Idempotency-Key, a trigger while the job has a queued or running run answers
// that run (200) instead of queuing another, when that run has the trigger's params (or the
// trigger has none); otherwise the trigger's inputs would be dropped silently, so it is
// refused (409 with the active run's id) and nothing is kept, its key included. With a
// key, the key is claimed in the same transaction as the run insert, so concurrent
// duplicates wait for that transaction and replay its stored answer; the same key with
// another body is a 409. With ?wait, the key stays PENDING while the run is awaited (the
// run must be committed for the leader to see it) and a duplicate arriving meanwhile gets
// 409 idempotency-key-in-progress with Retry-After, as the IETF Idempotency-Key draft
// prescribes; once the answer is sent, it is stored and replayed.
func (s *Server) triggerRun(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readTrigger(w, r)
	if !ok {
		return
	}
	// Not cancelled by the client going away: a cancel that lands while the commit is in
	// flight leaves the run and a PENDING key committed but this handler with an error, so
	// it would never store the answer and the client's retry would find the key in progress.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), queryTimeout)
	defer cancel()
	t, err := s.queueTrigger(ctx, r, in)
	switch {
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	case t.Existing != nil:
		s.replay(w, r, t.Existing, in.key, in.scope, in.hash)
		return
	case t.Refused:
		activeRunProblem(w, r, in.j, t.Run)
		return
	}
	s.logTrigger(r, t.Run, t.Created)
	s.answerTrigger(w, r, in, t)
}

// triggerInput is a trigger's request, checked: the job, ?wait, the Idempotency-Key with
// its scope and the body's hash, and the body's params and reason.
type triggerInput struct {
	j                *jobRef
	wait             time.Duration
	key, scope, hash string
	params           jobcontract.Params
	paramsJSON       []byte
	reason           *string
}

// readTrigger reads and checks a trigger's request, or answers the first thing wrong with
// it (every problem of the body at once).
func (s *Server) readTrigger(w http.ResponseWriter, r *http.Request) (triggerInput, bool) {
	in := triggerInput{j: s.jobToActOn(w, r)}
	if in.j == nil {
		return in, false
	}
	if !in.j.enabled() {
		httpx.WriteProblem(w, r, http.StatusConflict, probJobDisabled, disabledDetail(in.j))
		return in, false
	}
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return in, false
	}
	if in.wait, ok = parseWait(w, r, q); !ok {
		return in, false
	}
	if in.key, ok = idempotencyKey(w, r); !ok {
		return in, false
	}
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return in, false
	}
	var req client.TriggerRequest
	if body != nil && !httpx.DecodeStrict(w, r, body, &req) {
		return in, false
	}
	params, err := jobcontract.ParseParams(req.Params)
	if err != nil {
		httpx.FieldProblem(w, r, httpx.ProbInvalidJSON, "params", "params must be an object with only known members (dry_run, vars, body, headers): "+err.Error())
		return in, false
	}
	if fields := checkParams(in.j, params); len(fields) > 0 {
		if p := reasonProblem(&req.Reason); p != "" { // every problem at once
			fields = append([]client.FieldError{{Field: "reason", Detail: p}}, fields...)
		}
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, "the run's params have problems; see errors", fields...)
		return in, false
	}
	in.params = params
	in.paramsJSON, _ = json.Marshal(params)
	if in.reason, ok = checkReason(w, r, &req.Reason); !ok {
		return in, false
	}
	in.scope, in.hash = "POST /v1/jobs/{name}/runs:"+in.j.conf.Name, requestHash(body)
	return in, true
}

// queueTrigger queues the run, or finds the job's active run or the key's earlier answer,
// with the trigger's audit row and the key's claim in one transaction.
func (s *Server) queueTrigger(ctx context.Context, r *http.Request, in triggerInput) (store.Triggered, error) {
	return s.cfg.DB.TriggerManualRun(ctx, store.ManualTrigger{
		Job: in.j.conf.Name, Reason: in.reason, Params: in.paramsJSON, Traceparent: tracing.Traceparent(r.Header),
		Key: in.key, Scope: in.scope, RequestHash: in.hash, TTL: s.cfg.IdempotencyTTL, Wait: in.wait > 0,
		// Also when the job already had an active run: the operator did ask for a run.
		Audit:  s.triggerAction(r, in.j.conf.Name, in.reason, in.params),
		Refuse: func(active *store.Run) bool { return !answersParams(active, in.params) },
		Answer: func(run *store.Run, created bool) (int, []byte) {
			answer, _ := json.Marshal(newRunView(run))
			return triggerStatus(created), answer
		},
	})
}

// answerTrigger answers the queued (or active) run: at once, or once it ends within ?wait;
// a waited answer is stored for the key, which stayed PENDING meanwhile.
func (s *Server) answerTrigger(w http.ResponseWriter, r *http.Request, in triggerInput, t store.Triggered) {
	run, status, answer := t.Run, triggerStatus(t.Created), t.Answer
	if in.wait > 0 {
		run, status = s.awaitRun(r.Context(), run, in.wait)
	}
	if answer == nil {
		answer, _ = json.Marshal(newRunView(run))
	}
	if in.key != "" && in.wait > 0 {
		// Stored even when the client went away meanwhile, so its retry replays an answer
		// instead of finding the key PENDING until it expires.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(r.Context()), queryTimeout)
		defer scancel()
		if err := s.cfg.DB.CompleteIdempotencyKey(sctx, in.key, in.scope, status, answer); err != nil {
			s.cfg.Log.ErrorContext(sctx, "store the answer of an Idempotency-Key", "error", err, "run_id", run.ID,
				"request_id", httpx.RequestID(r.Context()))
		}
	}
	writeRawRun(w, status, run.ID, answer)
}

// disabledDetail says why a disabled job does not run, and how to enable it.
func disabledDetail(j *jobRef) string {
	switch {
	case j.stored == nil:
		return fmt.Sprintf("job %s is disabled by SCHEDULER_JOB_%s_ENABLED=false on this replica; enable it to run it",
			j.conf.Name, strings.ToUpper(strings.ReplaceAll(j.conf.Name, "-", "_")))
	case j.invalid != "":
		return fmt.Sprintf("job %s does not run: its stored definition no longer passes the check (%s); replace it with PUT /v1/jobs/%s",
			j.conf.Name, j.invalid, j.conf.Name)
	}
	return fmt.Sprintf(`job %s is disabled by its definition ("enabled": false); replace it with "enabled": true (PUT /v1/jobs/%s) to run it`,
		j.conf.Name, j.conf.Name)
}

// triggerStatus: 202 for a newly queued run, 200 for the job's already active one.
func triggerStatus(created bool) int {
	if created {
		return http.StatusAccepted
	}
	return http.StatusOK
}

// logTrigger logs a trigger (TriggerManualRun audited it).
func (s *Server) logTrigger(r *http.Request, run *store.Run, created bool) {
	s.cfg.Log.InfoContext(r.Context(), "manual run triggered", "job", run.Job, "run_id", run.ID,
		"created", created, "request_id", httpx.RequestID(r.Context()))
}

func writeRawRun(w http.ResponseWriter, status int, id int64, b []byte) {
	w.Header().Set("Location", "/v1/runs/"+strconv.FormatInt(id, 10))
	httpx.WriteRawJSON(w, status, b)
}

// parseWait reads ?wait (a Go duration, at most maxWait).
func parseWait(w http.ResponseWriter, r *http.Request, q url.Values) (time.Duration, bool) {
	v := q.Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxWait {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "wait", fmt.Sprintf("wait must be a Go duration between 0s and %s, such as 30s; got %q", maxWait, v))
		return 0, false
	}
	return d, true
}

// triggerAction is a trigger's audit row, with the run's inputs when it has any.
func (s *Server) triggerAction(r *http.Request, key string, reason *string, params jobcontract.Params) *store.Action {
	a := s.action(r, store.ActionTrigger, key, reason)
	if params.Vars != nil || params.Body != nil || params.Headers != nil {
		a.Detail, _ = json.Marshal(map[string]any{"params": params})
	}
	return &a
}
