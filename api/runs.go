package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	// pendingStaleAfter: a key still PENDING this long after its claim outlived any wait, so
	// the replica that owned it is gone.
	pendingStaleAfter = maxWait + time.Minute
	limitDefault      = 50
	limitMax          = 500
	maxReasonRunes    = 500
)

var (
	runStatuses = []string{store.StatusQueued, store.StatusRunning, store.StatusSucceeded, store.StatusFailed,
		store.StatusSkipped, store.StatusTimedOut, store.StatusAbandoned, store.StatusCancelled, store.StatusMissed}
	runTriggers = []string{store.TriggerSchedule, store.TriggerManual, store.TriggerCatchUp, store.TriggerRecovery}
)

// triggerRequest is the optional body of POST /v1/jobs/{name}/runs.
type triggerRequest struct {
	Reason *string         `json:"reason"`
	Params json.RawMessage `json:"params"`
}

// triggerRun queues a manual run; the leader's engine executes it (the insert NOTIFYs it).
//
// Without an Idempotency-Key, a trigger while the job has a queued or running run answers
// that run (200) instead of queuing another. With a key, the key is claimed in the same
// transaction as the run insert, so concurrent duplicates wait for that transaction and
// replay its stored answer; the same key with another body is a 409. With ?wait, the key
// stays PENDING while the run is awaited (the run must be committed for the leader to see
// it) and a duplicate arriving meanwhile gets 409 idempotency-key-in-progress with
// Retry-After, as the IETF Idempotency-Key draft prescribes; once the answer is sent, it is
// stored and replayed.
func (s *Server) triggerRun(w http.ResponseWriter, r *http.Request) {
	j := s.job(w, r)
	if j == nil {
		return
	}
	if !j.Enabled {
		writeProblem(w, r, http.StatusConflict, probJobDisabled, fmt.Sprintf(
			"job %s is disabled by SCHEDULER_JOB_%s_ENABLED=false on this replica; enable it to run it",
			j.Name, strings.ToUpper(strings.ReplaceAll(j.Name, "-", "_"))))
		return
	}
	q, ok := queryParams(w, r)
	if !ok {
		return
	}
	wait, ok := parseWait(w, r, q)
	if !ok {
		return
	}
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req triggerRequest
	if body != nil && !decodeStrict(w, r, body, &req) {
		return
	}
	params, err := jobs.ParseParams(req.Params)
	if err != nil {
		fieldProblem(w, r, probInvalidJSON, "params", "params must be an object with only known members (dry_run): "+err.Error())
		return
	}
	paramsJSON, _ := json.Marshal(params)
	reason := req.Reason
	if reason != nil && *reason == "" {
		reason = nil
	}
	if reason != nil && (utf8.RuneCountInString(*reason) > maxReasonRunes || !utf8.ValidString(*reason)) {
		fieldProblem(w, r, probInvalidRequest, "reason", fmt.Sprintf("reason must be valid UTF-8 of at most %d characters", maxReasonRunes))
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	scope := "POST /v1/jobs/{name}/runs:" + j.Name
	hash := requestHash(body)
	t, err := s.cfg.DB.TriggerManualRun(ctx, store.ManualTrigger{
		Job: j.Name, Reason: reason, Params: paramsJSON,
		Key: key, Scope: scope, RequestHash: hash, TTL: s.cfg.IdempotencyTTL, Wait: wait > 0,
		Answer: func(run *store.Run, created bool) (int, []byte) {
			answer, _ := json.Marshal(newRunView(run))
			return triggerStatus(created), answer
		},
	})
	switch {
	case err != nil:
		s.databaseProblem(w, r, err)
	case t.Existing != nil:
		s.replay(w, r, t.Existing, key, scope, hash)
	case wait == 0 && key == "":
		s.logTrigger(r, t.Run, t.Created)
		writeRun(w, triggerStatus(t.Created), newRunView(t.Run))
	case wait == 0:
		s.logTrigger(r, t.Run, t.Created)
		writeRawRun(w, triggerStatus(t.Created), t.Run.ID, t.Answer)
	case key == "":
		s.logTrigger(r, t.Run, t.Created)
		run, status := s.awaitRun(r.Context(), t.Run, wait)
		writeRun(w, status, newRunView(run))
	default:
		s.logTrigger(r, t.Run, t.Created)
		final, status := s.awaitRun(r.Context(), t.Run, wait)
		answer, _ := json.Marshal(newRunView(final))
		// Stored even when the client went away meanwhile, so its retry replays an answer
		// instead of finding the key PENDING until it expires.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(r.Context()), queryTimeout)
		defer scancel()
		if err := s.cfg.DB.CompleteIdempotencyKey(sctx, key, scope, status, answer); err != nil {
			s.cfg.Log.ErrorContext(sctx, "store the answer of an Idempotency-Key", "err", err, "run_id", final.ID,
				"request_id", requestID(r.Context()))
		}
		writeRawRun(w, status, final.ID, answer)
	}
}

// triggerStatus: 202 for a newly queued run, 200 for the job's already active one.
func triggerStatus(created bool) int {
	if created {
		return http.StatusAccepted
	}
	return http.StatusOK
}

func (s *Server) logTrigger(r *http.Request, run *store.Run, created bool) {
	s.cfg.Log.InfoContext(r.Context(), "manual run triggered", "job", run.Job, "run_id", run.ID,
		"created", created, "request_id", requestID(r.Context()))
}

// replay answers a request whose Idempotency-Key was already used.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, rec *store.IdempotencyRecord, key, scope, hash string) {
	switch {
	case rec.RequestHash != hash:
		s.cfg.Recorder.IdempotencyConflict()
		writeProblem(w, r, http.StatusConflict, probKeyReused,
			"this Idempotency-Key was first used with another request body; use a new key for a new request",
			FieldError{Field: "Idempotency-Key", Detail: "already used with another body"})
	case rec.Status != store.IdempotencyCompleted && rec.Age > pendingStaleAfter && rec.PendingRunID > 0:
		// The replica that was waiting died before storing its answer; answer as its wait
		// would have (200 finished, 202 not), and store that.
		s.answerStalePending(w, r, rec.PendingRunID, scope, key)
	case rec.Status != store.IdempotencyCompleted:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, http.StatusConflict, probKeyInProgress,
			"the first request with this Idempotency-Key is still waiting for its run; retry after it answered",
			FieldError{Field: "Idempotency-Key", Detail: "in progress"})
	default:
		// Decoded and re-encoded like the first answer was, so the bytes match it.
		var v runView
		if err := json.Unmarshal(rec.ResponseJSON, &v); err != nil {
			s.databaseProblem(w, r, fmt.Errorf("decode the stored answer: %w", err))
			return
		}
		b, _ := json.Marshal(&v)
		s.cfg.Recorder.IdempotencyReplay()
		w.Header().Set("Idempotent-Replayed", "true")
		writeRawRun(w, rec.ResponseStatus, v.ID, b)
	}
}

