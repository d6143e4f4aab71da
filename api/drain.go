package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/store"
)

// drainRequest is POST /v1/instances/{id}/drain's: the replica's id and the optional reason.
type drainRequest struct {
	reasonRequest
	id string
}

// Extract reads the replica's id and keeps the request.
func (q *drainRequest) Extract(r *http.Request) error {
	q.id = chi.URLParam(r, "id")
	return q.reasonRequest.Extract(r)
}

// drain asks a replica to release its partitions, step down as coordinator if it is, and
// take none until it restarts: before its node is taken down, so that its partitions move
// by release (their runs drained) rather than after a lease. The request is a row of
// scheduler_control, committed with its audit row; the replica reads it at its next
// heartbeat. 404 when no replica of that id has a row in scheduler_instances.
func (s *Server) drain(ctx context.Context, req *drainRequest) (*client.Drain, error) {
	var ok bool
	action := s.action(req.r, store.ActionDrain, "", req.reason)
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		var err error
		creq := store.ControlRequest{TokenKind: action.TokenKind, Reason: action.Reason, RequestID: action.RequestID}
		if ok, err = ex.RequestDrain(ctx, req.id, creq); err != nil || !ok {
			return err
		}
		return ex.RecordAction(ctx, action)
	})
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, httpx.Problem(http.StatusNotFound, probInstanceNotFound,
			fmt.Sprintf("no replica %q is known; GET /v1/instances lists the replicas by instance_id", req.id))
	}
	s.cfg.Log.InfoContext(ctx, "replica drain requested", "drained", req.id, "request_id", httpx.RequestID(ctx))
	return &client.Drain{InstanceID: req.id}, nil
}
