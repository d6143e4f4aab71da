package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/store"
)

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
	groups map[string]*timerGroup // by schedule key (schedule.Schedule.Key)
	once   map[string]uuid.UUID   // one-time jobs' own timers, by job name
}

// timerGroup is the timer of every job on one schedule.
type timerGroup struct {
	id    uuid.UUID
	sched *schedule.Schedule
	// lead is how long before each slot the timer fires (claimLead).
	lead    time.Duration
	mu      sync.Mutex
	members map[string]*entry
	// last is the latest slot the timer fired for (guarded by mu); the slots up to it when
	// the group was made are the catch-up's and startTimers'.
	last time.Time
}

// maxSlotsAFiring bounds the slots one firing claims after a stall; the later ones are the
// next firings'.
const maxSlotsAFiring = 100

// due returns the slots a firing at now claims, and records the last as fired: every slot
// after the last one fired that has come (by now + lead), oldest first; or, when none has
// (the timer fired a moment before its slot), the nearest slot. A firing carries no slot of
// its own: taking the slot nearest to when it ran, a firing more than half a period late
// (a loaded machine, a long pause of the process) claimed the next slot instead of its
// own, whose slot then had no row at all.
func (g *timerGroup) due(now time.Time) []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	at := now.Add(g.lead)
	var slots []time.Time
	if !g.last.IsZero() {
		for s := g.sched.Next(g.last); !s.IsZero() && !s.After(at) && len(slots) < maxSlotsAFiring; s = g.sched.Next(s) {
			slots = append(slots, s)
		}
	}
	if len(slots) == 0 {
		if s := g.sched.Nearest(at); !s.IsZero() && s.After(g.last) {
			slots = append(slots, s)
		}
	}
	if len(slots) > 0 {
		g.last = slots[len(slots)-1]
	}
	return slots
}

// fired is the group's gocron task: it claims each due slot for every member.
func (t *timers) fired(g *timerGroup) {
	slots := g.due(time.Now())
	if len(slots) == 0 {
		return
	}
	g.mu.Lock()
	members := make([]*entry, 0, len(g.members))
	for _, m := range g.members {
		members = append(members, m)
	}
	g.mu.Unlock()
	if len(slots) > 1 {
		t.log.Warn("the timer fired late: claiming every slot it passed", "schedule", g.sched.Key(),
			"slots", len(slots), "first", slots[0], "last", slots[len(slots)-1])
	}
	for _, slot := range slots {
		t.fire(members, slot, g.lead)
	}
}

// add starts en's timer: it joins its schedule's group. A one-time schedule's timer is a
// gocron one-time job of its own, or none once its slot has passed (catch-up decides about
// that slot); so is a schedule whose window has ended.
func (t *timers) add(en *entry) error {
	sched := en.conf.Schedule
	if sched.Once() {
		at := sched.Next(time.Time{})
		if !at.After(time.Now()) {
			return nil
		}
		task := gocron.NewTask(func() { t.fire([]*entry{en}, at, 0) })
		j, err := t.s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(at)), task, gocron.WithName(en.conf.Name))
		if err != nil {
			return fmt.Errorf("timer for job %s: %w", en.conf.Name, err)
		}
		t.once[en.conf.Name] = j.ID()
		return nil
	}
	if sched.Next(time.Now()).IsZero() {
		return nil // its window has ended
	}
	key := sched.Key()
	g := t.groups[key]
	if g == nil {
		lead := t.e.claimLead(sched)
		// gocron fires first for the first slot after now + lead; the ones up to it are
		// the catch-up's (startTimers), or, for a member that joins, add's below.
		g = &timerGroup{sched: sched, lead: lead, members: map[string]*entry{}, last: sched.Prev(time.Now().Add(lead))}
		task := gocron.NewTask(func() { t.fired(g) })
		j, err := t.s.NewJob(gocron.CronJob(key, true), task,
			gocron.WithCronImplementation(timerCron{sched, lead}), gocron.WithName(key))
		if err != nil {
			return fmt.Errorf("timer for job %s: %w", en.conf.Name, err)
		}
		g.id = j.ID()
		t.groups[key] = g
	}
	g.mu.Lock()
	g.members[en.conf.Name] = en
	g.mu.Unlock()
	// The timer fired, or is about to fire, for a slot within lead from now without this
	// job (a term that starts, or a definition stored, a moment before a slot), and the
	// catch-up claims only the slots that have come: the job's claim of that slot is made
	// here. If the timer's own claim of it comes too, one of the two finds it taken.
	if g.lead > 0 {
		if next := sched.Next(time.Now()); !next.IsZero() && time.Until(next) <= g.lead {
			t.fire([]*entry{en}, next, g.lead)
		}
	}
	return nil
}

