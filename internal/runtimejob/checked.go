package runtimejob

import (
	"hash/fnv"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/schedule"
)

// Checked is a definition that passed Check, with its values parsed: what the engine runs.
type Checked struct {
	Def            Definition // normalised: defaults filled in, durations the short way
	Schedule       *schedule.Schedule
	Timeout        time.Duration
	Catchup        time.Duration
	MinGap         time.Duration
	Jitter         time.Duration
	AttemptTimeout time.Duration
	Retry          RetryPolicy
	// HeartbeatTimeout is a callback job's longest wait between heartbeats (0 otherwise).
	HeartbeatTimeout time.Duration
	// FollowsOnly is a job with parents and no schedule of its own: its Schedule is
	// noSlots, and it runs only after its parents (after.go).
	FollowsOnly bool
}

// RetryPolicy is Retry parsed.
type RetryPolicy struct {
	MaxAttempts                int
	InitialBackoff, MaxBackoff time.Duration
}

// Config is the job's part that the engine shares with built-in jobs.
func (j *Checked) Config() config.Job {
	return config.Job{Name: j.Def.Key(), Schedule: j.Schedule, Enabled: j.Def.IsEnabled(),
		Timeout: j.Timeout, Catchup: j.Catchup, MinGap: j.MinGap, MaxRuns: j.Def.MaxRuns, Notify: j.Def.Notify}
}

// Offset is the job's fixed jitter: where in [0, Jitter) its calls start after each slot,
// the same on every replica and every run (a hash of the name), so a thousand jobs on
// "0 * * * *" spread out instead of calling at once. The slot's scheduled_at stays nominal.
func (j *Checked) Offset() time.Duration {
	if j.Jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(j.Def.Key()))
	return time.Duration(h.Sum64() % uint64(j.Jitter))
}

// Load decodes and checks a stored definition, once, for everything that reads one back: the
// engine that runs it and the API that shows it. The check's Env checks nothing outside the
// definition: secrets, addresses and the SQL role are checked when the job runs, so that a
// leader missing one fails the run with its reason rather than dropping the job. decoded is
// the definition as stored (nil when it does not decode); err says why a definition that no
// longer passes the check (a row written by hand, or by a newer version's rules) is refused,
// and then checked is nil.
func Load(stored []byte) (checked *Checked, decoded *Definition, err error) {
	d, err := Decode(stored)
	if err != nil {
		return nil, nil, err
	}
	checked, errs := Check(d, Env{})
	if errs != nil {
		return nil, &d, errs
	}
	return checked, &d, nil
}
