package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/store"
)

// getLeader shows the last elected leader from the leader row (the row outlives a crashed
// leader until the next election; GET /v1/locks shows whether the lock is held right now).
func (s *Server) getLeader(ctx context.Context, _ *struct{}) (*Leader, error) {
	l, err := s.cfg.DB.Leader(ctx)
	if err != nil {
		return nil, err
	}
	if l.InstanceID == "" {
		return nil, httpx.WithHeader(httpx.Problem(http.StatusServiceUnavailable, probNoLeader,
			"no replica has been elected leader yet; start a replica with `scheduler serve`, or retry in a moment"), "Retry-After", "1")
	}
	return &Leader{InstanceID: l.InstanceID, Epoch: l.Epoch, TermID: l.TermID.String(), Since: l.Since.UTC(),
		IsSelf: l.InstanceID == s.cfg.InstanceID}, nil
}

// instancesView is GET /v1/instances's answer.
type instancesView struct {
	Instances []Instance `json:"instances"`
}

func (s *Server) listInstances(ctx context.Context, _ *struct{}) (*instancesView, error) {
	list, err := s.cfg.DB.Instances(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]Instance, len(list))
	for i, in := range list {
		views[i] = Instance{
			InstanceID: in.InstanceID, Host: in.Host, Version: in.Version, HTTPAddr: in.HTTPAddr,
			StartedAt: in.StartedAt.UTC(), LastSeenAt: in.LastSeenAt.UTC(), IsLeader: in.IsLeader,
			IsSelf: in.InstanceID == s.cfg.InstanceID,
		}
	}
	return &instancesView{Instances: views}, nil
}

type lockView struct {
	Kind            string     `json:"kind"`
	PID             int32      `json:"pid"`
	ApplicationName string     `json:"application_name"`
	InstanceID      *string    `json:"instance_id"`
	Granted         bool       `json:"granted"`
	Mode            string     `json:"mode"`
	Key             *string    `json:"key"`
	ClassID         *uint32    `json:"classid"`
	ObjID           *uint32    `json:"objid"`
	ObjSubID        *int16     `json:"objsubid"`
	Since           *time.Time `json:"since"`
	AgeMS           *int64     `json:"age_ms"`
	Name            *string    `json:"name"`
	Meaning         *string    `json:"meaning"`
}

// listLocks shows the locks of this database: every advisory lock, and the scheduler's own
// row locks (scheduler_locks); who holds or awaits them, since when, and what they are for
// when they are one of store.KnownLocks. A row lock has no key (null).
// locksView is GET /v1/locks's answer.
type locksView struct {
	Locks []lockView `json:"locks"`
}

func (s *Server) listLocks(ctx context.Context, _ *struct{}) (*locksView, error) {
	list, err := s.cfg.DB.Locks(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]lockView, len(list))
	for i, l := range list {
		v := lockView{Kind: l.Kind, PID: l.PID, ApplicationName: l.ApplicationName, Granted: l.Granted, Mode: l.Mode,
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
	return &locksView{Locks: views}, nil
}

// Leader is GET /v1/leader's answer: who leads, under which term, since when. The term is
// the epoch with its term_id: after a failover that lost commits an epoch number can come
// back, the term id cannot.
type Leader struct {
	InstanceID string    `json:"instance_id"`
	Epoch      int64     `json:"epoch"`
	TermID     string    `json:"term_id"`
	Since      time.Time `json:"since"`
	IsSelf     bool      `json:"is_self"`
}

// Instance is one replica as GET /v1/instances lists it.
type Instance struct {
	InstanceID string    `json:"instance_id"`
	Host       string    `json:"host"`
	Version    string    `json:"version"`
	HTTPAddr   string    `json:"http_addr"`
	StartedAt  time.Time `json:"started_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	IsLeader   bool      `json:"is_leader"`
	IsSelf     bool      `json:"is_self"`
}