func (s *Server) answerStalePending(w http.ResponseWriter, r *http.Request, runID int64, scope, key string) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	run, err := s.cfg.DB.Run(ctx, runID)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	status := http.StatusAccepted
	if run.Finished() {
		status = http.StatusOK
	}
	answer, _ := json.Marshal(newRunView(run))
	if err := s.cfg.DB.CompleteIdempotencyKey(ctx, key, scope, status, answer); err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	writeRawRun(w, status, run.ID, answer)
}

func writeRun(w http.ResponseWriter, status int, v *runView) {
	b, _ := json.Marshal(v)
	writeRawRun(w, status, v.ID, b)
}

func writeRawRun(w http.ResponseWriter, status int, id int64, b []byte) {
	w.Header().Set("Location", "/v1/runs/"+strconv.FormatInt(id, 10))
	writeRawJSON(w, status, b)
}

// awaitRun re-reads the run until it finishes, d passes, or the client goes away. It answers
// 200 with the finished run, or 202 with the run as last seen.
func (s *Server) awaitRun(ctx context.Context, run *store.Run, d time.Duration) (*store.Run, int) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(s.pollInterval)
	defer tick.Stop()
	for !run.Finished() {
		select {
		case <-ctx.Done():
			return run, http.StatusAccepted
		case <-timer.C:
			return run, http.StatusAccepted
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		latest, err := s.cfg.DB.Run(qctx, run.ID)
		cancel()
		if err != nil {
			// A failed read does not end the wait; the deadline does.
			continue
		}
		run = latest
	}
	return run, http.StatusOK
}

// parseWait reads ?wait (a Go duration, at most maxWait).
func parseWait(w http.ResponseWriter, r *http.Request, q url.Values) (time.Duration, bool) {
	v := q.Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxWait {
		fieldProblem(w, r, probInvalidRequest, "wait", fmt.Sprintf("wait must be a Go duration between 0s and %s, such as 30s; got %q", maxWait, v))
		return 0, false
	}
	return d, true
}

// idempotencyKey reads the optional Idempotency-Key header, which must be a UUID v4 in its
// canonical 36-character form.
func idempotencyKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", true
	}
	k := strings.ToLower(strings.TrimSpace(vals[0]))
	if len(vals) > 1 || !isUUIDv4(k) {
		detail := fmt.Sprintf("Idempotency-Key must be one UUID v4 such as 3f2504e0-4f89-41d3-9a0c-0305e82c3301; got %q", strings.Join(vals, ", "))
		writeProblem(w, r, http.StatusBadRequest, probInvalidKey, detail, FieldError{Field: "Idempotency-Key", Detail: detail})
		return "", false
	}
	return k, true
}

// isUUIDv4 checks the lower-case canonical form xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx.
func isUUIDv4(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return s[14] == '4' && strings.IndexByte("89ab", s[19]) >= 0
}

