package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/definition"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Runtime jobs: the leader loads every definition when its term starts, then follows
// changes as they commit (a NOTIFY naming the job, with a poll of the versions as the
// fallback for a lost notification; definitions_watch.go), swapping the job's timer without a restart. A slot
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
	j, errs := definition.Check(def, definition.Env{})
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

// timers is one term's gocron scheduler and the timers it holds. Every job on the same
// schedule shares one timer (a timerGroup): at 10 000 jobs on "* * * * *" one firing hands
// all their slots to the claimer at once, where a timer each made gocron dispatch 10 000
// firings one by one, and the last came a fifth of a second after the first. Touched by
// startTimers, then by watchDefinitions only; a group's members also by its firings.
type timers struct {
	e      *Engine
	s      gocron.Scheduler
	ctx    context.Context
	term   leader.Term
	claims *claimer
	log    *slog.Logger
	groups map[string]*timerGroup // by schedule expression
	once   map[string]uuid.UUID   // one-time jobs' own timers, by job name
}

// timerGroup is the timer of every job on one schedule.
type timerGroup struct {
	id      uuid.UUID
	mu      sync.Mutex
	members map[string]*entry
}

// add starts en's timer: it joins its schedule's group. A one-time schedule's timer is a
// gocron one-time job of its own, or none once its slot has passed (catch-up decides about
// that slot).
func (t *timers) add(en *entry) error {
	sched := en.conf.Schedule
	if sched.Once() {
		at := sched.Next(time.Time{})
		if !at.After(time.Now()) {
			return nil
		}
		task := gocron.NewTask(func() { t.fire([]*entry{en}, at) })
		j, err := t.s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(at)), task, gocron.WithName(en.conf.Name))
		if err != nil {
			return fmt.Errorf("timer for job %s: %w", en.conf.Name, err)
		}
		t.once[en.conf.Name] = j.ID()
		return nil
	}
	g := t.groups[sched.String()]
	if g == nil {
		g = &timerGroup{members: map[string]*entry{}}
		task := gocron.NewTask(func() {
			g.mu.Lock()
			members := make([]*entry, 0, len(g.members))
			for _, m := range g.members {
				members = append(members, m)
			}
			g.mu.Unlock()
			t.fire(members, sched.Nearest(time.Now()))
		})
		j, err := t.s.NewJob(gocron.CronJob(sched.String(), true), task,
			gocron.WithCronImplementation(sched), gocron.WithName(sched.String()))
		if err != nil {
			return fmt.Errorf("timer for job %s: %w", en.conf.Name, err)
		}
		g.id = j.ID()
		t.groups[sched.String()] = g
	}
	g.mu.Lock()
	g.members[en.conf.Name] = en
	g.mu.Unlock()
	return nil
}

// fire ticks slot for each job, each in its own goroutine, as a tick retries while the
// database does not answer.
func (t *timers) fire(jobs []*entry, slot time.Time) {
	for _, en := range jobs {
		t.e.runs.Add(1)
		go func() {
			defer t.e.runs.Done()
			t.e.tick(t.ctx, t.term, t.claims, t.log, en, slot, store.TriggerSchedule)
		}()
	}
}

// remove stops the named job's timer, if it has one: it leaves its group, whose timer stops
// with its last member.
func (t *timers) remove(name string) {
	if id, ok := t.once[name]; ok {
		delete(t.once, name)
		t.removeJob(name, id)
		return
	}
	for spec, g := range t.groups {
		g.mu.Lock()
		_, member := g.members[name]
		delete(g.members, name)
		empty := len(g.members) == 0
		g.mu.Unlock()
		if member && empty {
			delete(t.groups, spec)
			t.removeJob(name, g.id)
		}
		if member {
			return
		}
	}
}

func (t *timers) removeJob(name string, id uuid.UUID) {
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
	var src store.CallKeySource
	if run.Trigger == store.TriggerRecovery {
		// The run it recovers, and the slot that one did, are in the database.
		if src, err = e.conf.DB.CallKeySource(ctx, run.ID); err != nil {
			return "", slot, err
		}
	} else {
		if src.Deployment, err = e.deploymentID(ctx); err != nil {
			return "", slot, err
		}
		src.RootRunID, src.Job, src.ScheduledAt = run.ID, run.Job, run.ScheduledAt
	}
	name := fmt.Sprintf("run/%d", src.RootRunID)
	if src.ScheduledAt != nil {
		slot = src.ScheduledAt.UTC()
		name = fmt.Sprintf("slot/%s/%d", src.Job, slot.Unix())
	}
	return uuid.NewSHA1(src.Deployment, []byte(name)).String(), slot, nil
}

// deploymentID is the database's deployment id, read once: it never changes.
func (e *Engine) deploymentID(ctx context.Context) (uuid.UUID, error) {
	e.deploymentMu.Lock()
	defer e.deploymentMu.Unlock()
	if e.deployment == uuid.Nil {
		id, err := e.conf.DB.Deployment(ctx)
		if err != nil {
			return id, err
		}
		e.deployment = id
	}
	return e.deployment, nil
}

// stats, as job_runs stores them.
func statsJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
