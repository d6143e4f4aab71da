package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/store"
)

// An Idempotency-Key on POST /v1/jobs/{name}/runs: the header's check, the request's
// fingerprint, and the answer to a key already used. The protocol itself (claim the key in
// the transaction that queues the run) is store.DB.TriggerManualRun.

// pendingStaleAfter: a key still PENDING this long after its claim outlived any wait, so
// the replica that owned it is gone.
const pendingStaleAfter = maxWait + time.Minute

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
		httpx.WriteProblem(w, r, http.StatusBadRequest, probInvalidKey, detail, client.FieldError{Field: "Idempotency-Key", Detail: detail})
		return "", false
	}
	return k, true
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

// replay answers a request whose Idempotency-Key was already used.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, rec *store.IdempotencyRecord, key, scope, hash string) {
	switch {
	case rec.RequestHash != hash:
		s.cfg.Recorder.IdempotencyConflict()
		httpx.WriteProblem(w, r, http.StatusConflict, probKeyReused,
			"this Idempotency-Key was first used with another request body; use a new key for a new request",
			client.FieldError{Field: "Idempotency-Key", Detail: "already used with another body"})
	case rec.Status != store.IdempotencyCompleted && rec.Age > pendingStaleAfter && rec.PendingRunID > 0:
		// The replica that was waiting died before storing its answer; answer as its wait
		// would have (200 finished, 202 not), and store that.
		s.answerStalePending(w, r, rec.PendingRunID, scope, key)
	case rec.Status != store.IdempotencyCompleted:
		w.Header().Set("Retry-After", "1")
		httpx.WriteProblem(w, r, http.StatusConflict, probKeyInProgress,
			"the first request with this Idempotency-Key is still waiting for its run; retry after it answered",
			client.FieldError{Field: "Idempotency-Key", Detail: "in progress"})
	default:
		// Decoded and re-encoded like the first answer was, so the bytes match it.
		var v client.Run
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