// requestHash is the SHA-256 of the canonical body: re-encoded with sorted keys and without
// insignificant white space ({} when empty), so formatting does not make a retry a conflict.
func requestHash(body []byte) string {
	canonical := []byte("{}")
	if body != nil {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			canonical, _ = json.Marshal(v)
		}
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	j := s.job(w, r)
	if j == nil {
		return
	}
	q, ok := queryParams(w, r)
	if !ok {
		return
	}
	f := store.RunFilter{Job: j.Name, Status: q.Get("status"), Trigger: q.Get("trigger"), Limit: limitDefault}
	if f.Status != "" && !slices.Contains(runStatuses, f.Status) {
		fieldProblem(w, r, probInvalidRequest, "status", fmt.Sprintf("status must be one of %s; got %q", strings.Join(runStatuses, ", "), f.Status))
		return
	}
	if f.Trigger != "" && !slices.Contains(runTriggers, f.Trigger) {
		fieldProblem(w, r, probInvalidRequest, "trigger", fmt.Sprintf("trigger must be one of %s; got %q", strings.Join(runTriggers, ", "), f.Trigger))
		return
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			fieldProblem(w, r, probInvalidRequest, p.name, fmt.Sprintf("%s must be an RFC 3339 time such as 2025-01-31T02:00:00Z; got %q", p.name, v))
			return
		}
		*p.dst = &t
	}
	if f.Since != nil && f.Until != nil && f.Since.After(*f.Until) {
		fieldProblem(w, r, probInvalidRequest, "since", fmt.Sprintf("since (%s) is later than until (%s); the range would be empty",
			f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano)))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > limitMax {
			fieldProblem(w, r, probInvalidRequest, "limit", fmt.Sprintf("limit must be an integer from 1 to %d; got %q", limitMax, v))
			return
		}
		f.Limit = n
	}
	fp := filterFingerprint(f)
	if v := q.Get("cursor"); v != "" {
		id, ok := decodeCursor(v, fp)
		if !ok {
			fieldProblem(w, r, probInvalidCursor, "cursor", "cursor must be a next_cursor returned by this same query (same job and filters)")
			return
		}
		f.BeforeID = id
	}

	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	page := f
	page.Limit++ // one more tells whether there is a next page
	runs, err := s.cfg.DB.ListRuns(ctx, page)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	var next *string
	if len(runs) > f.Limit {
		runs = runs[:f.Limit]
		c := encodeCursor(runs[len(runs)-1].ID, fp)
		next = &c
	}
	views := make([]*runView, len(runs))
	for i, run := range runs {
		views[i] = newRunView(run)
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": views, "next_cursor": next})
}

// filterFingerprint ties a cursor to its query, so a cursor reused with other filters is
// refused instead of silently skipping rows.
func filterFingerprint(f store.RunFilter) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", f.Job, f.Status, f.Trigger)
	for _, t := range []*time.Time{f.Since, f.Until} {
		if t != nil {
			fmt.Fprint(h, t.UnixNano())
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// A cursor is base64url("<last id>.<filter fingerprint>"); clients treat it as opaque.
func encodeCursor(id int64, fp string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10) + "." + fp))
}

func decodeCursor(c, fp string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	idText, gotFP, ok := strings.Cut(string(b), ".")
	if !ok || gotFP != fp {
		return 0, false
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}

// runID parses {id}, or answers 400 and returns 0.
func runID(w http.ResponseWriter, r *http.Request) int64 {
	v := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		fieldProblem(w, r, probInvalidRequest, "id", fmt.Sprintf("a run id is a positive integer; got %q", v))
		return 0
	}
	return id
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id := runID(w, r)
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	run, err := s.cfg.DB.Run(ctx, id)
	switch {
	case errors.Is(err, store.ErrRunNotFound):
		writeProblem(w, r, http.StatusNotFound, probRunNotFound, fmt.Sprintf("no run with id %d", id))
	case err != nil:
		s.databaseProblem(w, r, err)
	default:
		writeJSON(w, http.StatusOK, newRunView(run))
	}
}

// cancelRun cancels a queued run at once (200), or asks the leader to cancel a running one
// (202: the engine cancels the run's context and records the outcome).
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := runID(w, r)
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	run, outcome, err := s.cfg.DB.CancelRun(ctx, id)
	switch {
	case errors.Is(err, store.ErrRunNotFound):
		writeProblem(w, r, http.StatusNotFound, probRunNotFound, fmt.Sprintf("no run with id %d", id))
	case err != nil:
		s.databaseProblem(w, r, err)
	case outcome == store.CancelTooLate:
		writeProblem(w, r, http.StatusConflict, probRunFinished,
			fmt.Sprintf("run %d already finished with status %s; there is nothing to cancel", id, run.Status))
	default:
		s.cfg.Log.InfoContext(ctx, "run cancel", "run_id", run.ID, "job", run.Job, "status", run.Status,
			"cancel_requested", run.CancelRequested, "request_id", requestID(ctx))
		status := http.StatusOK
		if outcome == store.CancelRequested {
			status = http.StatusAccepted
		}
		writeJSON(w, status, newRunView(run))
	}
}
