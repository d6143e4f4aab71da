package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Completion by callback (issue 33). A callback job's run sends its target a URL and a token
// of its own; a success answer only accepts the run, which stays running, owned by no
// goroutine, until the target posts its outcome to any replica (api/callbacks.go), its
// heartbeats stop, or the job's timeout passes. The state lives in job_runs alone
// (store/callbacks.go), so a new leader neither abandons nor calls again an accepted run, and
// its watcher (callbackwatch.go) keeps the deadlines the old leader would have kept.

// statusAccepted labels, in metrics only, a callback run whose target accepted it: this
// replica's part ends there, and the run's outcome is counted where it is recorded.
const statusAccepted = "accepted"

// callbackPath is the completion route of run id, after the public URL.
func callbackPath(id int64) string { return fmt.Sprintf("/v1/runs/%d/complete", id) }

// armCallback draws the run's token and stores its hash before the call is made.
func (x *execution) armCallback(ctx context.Context) (*jobcontract.Callback, error) {
	e, run := x.e, x.run
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("drawing the run's callback token: %w", err)
	}
	token := "schcb_" + base64.RawURLEncoding.EncodeToString(b)
	err := e.conf.DB.Fenced(ctx, x.term.Fence(), func(tx *store.Tx) error {
		return tx.ArmCallback(ctx, run.ID, store.CallbackTokenHash(token))
	})
	if err != nil {
		return nil, fmt.Errorf("storing the run's callback token: %w", err)
	}
	return &jobcontract.Callback{URL: strings.TrimSuffix(e.conf.PublicURL, "/") + callbackPath(run.ID), Token: token}, nil
}

// accept records that the target accepted a callback run, with its successful attempt and
// stats, retrying while this replica leads, as finish does; the run's goroutine then ends.
func (x *execution) accept(stats jobcontract.Stats) {
	e, en, run, ctx, log := x.e, x.en, x.run, x.ctx, x.log
	status := statusAccepted
	defer func() {
		e.conf.Metrics.RunFinished(run.Job, status, run.Trigger, time.Since(x.started))
		e.testSignals.finished.Send(run.ID)
	}()
	deadline := run.StartedAt.Add(en.conf.Timeout)
	var accepted bool
	err := retryWhileLeading(ctx, func() error {
		return e.conf.DB.Fenced(ctx, x.term.Fence(), func(tx *store.Tx) error {
			var err error
			accepted, err = tx.AcceptCallback(ctx, store.Accept{RunID: run.ID, Stats: statsJSON(stats), Version: x.version,
				Attempts: x.pending, HeartbeatTimeout: en.def.HeartbeatTimeout, Deadline: deadline})
			return err
		})
	}, func(err error, d time.Duration) error {
		log.Warn("recording the callback run accepted failed; retrying while this replica leads", "error", err, "retry_in", d)
		return nil
	})
	switch {
	case err != nil:
		// Not accepted in the database: the next leader abandons the run and its recovery
		// calls again under the same Idempotency-Key, with a token of its own.
		status = statusInterrupted
		log.Warn("recording the callback run accepted failed as the term ended; the next leader recovers it", "error", err)
	case !accepted:
		log.Info("the target completed the run before its acceptance was recorded")
	default:
		log.Info("call accepted; the run waits for the target's completion",
			"heartbeat_timeout", en.def.HeartbeatTimeout, "deadline", deadline)
	}
}