// fire claims slot for each job; ahead is how long before the slot the timer fired. A job
// whose tick is its claim alone (no jitter to wait for, no active run to wait for: most
// jobs) is claimed together with the others like it, from one goroutine (tickTogether);
// the rest tick each in a goroutine of its own, as a tick may wait and retry for the
// slot's whole period.
func (t *timers) fire(jobs []*entry, slot time.Time, ahead time.Duration) {
	var plain []*entry
	for _, en := range jobs {
		if en.waitsForIdle() || en.def != nil && en.def.Offset() > 0 {
			t.tickAlone(en, slot, ahead, 0)
		} else {
			plain = append(plain, en)
		}
	}
	if len(plain) == 0 {
		return
	}
	t.e.runs.Add(1)
	go func() {
		defer t.e.runs.Done()
		t.tickTogether(plain, slot, ahead)
	}()
}

// tickAlone ticks slot for en in a goroutine of its own, after wait.
func (t *timers) tickAlone(en *entry, slot time.Time, ahead, wait time.Duration) {
	t.e.runs.Add(1)
	go func() {
		defer t.e.runs.Done()
		if !backoff.Sleep(t.ctx, wait) {
			return // the next leader's catch-up finds the slot
		}
		t.e.tick(t.ctx, t.term, t.claims, t.log, en, slot, store.TriggerSchedule, ahead)
	}()
}

// tickTogether hands the claimer every job's claim of slot and waits for their answers. A
// goroutine per job, waiting on its claim, cost a 100 000-job slot 33 000 goroutines on
// each of three replicas, with their stacks and their scheduling, to do what one loop does.
// A claim that neither won nor lost outright goes on as a tick of its own, where tick's
// own loop would have gone: a claim ahead that did not win outright is claimed again at
// the slot, not ahead again, and an error is retried for the slot's period. When the term
// ends first, the next leader's catch-up finds the unclaimed slots.
func (t *timers) tickTogether(jobs []*entry, slot time.Time, ahead time.Duration) {
	requests := make([]*claimRequest, 0, len(jobs))
	for _, en := range jobs {
		if t.e.passOver(en, slot) {
			continue
		}
		r := &claimRequest{en: en, slot: slot, trigger: store.TriggerSchedule, mode: claimSkips, ahead: ahead,
			log: t.log.With("job", en.conf.Name, "scheduled_at", slot, "trigger", store.TriggerSchedule), done: make(chan error, 1)}
		select {
		case t.claims.requests <- r:
		case <-t.ctx.Done():
			return
		}
		requests = append(requests, r)
	}
	for _, r := range requests {
		select {
		case err := <-r.done:
			var early *earlyError
			switch {
			case err == nil:
			case ahead > 0 && errors.As(err, &early):
				t.tickAlone(r.en, slot, 0, early.by)
			default:
				t.tickAlone(r.en, slot, ahead, 0)
			}
		case <-t.ctx.Done():
			return
		}
	}
}

// Claims ahead of the slot. Claiming 10 000 slots is one statement of 0.3-0.8 s on a 2-core
// machine, no run could start before it committed, and starting the runs that won takes
// 0.2-0.4 s more (each grows its stack and prepares its call, slotwait.go): so a schedule's
// timer fires claimLead before its slots, the claim is committed and the runs are ready by
// the slot, and each run waits for the slot by the database's clock (store.Claim.Ahead).
// With a lead of one second, the runs of the slowest claims were still being started at
// the slot, beside the first calls. A schedule faster than claimAheadFrom claims at its
// slots: its slots are few at once, and a lead that is a large share of its period would
// claim a slot while the run before it may still end in time.
const (
	claimLead      = 2 * time.Second
	claimAheadFrom = time.Minute
)

// claimLead is how long before its slots a schedule's timer fires: claimLead, or none for a
// schedule whose period is shorter than claimAheadFrom.
func (e *Engine) claimLead(s *schedule.Schedule) time.Duration {
	if p := s.Period(time.Now()); p > 0 && p >= e.claimAheadFrom {
		return min(claimLead, p/4)
	}
	return 0
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

// tickDue ticks en's slots after from that are already due, each in its own goroutine; due
// by the engine's clock, as the catch-up that computed from.
func (t *timers) tickDue(en *entry, from time.Time) {
	now := t.e.clock.now()
	for slot := en.conf.Schedule.Next(from); !slot.IsZero() && !slot.After(now); slot = en.conf.Schedule.Next(slot) {
		t.e.runs.Add(1)
		go func() {
			defer t.e.runs.Done()
			t.e.tick(t.ctx, t.term, t.claims, t.log, en, slot, store.TriggerSchedule, 0)
		}()
	}
}

// timerCron is a schedule as gocron's Cron, firing lead before each slot. Past a window's
// end the schedule has no next slot, and gocron, asked for the slot after the zero time,
// would get the window's first one again and loop forever looking for one after now; a slot
// a century away instead leaves the timer idle for the term.
type timerCron struct {
	*schedule.Schedule
	lead time.Duration
}

func (c timerCron) Next(t time.Time) time.Time {
	if n := c.Schedule.Next(t.Add(c.lead)); !n.IsZero() {
		return n.Add(-c.lead)
	}
	return t.AddDate(100, 0, 0)
}

func (t *timers) stop(log *slog.Logger) {
	if err := t.s.Shutdown(); err != nil {
		log.Warn("stopping the timers", "error", err)
	}
}
