package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Runtime jobs: the leader loads every definition when its term starts, then follows
// changes as they commit (a NOTIFY naming the job, with a poll of the versions as the
// fallback for a lost notification), swapping the job's timer without a restart. A slot
// claimed under the old definition stays as it was; the slots after the change follow the
// new one, and the claim's unique (job, scheduled_at) keeps any slot from running twice.

// entry returns the named job's entry: a built-in job's, or a runtime job's current one.
func (e *Engine) entry(name string) *entry {
	if en := e.jobs[name]; en != nil {
		return en
	}
	e.runtimeMu.RLock()
	defer e.runtimeMu.RUnlock()
	return e.runtime[name]
}

// enabledEntries are the jobs whose slots fire: the enabled built-in jobs in configuration
// order, then the enabled runtime jobs by name.
func (e *Engine) enabledEntries() []*entry {
	list := slices.Clone(e.order)
	e.runtimeMu.RLock()
	defer e.runtimeMu.RUnlock()
	names := make([]string, 0, len(e.runtime))
	for name, en := range e.runtime {
		if en.conf.Enabled {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		list = append(list, e.runtime[name])
	}
	return list
}

// CatchUpWindows are every job's catch-up windows, the runtime jobs' included, for
// data-retention (wired by the replica), which keeps the job_runs rows catch-up decides from.
func (e *Engine) CatchUpWindows() map[string]time.Duration {
	e.runtimeMu.RLock()
	defer e.runtimeMu.RUnlock()
	windows := make(map[string]time.Duration, len(e.catchUps)+len(e.runtime))
	for name, en := range e.runtime {
		windows[name] = en.conf.Catchup
	}
	for name, d := range e.catchUps {
		windows[name] = d
	}
	return windows
}

// runtimeEntry builds the entry of one stored definition: definition.Load decodes and checks
// it, and the Runtime builds its body. A definition that no longer passes the check is
// refused with the reason, and its job does not run.
func (e *Engine) runtimeEntry(sd store.StoredDefinition) (*entry, error) {
	c, _, err := runtimejob.Load(sd.Definition)
	if err != nil {
		return nil, err
	}
	return &entry{job: e.conf.Runtime.Build(c), conf: c.Config(), def: c, version: sd.Version, since: sd.UpdatedAt}, nil
}

// loadDefinitions replaces the runtime entries with the stored definitions of the engine's
// partition.
func (e *Engine) loadDefinitions(ctx context.Context, log *slog.Logger) {
	if e.conf.Runtime == nil {
		return
	}
	stored, err := e.conf.DB.PartitionDefinitions(ctx, e.conf.Partition)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("loading the runtime jobs failed; they run once a reload succeeds", "error", err)
		}
		return
	}
	entries := make(map[string]*entry, len(stored))
	for _, sd := range stored {
		en, err := e.runtimeEntry(sd)
		if err != nil {
			log.Error("a stored runtime job is invalid and does not run; replace it through the API", "job", sd.Name, "version", sd.Version, "error", err)
			continue
		}
		entries[sd.Name] = en
	}
	e.runtimeMu.Lock()
	e.runtime = entries
	e.runtimeMu.Unlock()
	for _, en := range entries {
		e.setPeriod(en)
	}
	log.Info("runtime jobs loaded", "count", len(entries))
}

// dropDefinitions forgets the runtime entries as a term ends: the next term loads them
// again. A partition moves between replicas, and a replica that kept the definitions of
// every partition it ever led held, after a cluster's start (the first replica leads every
// partition until the others join), those of the whole cluster: 2.3 times its share at
// 100 000 jobs. The term's runs keep their own entry (execution.en) to their end. The jobs'
// pause gauges go with them: the next holder keeps them current.
func (e *Engine) dropDefinitions() {
	e.runtimeMu.Lock()
	left := make([]string, 0, len(e.runtime))
	for name := range e.runtime {
		left = append(left, name)
	}
	e.runtime = map[string]*entry{}
	e.runtimeMu.Unlock()
	e.conf.Metrics.JobsLeft(left)
}

// syncDefinitions reloads every definition whose version differs from the one running.
func (e *Engine) syncDefinitions(ctx context.Context, log *slog.Logger, t *timers) error {
	versions, err := e.conf.DB.DefinitionVersions(ctx, e.conf.Partition)
	if err != nil {
		return err
	}
	var stale []string
	e.runtimeMu.RLock()
	for name, v := range versions {
		if en := e.runtime[name]; en == nil || en.version != v {
			stale = append(stale, name)
		}
	}
	for name := range e.runtime {
		if _, ok := versions[name]; !ok {
			stale = append(stale, name)
		}
	}
	e.runtimeMu.RUnlock()
	var errs []error
	for _, name := range stale {
		errs = append(errs, e.reloadDefinition(ctx, log, t, name))
	}
	return errors.Join(errs...)
}

// reloadDefinition makes the named runtime job follow its stored definition: a new timer for
// a new or changed one, none for a deleted or disabled one. A job of another partition is
// not this engine's: the notifications name every partition's changes, and only the job's
// own partition's engine runs it.
func (e *Engine) reloadDefinition(ctx context.Context, log *slog.Logger, t *timers, name string) error {
	e.reloading.Lock()
	defer e.reloading.Unlock()
	sd, err := e.conf.DB.Definition(ctx, name)
	var en *entry
	switch {
	case errors.Is(err, store.ErrDefinitionNotFound):
	case err != nil:
		return err
	case sd.Partition != e.conf.Partition:
		if e.entry(name) == nil {
			return nil // another partition's job, never run here
		}
	default:
		if en, err = e.runtimeEntry(sd); err != nil {
			log.Error("a stored runtime job is invalid and does not run; replace it through the API", "job", name, "version", sd.Version, "error", err)
		}
	}
	e.runtimeMu.Lock()
	old := e.runtime[name]
	if old != nil && en != nil && old.version == en.version {
		e.runtimeMu.Unlock()
		return nil
	}
	if en == nil {
		delete(e.runtime, name)
	} else {
		e.runtime[name] = en
	}
	e.runtimeMu.Unlock()

	t.remove(name)
	if en != nil {
		e.setPeriod(en)
	} else {
		e.conf.Metrics.SetJobPeriod(name, 0)
	}
	switch {
	case en == nil:
		log.Info("runtime job removed", "job", name)
		return nil
	case !en.conf.Enabled:
		log.Info("runtime job disabled", "job", name, "version", en.version)
		return nil
	}
	if err := t.add(en); err != nil {
		return err
	}
	// The slots of the new definition that came due between its commit and this reload.
	t.tickDue(en, en.since)
	log.Info("runtime job loaded", "job", name, "version", en.version, "schedule", en.conf.Schedule.String())
	e.testSignals.definitionLoaded.Send(fmt.Sprintf("%s@%d", name, en.version))
	return nil
}

// setPeriod exports the runtime job's expected period, which the stuck-job alert compares its
// last success with (0: disabled or one-time, never stuck).
func (e *Engine) setPeriod(en *entry) {
	var period time.Duration
	if en.conf.Enabled {
		period = en.conf.Schedule.Period(time.Now())
	}
	e.conf.Metrics.SetJobPeriod(en.conf.Name, period)
}

// versionRef is the definition version a run of the entry records (nil: built-in).
func (en *entry) versionRef() *int64 {
	if en.def == nil {
		return nil
	}
	v := en.version
	return &v
}
