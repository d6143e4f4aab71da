package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

// runDaysIntervalDefault spaces the leader's checks of the day partitions ahead.
const runDaysIntervalDefault = time.Hour

// runDays is the leader service that adds the partitions of job_runs for the days ahead
// (store.DaysAhead): a day without one would refuse its runs. It passes at the term's start
// and then every interval.
type runDays struct {
	db       *store.DB
	log      *slog.Logger
	interval time.Duration
	passed   *testsignal.Signal[int]
}

func (u *runDays) run(ctx context.Context) {
	ticker := time.NewTicker(u.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		u.pass(ctx)
	}
}

// pass adds the missing days once; it ends with the test signal, carrying how many it
// added, unless it failed.
func (u *runDays) pass(ctx context.Context) {
	days, err := u.db.AddRunDays(ctx)
	if err != nil {
		if ctx.Err() == nil {
			u.log.Error("adding the day partitions of job_runs failed; runs of a day without one cannot be recorded",
				"error", err, "days_ahead", store.DaysAhead)
		}
		return
	}
	for _, d := range days {
		u.log.Info("day partition of job_runs added", "day", d.Format(time.DateOnly))
	}
	u.passed.Send(len(days))
}
