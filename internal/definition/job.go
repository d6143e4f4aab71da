package definition

import (
	"hash/fnv"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/schedule"
)

// Job is a checked definition with its values parsed: what the engine runs.
type Job struct {
	Def            Definition // normalised: defaults filled in, durations the short way
	Schedule       *schedule.Schedule
	Timeout        time.Duration
	Catchup        time.Duration
	MinGap         time.Duration
	Jitter         time.Duration
	AttemptTimeout time.Duration
	Retry          RetryPolicy
}

// RetryPolicy is Retry parsed.
type RetryPolicy struct {
	MaxAttempts                int
	InitialBackoff, MaxBackoff time.Duration
}

// Config is the job's part that the engine shares with built-in jobs.
func (j *Job) Config() config.Job {
	return config.Job{Name: j.Def.Name, Schedule: j.Schedule, Enabled: j.Def.IsEnabled(),
		Timeout: j.Timeout, Catchup: j.Catchup, MinGap: j.MinGap}
}

// Offset is the job's fixed jitter: where in [0, Jitter) its calls start after each slot,
// the same on every replica and every run (a hash of the name), so a thousand jobs on
// "0 * * * *" spread out instead of calling at once. The slot's scheduled_at stays nominal.
func (j *Job) Offset() time.Duration {
	if j.Jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(j.Def.Name))
	return time.Duration(h.Sum64() % uint64(j.Jitter))
}
