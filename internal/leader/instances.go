package leader

import (
	"context"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// The instance heartbeats behind GET /v1/instances: every replica refreshes its own row,
// and measures its clock against the database's on the way.

// instanceHeartbeatLoop keeps this replica's scheduler_instances row fresh; the leader also
// deletes the rows of replicas gone for ten heartbeats.
func (e *Elector) instanceHeartbeatLoop(ctx context.Context) {
	ticker := time.NewTicker(e.conf.InstanceHeartbeat)
	defer ticker.Stop()
	for {
		isLeader, _ := e.IsLeader()
		// Not cancelled by ctx: a heartbeat cut off by the client can still commit on the
		// server after the DeleteInstance below, bringing a stopped replica's row back. Let
		// it finish (it is bounded) and delete after it.
		hbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.conf.InstanceHeartbeat)
		sent := time.Now()
		dbClock, err := e.conf.DB.HeartbeatInstance(hbCtx, e.instance(isLeader))
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Warn("instance heartbeat failed", "error", err)
		case err == nil:
			// The server read its clock about half the round trip after the request left.
			e.conf.Metrics.SetClockSkew(dbClock.Sub(sent.Add(time.Since(sent) / 2)))
		}
		if isLeader {
			n, err := e.conf.DB.DeleteStaleInstances(hbCtx, staleInstanceFactor*e.conf.InstanceHeartbeat)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("deleting stale instances failed", "error", err)
			} else if n > 0 {
				e.log.Info("deleted stale instances", "count", n)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			// A clean exit removes the row at once rather than leaving it to go stale.
			ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			defer cancel()
			if err := e.conf.DB.DeleteInstance(ctx, e.conf.InstanceID); err != nil {
				e.log.Warn("removing this instance's row failed; the leader will delete it once stale", "error", err)
			}
			return
		case <-ticker.C:
		case <-e.leadershipChanged:
		}
	}
}

// instance is this replica's scheduler_instances row.
func (e *Elector) instance(isLeader bool) store.Instance {
	return store.Instance{
		InstanceID: e.conf.InstanceID, Host: e.conf.Host, Version: e.conf.Version,
		HTTPAddr: e.conf.HTTPAddr, StartedAt: e.started, IsLeader: isLeader,
	}
}
