package api

import (
	"context"
	"net/http"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/store"
)

// stepDown asks the leader, whichever replica it is, to resign at once as on SIGTERM: its
// running jobs are cancelled, a waiting follower takes over, and it stays up as a follower.
// This is the lever to drain a node; there is no lock to release by hand (docs/operations.md).
func (s *Server) stepDown(ctx context.Context, req *reasonRequest) (*client.StepDown, error) {
	var l store.LeaderRow
	var ok bool
	// The request is a row of scheduler_control, committed with its audit row; the NOTIFY
	// that wakes the leader is sent at the same commit. The leader obeys the row only.
	action := s.action(req.r, store.ActionStepDown, "", req.reason)
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		var err error
		req := store.ControlRequest{TokenKind: action.TokenKind, Reason: action.Reason, RequestID: action.RequestID}
		if l, ok, err = ex.RequestStepDown(ctx, req); err != nil || !ok {
			return err
		}
		return ex.RecordAction(ctx, action)
	})
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, httpx.Problem(http.StatusConflict, probNoLeader,
			"no replica holds the leader lock now, so none can step down; GET /v1/instances shows which replicas are up")
	}
	s.cfg.Log.InfoContext(ctx, "leader step-down requested", "leader", l.InstanceID, "epoch", l.Epoch,
		"request_id", httpx.RequestID(ctx))
	return &client.StepDown{InstanceID: l.InstanceID, Epoch: l.Epoch, Since: l.Since.UTC()}, nil
}
