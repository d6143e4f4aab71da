package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/store"
)

// getLeader shows the last elected leader from the leader row (the row outlives a crashed
// leader until the next election; GET /v1/locks shows whether the lock is held right now).
func (s *Server) getLeader(ctx context.Context, _ *struct{}) (*client.Leader, error) {
	l, err := s.cfg.DB.Leader(ctx)
	if err != nil {
		return nil, err
	}
	if l.InstanceID == "" {
		return nil, httpx.WithHeader(httpx.Problem(http.StatusServiceUnavailable, probNoLeader,
			"no replica has been elected leader yet; start a replica with `scheduler serve`, or retry in a moment"), "Retry-After", "1")
	}
	return &client.Leader{InstanceID: l.InstanceID, Epoch: l.Epoch, TermID: l.TermID.String(), Since: l.Since.UTC(),
		IsSelf: l.InstanceID == s.cfg.InstanceID}, nil
}

func (s *Server) listInstances(ctx context.Context, _ *struct{}) (*client.Instances, error) {
	list, err := s.cfg.DB.Instances(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]client.Instance, len(list))
	for i, in := range list {
		views[i] = client.Instance{
			InstanceID: in.InstanceID, Host: in.Host, Version: in.Version, HTTPAddr: in.HTTPAddr,
			StartedAt: in.StartedAt.UTC(), LastSeenAt: in.LastSeenAt.UTC(), IsLeader: in.IsLeader,
			IsSelf: in.InstanceID == s.cfg.InstanceID,
		}
	}
	return &client.Instances{Instances: views}, nil
}

// listLocks shows the locks of this database: every advisory lock, and the scheduler's own
// row locks (scheduler_locks); who holds or awaits them, since when, and what they are for
// when they are one of store.KnownLocks. A row lock has no key (null).
func (s *Server) listLocks(ctx context.Context, _ *struct{}) (*client.Locks, error) {
	list, err := s.cfg.DB.Locks(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]client.Lock, len(list))
	for i, l := range list {
		v := client.Lock{Kind: l.Kind, PID: l.PID, ApplicationName: l.ApplicationName, Granted: l.Granted, Mode: l.Mode,
			Since: utcPtr(l.Since), AgeMS: l.AgeMS}
		if l.Kind == store.LockAdvisory {
			// A string: the key is a full 64-bit integer, beyond JSON numbers' exact range.
			key := strconv.FormatInt(l.Key, 10)
			v.Key, v.ClassID, v.ObjID, v.ObjSubID = &key, &l.ClassID, &l.ObjID, &l.ObjSubID
		}
		if id, ok := strings.CutPrefix(l.ApplicationName, store.ApplicationNamePrefix); ok {
			v.InstanceID = &id
		}
		if l.Known != nil {
			v.Name, v.Meaning = &l.Known.Name, &l.Known.Meaning
		}
		views[i] = v
	}
	return &client.Locks{Locks: views}, nil
}
