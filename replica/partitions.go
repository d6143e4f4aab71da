package replica

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/engine"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// partitionEngine is the engine of one partition 1..N-1 and the terms this replica gets of it
// from the partitions' elections. Every replica builds one per partition, idle until it is
// elected for it, so that a partition moving here needs nothing built.
type partitionEngine struct {
	engine *engine.Engine
	terms  *leader.Subscription
}

// buildPartitionEngines builds the engines of partitions 1..count-1 from the coordinator's
// configuration: no built-in job (they are partition 0's), no notification delivery (a
// cluster-wide duty), the same runtime, tracing and run-body gate.
func buildPartitionEngines(coordinator engine.Config, partitions *leader.Partitions, count int) ([]partitionEngine, error) {
	var out []partitionEngine
	for p := 1; p < count; p++ {
		conf := coordinator
		conf.Partition, conf.Jobs, conf.Notifications = p, nil, nil
		conf.Registry = jobcontract.NewRegistry()
		e, err := engine.New(conf)
		if err != nil {
			return nil, fmt.Errorf("the run engine of partition %d: %w", p, err)
		}
		out = append(out, partitionEngine{engine: e, terms: partitions.Subscribe(p)})
	}
	return out, nil
}

// catchUpWindowsTimeout bounds data-retention's read of the runtime jobs' catch-up windows.
const catchUpWindowsTimeout = 10 * time.Second

// catchUpWindows are every job's catch-up windows for data-retention: the coordinator's
// built-in and partition-0 jobs, and every runtime job of the cluster read from its stored
// definition, since the other partitions' engines may run on other replicas. A definition
// that cannot be read keeps the built-in answer and is logged: retention then keeps no less
// than before partitions.
func catchUpWindows(db *store.DB, coordinator *engine.Engine, log *slog.Logger) map[string]time.Duration {
	windows := coordinator.CatchUpWindows()
	ctx, cancel := context.WithTimeout(context.Background(), catchUpWindowsTimeout)
	defer cancel()
	defs, err := db.Definitions(ctx)
	if err != nil {
		log.Warn("reading the runtime jobs' catch-up windows failed; data-retention keeps the days of the coordinator's jobs' windows only", "error", err)
		return windows
	}
	for _, sd := range defs {
		if c, _, err := runtimejob.Load(sd.Definition); err == nil {
			windows[sd.Name] = max(windows[sd.Name], c.Config().Catchup)
		}
	}
	return windows
}
