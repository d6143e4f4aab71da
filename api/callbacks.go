package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/runend"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Completion by callback (issue 33): the target of a callback job's run posts the run's
// outcome, and its heartbeats, with the run's own token (X-Scheduler-Callback-Token, sent
// with the call), not an API token. These routes sit outside the API's authentication: the
// token is valid for its run only, and is compared with the hash job_runs keeps.

// maxOutput bounds what a completion's output keeps, as an attempt's body is bounded.
const maxOutput = 4 << 10

// callbackRoutes registers the two routes, behind the cross-site protection the acting
// routes have: a page on another site must not post completions through a browser either.
func (s *Server) callbackRoutes(r chi.Router) {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.refused(r, probCrossOrigin)
		httpx.WriteProblem(w, r, http.StatusForbidden, probCrossOrigin, "a cross-site browser request may not complete a run")
	}))
	r.Group(func(r chi.Router) {
		r.Use(cop.Handler)
		r.Post("/v1/runs/{id}/complete", s.completeRun)
		r.Post("/v1/runs/{id}/heartbeat", s.heartbeatRun)
	})
}

// completionRequest is POST /v1/runs/{id}/complete's body.
type completionRequest struct {
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
}

// callbackAnswer is what both routes answer with 200.
type callbackAnswer struct {
	RunID  int64  `json:"run_id"`
	Status string `json:"status"`
}

func (s *Server) completeRun(w http.ResponseWriter, r *http.Request) {
	id := runID(w, r)
	if id == 0 {
		return
	}
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return
	}
	var req completionRequest
	if body == nil {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "status", `send {"status": "succeeded" | "failed", "output": ...}`)
		return
	}
	if !httpx.DecodeStrict(w, r, body, &req) {
		return
	}
	if req.Status != store.StatusSucceeded && req.Status != store.StatusFailed {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "status", fmt.Sprintf("status must be %q or %q; got %q", store.StatusSucceeded, store.StatusFailed, req.Status))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	// What the end means (events, the automatic pause) is decided as the leader decides it
	// for the runs it ends, from the job's definition, in the completion's transaction.
	out, run, paused, err := runend.Complete(ctx, s.cfg.DB, store.Completion{RunID: id, TokenHash: store.CallbackTokenHash(bearer(r)),
		Status: req.Status, Output: boundedOutput(req.Output)}, s.cfg.InstanceID)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	switch out {
	case store.CallbackRefused:
		s.refuseCallback(w, r, id)
	case store.CallbackConflict:
		httpx.WriteProblem(w, r, http.StatusConflict, probRunFinished, fmt.Sprintf("run %d already ended %s; the completion %q is refused", id, run.Status, req.Status))
	default:
		if out == store.CallbackDone {
			s.cfg.Recorder.RunRecorded(run.Job, req.Status, run.Trigger)
			if len(paused) > 0 {
				s.cfg.Recorder.SetJobPaused(run.Job, true)
			}
		}
		httpx.WriteJSON(w, http.StatusOK, callbackAnswer{RunID: id, Status: req.Status})
	}
}

func (s *Server) heartbeatRun(w http.ResponseWriter, r *http.Request) {
	id := runID(w, r)
	if id == 0 {
		return
	}
	if _, ok := httpx.ReadBody(w, r); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	out, err := s.cfg.DB.HeartbeatCallback(ctx, id, store.CallbackTokenHash(bearer(r)))
	switch {
	case err != nil:
		s.databaseProblem(w, r, err)
	case out == store.CallbackRefused:
		s.refuseCallback(w, r, id)
	case out == store.CallbackConflict:
		httpx.WriteProblem(w, r, http.StatusConflict, probRunFinished, fmt.Sprintf("run %d has ended; stop working on it", id))
	default:
		httpx.WriteJSON(w, http.StatusOK, callbackAnswer{RunID: id, Status: store.StatusRunning})
	}
}

// refuseCallback answers 401 for a token that is not the run's, whatever the reason (no such
// run, not a callback run, another run's token), so the answer tells a guesser nothing, and
// audits it as a refused request, rate-limited as every refusal is.
func (s *Server) refuseCallback(w http.ResponseWriter, r *http.Request, id int64) {
	s.refused(r, probUnauthorized)
	w.Header().Set("WWW-Authenticate", `Bearer realm="scheduler-run"`)
	detail := fmt.Sprintf(`send run %d's callback token (the X-Scheduler-Callback-Token its call carried) as "Authorization: Bearer <token>"`, id)
	httpx.WriteProblem(w, r, http.StatusUnauthorized, probUnauthorized, detail, client.FieldError{Field: "Authorization", Detail: detail})
}

// bearer is the request's bearer token, "" when it has none.
func bearer(r *http.Request) string {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		return h[len(prefix):]
	}
	return ""
}

// boundedOutput is what job_runs keeps of a completion's output: a JSON string's text, or
// any other value's JSON, cut to its first 4 KiB of valid UTF-8 without NUL (which
// PostgreSQL refuses in text); nil when there is none.
func boundedOutput(raw json.RawMessage) *string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	text := string(raw)
	var str string
	if raw[0] == '"' && json.Unmarshal(raw, &str) == nil {
		text = str
	}
	if len(text) > maxOutput {
		cut := maxOutput
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	text = strings.ReplaceAll(strings.ToValidUTF8(text, ""), "\x00", "")
	return &text
}
