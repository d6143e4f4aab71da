package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/definition"
	"github.com/schedulerhq/scheduler/internal/leader"
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

// catchUpWindows are every job's catch-up windows, the runtime jobs' included, for
// data-retention, which keeps the job_runs rows catch-up decides from.
func (e *Engine) catchUpWindows() map[string]time.Duration {
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

// runtimeEntry builds the entry of one stored definition. A definition that no longer
// passes the check (a row written by hand, or by a newer version's rules) is refused with
// the reason, and its job does not run.
func (e *Engine) runtimeEntry(sd store.StoredDefinition) (*entry, error) {
	def, err := definition.Decode(sd.Definition)
	if err != nil {
		return nil, err
	}
	// Secrets, addresses and the SQL role are checked when the job runs: a leader missing
	// one fails the run with its reason rather than dropping the job.
	j, errs := definition.Check(def, definition.Env{SQLEnabled: true})
	if errs != nil {
		return nil, errs
	}
	return &entry{job: e.conf.Runtime.build(j), conf: j.Config(), def: j, version: sd.Version, since: sd.UpdatedAt}, nil
}

// loadDefinitions replaces the runtime entries with the stored definitions.
func (e *Engine) loadDefinitions(ctx context.Context, log *slog.Logger) {
	if e.conf.Runtime == nil {
		return
	}
	stored, err := e.conf.DB.Definitions(ctx)
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

// watchDefinitions follows definition changes for the whole term.
func (e *Engine) watchDefinitions(ctx context.Context, term leader.Term, log *slog.Logger, t *timers) {
	changed := make(chan string, 256)
	go func() {
		retry := backoff.New(min(100*time.Millisecond, e.conf.PollInterval), e.conf.PollInterval)
		for ctx.Err() == nil {
			l, err := e.conf.DB.Listen(ctx, store.DefinitionsChannel)
			if err == nil {
				retry.Reset()
				changed <- "" // a full comparison: changes made before LISTEN took effect
				for {
					var name string
					if name, err = l.WaitPayload(ctx); err != nil {
						break
					}
					select {
					case changed <- name:
					default: // the poll's comparison catches up
					}
				}
				l.Close()
			}
			if ctx.Err() == nil {
				d := retry.Next()
				log.Warn("listening for definition changes failed; polling until reconnected", "error", err, "retry_in", d)
				backoff.Sleep(ctx, d)
			}
		}
	}()
	ticker := time.NewTicker(e.conf.PollInterval)
	defer ticker.Stop()
	for {
		var name string
		select {
		case <-ctx.Done():
			return
		case name = <-changed:
		case <-ticker.C:
		}
		var err error
		if name == "" {
			err = e.syncDefinitions(ctx, log, t)
		} else {
			err = e.reloadDefinition(ctx, log, t, name)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("reloading runtime jobs failed; retrying at the next poll", "error", err)
		}
	}
}

// syncDefinitions reloads every definition whose version differs from the one running.
func (e *Engine) syncDefinitions(ctx context.Context, log *slog.Logger, t *timers) error {
	versions, err := e.conf.DB.DefinitionVersions(ctx)
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
// a new or changed one, none for a deleted or disabled one.
func (e *Engine) reloadDefinition(ctx context.Context, log *slog.Logger, t *timers, name string) error {
	sd, err := e.conf.DB.Definition(ctx, name)
	var en *entry
	switch {
	case errors.Is(err, store.ErrDefinitionNotFound):
	case err != nil:
		return err
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

// timers is one term's gocron scheduler and the timers it holds for each job.
type timers struct {
	e      *Engine
	s      gocron.Scheduler
	ctx    context.Context
	term   leader.Term
	claims *claimer
	log    *slog.Logger
	ids    map[string]uuid.UUID // by job name; touched by startTimers, then by watchDefinitions only
}

// add starts en's timer. A one-time schedule's timer is a gocron one-time job, or none once
// its slot has passed (catch-up decides about that slot).
func (t *timers) add(en *entry) error {
	sched := en.conf.Schedule
	task := gocron.NewTask(func() {
		t.e.tick(t.ctx, t.term, t.claims, t.log, en, sched.Nearest(time.Now()), store.TriggerSchedule)
	})
	var def gocron.JobDefinition
	if sched.Once() {
		at := sched.Next(time.Time{})
		if !at.After(time.Now()) {
			return nil
		}
		def = gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(at))
	} else {
		def = gocron.CronJob(sched.String(), true)
	}
	j, err := t.s.NewJob(def, task, gocron.WithCronImplementation(sched), gocron.WithName(en.conf.Name))
	if err != nil {
		return fmt.Errorf("timer for job %s: %w", en.conf.Name, err)
	}
	t.ids[en.conf.Name] = j.ID()
	return nil
}

// remove stops the named job's timer, if it has one.
func (t *timers) remove(name string) {
	id, ok := t.ids[name]
	if !ok {
		return
	}
	delete(t.ids, name)
	if err := t.s.RemoveJob(id); err != nil && !strings.Contains(err.Error(), "not found") {
		t.log.Warn("stopping a job's timer failed", "job", name, "error", err)
	}
}

// tickDue ticks en's slots after from that are already due, each in its own goroutine.
func (t *timers) tickDue(en *entry, from time.Time) {
	now := time.Now()
	for slot := en.conf.Schedule.Next(from); !slot.IsZero() && !slot.After(now); slot = en.conf.Schedule.Next(slot) {
		t.e.runs.Add(1)
		go func() {
			defer t.e.runs.Done()
			t.e.tick(t.ctx, t.term, t.claims, t.log, en, slot, store.TriggerSchedule)
		}()
	}
}

func (t *timers) stop(log *slog.Logger) {
	if err := t.s.Shutdown(); err != nil {
		log.Warn("stopping the timers", "error", err)
	}
}

// awaitIdle waits until a run of job ends, the poll interval passes (a queued run of the
// job may be started and finished by a path that does not signal), or ctx ends.
func (e *Engine) awaitIdle(ctx context.Context, job string) {
	e.mu.Lock()
	ch := e.idle[job]
	if ch == nil {
		ch = make(chan struct{})
		e.idle[job] = ch
	}
	e.mu.Unlock()
	timer := time.NewTimer(e.conf.PollInterval)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// callKey is the Idempotency-Key of a runtime job's calls in run: a UUID derived from the
// deployment and the slot (job and scheduled_at), or from the manual run, so every attempt
// and every recovery of the same slot sends the same key, on whichever leader. It also
// returns the slot the run does (a recovery run does its abandoned run's slot; zero for a
// manual run).
func (e *Engine) callKey(ctx context.Context, run *store.Run) (key string, slot time.Time, err error) {
	src, err := e.conf.DB.CallKeySource(ctx, run.ID)
	if err != nil {
		return "", slot, err
	}
	name := fmt.Sprintf("run/%d", src.RootRunID)
	if src.ScheduledAt != nil {
		slot = src.ScheduledAt.UTC()
		name = fmt.Sprintf("slot/%s/%d", src.Job, slot.Unix())
	}
	return uuid.NewSHA1(src.Deployment, []byte(name)).String(), slot, nil
}

// stats, as job_runs stores them.
func statsJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
