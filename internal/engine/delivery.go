package engine

import (
	"context"
	"log/slog"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/notify/deliver"
)

// delivery is the leader service that sends the jobs' notifications for the term
// (internal/notify/deliver groups, sends and retries them; notify.go records them).
type delivery struct {
	s     *deliver.Service
	term  leader.Term
	log   *slog.Logger
	rules deliver.Rules
}

func (d *delivery) run(ctx context.Context) { d.s.Lead(ctx, d.term.Fence(), d.log, d.rules) }
