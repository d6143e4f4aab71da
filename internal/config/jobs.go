package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/schedule"
)

// The jobs' part of the configuration: SCHEDULER_JOB_<NAME>_<setting> for every compiled job,
// read after the service-wide settings (Load) once the job registry is known.

const jobPrefix = "SCHEDULER_JOB_"

// jobSuffixes are the per-job settings, SCHEDULER_JOB_<NAME>_<suffix>.
var jobSuffixes = append([]string{"SCHEDULE", "ENABLED", "TIMEOUT", "CATCHUP", "MIN_GAP"}, notifySuffixes...)

// JobDefaults is a job's built-in configuration, which the environment can override.
type JobDefaults struct {
	Name string // e.g. "plan-change"
	// Schedule is the default schedule (UTC unless it sets CRON_TZ).
	Schedule string
	// Timeout is the maximum runtime (ShedLock's lockAtMostFor).
	Timeout time.Duration
	// MinGap is the minimum time between two runs' starts (lockAtLeastFor); usually 0.
	MinGap time.Duration
}

// Job is a job's validated configuration.
type Job struct {
	Name     string
	Schedule *schedule.Schedule
	Enabled  bool
	Timeout  time.Duration // maximum runtime (ShedLock's lockAtMostFor); > 0
	Catchup  time.Duration // how old a missed slot may be and still run once; 0 disables; default: the schedule's period
	MinGap   time.Duration // minimum time between the starts of two runs (ShedLock's lockAtLeastFor)
	// MaxRuns, above 0, ends the job's schedule after this many slots ran (a runtime job's
	// max_runs; built-in jobs have none).
	MaxRuns int
	// Notify says whom to tell of the job's failures, misses, recovery and pauses: a
	// runtime job's definition's "notify", a built-in job's SCHEDULER_JOB_<NAME>_NOTIFY_*.
	Notify []notify.Rule
}

// LoadJobs reads and checks the jobs' settings into c.Jobs. defaults lists the known jobs;
// any SCHEDULER_JOB_ variable that is not for one of them is refused, because a typo there
// would otherwise silently leave a job on its default. The error joins every problem found
// on env, Load's included.
func (c *Config) LoadJobs(env *Env, defaults []JobDefaults) error {
	jobs, err := loadJobs(env, defaults, time.Now())
	if err != nil {
		return err
	}
	c.Jobs = jobs
	return env.Err()
}

func loadJobs(env *Env, defaults []JobDefaults, now time.Time) ([]Job, error) {
	known := make(map[string]string, len(defaults)) // env name -> job name
	for _, d := range defaults {
		// A clash here is a bug in the job list, not in the environment.
		if d.Name == "" {
			return nil, fmt.Errorf("config: a job has no name")
		}
		if other, dup := known[envName(d.Name)]; dup {
			return nil, fmt.Errorf("config: job names %q and %q share the variables %s%s_*", other, d.Name, jobPrefix, envName(d.Name))
		}
		known[envName(d.Name)] = d.Name
	}

	jobs := make([]Job, 0, len(defaults))
	for _, d := range defaults {
		prefix := jobPrefix + envName(d.Name) + "_"
		j := Job{Name: d.Name, Enabled: env.Bool(prefix+"ENABLED", true)}

		spec := env.String(prefix+"SCHEDULE", d.Schedule)
		s, err := schedule.Parse(spec)
		if err != nil {
			// Drop Parse's own `schedule "<spec>": ` prefix: Error shows the value already.
			reason := strings.TrimPrefix(err.Error(), fmt.Sprintf("schedule %q: ", spec))
			env.Fail(prefix+"SCHEDULE", spec, "a valid schedule: "+reason)
		} else {
			j.Schedule = s
		}

		j.Timeout = env.Duration(prefix+"TIMEOUT", d.Timeout)
		if j.Timeout <= 0 {
			value := ""
			if v, ok := env.lookup(prefix + "TIMEOUT"); ok {
				value = v
			}
			env.Fail(prefix+"TIMEOUT", value, `a maximum runtime above 0 such as "10m"`)
		}

		// By default a missed slot may still run until the next one is due:
		// a daily job missed at 02:00 still runs at 09:00.
		var period time.Duration
		if s != nil {
			period = s.Period(now)
		}
		j.Catchup = env.Duration(prefix+"CATCHUP", period)
		atLeast(env, prefix+"CATCHUP", j.Catchup, 0, `a duration of 0 (no catch-up) or more such as "1h"`)
		j.MinGap = env.Duration(prefix+"MIN_GAP", d.MinGap)
		atLeast(env, prefix+"MIN_GAP", j.MinGap, 0, `a duration of 0 or more such as "30s"`)
		j.Notify = jobNotify(env, prefix)
		jobs = append(jobs, j)
	}

	for _, name := range env.Names(jobPrefix) {
		if !isJobVar(name, known) {
			v, _ := env.lookup(name)
			env.Fail(name, v, unknownJobVarWant(name, known, defaults))
		}
	}
	return jobs, nil
}

// isJobVar reports whether name is SCHEDULER_JOB_<known job>_<known suffix>.
// Every split is tried, because job names may themselves contain "_".
func isJobVar(name string, known map[string]string) bool {
	rest := strings.TrimPrefix(name, jobPrefix)
	for _, suffix := range jobSuffixes {
		if job, ok := strings.CutSuffix(rest, "_"+suffix); ok && known[job] != "" {
			return true
		}
	}
	return false
}

func unknownJobVarWant(name string, known map[string]string, defaults []JobDefaults) string {
	rest := strings.TrimPrefix(name, jobPrefix)
	if _, ok := known[rest]; ok || rest == "" {
		return fmt.Sprintf("%s%s_<SETTING> with SETTING one of %s", jobPrefix, rest, strings.Join(jobSuffixes, ", "))
	}
	longest := "" // of the known jobs rest starts with, so that "PLAN" does not hide "PLAN_CHANGE"
	for job := range known {
		if strings.HasPrefix(rest, job+"_") && len(job) > len(longest) {
			longest = job
		}
	}
	if longest != "" {
		return fmt.Sprintf("one of the settings %s%s_{%s}", jobPrefix, longest, strings.Join(jobSuffixes, ","))
	}
	job := rest
	for _, suffix := range jobSuffixes {
		if j, ok := strings.CutSuffix(rest, "_"+suffix); ok {
			job = j
			break
		}
	}
	names := make([]string, len(defaults))
	for i, d := range defaults {
		names[i] = envName(d.Name)
	}
	return fmt.Sprintf("a known job in place of %q: one of %s", job, strings.Join(names, ", "))
}

// envName is a job name as it appears in variable names: "plan-change" -> "PLAN_CHANGE".
func envName(job string) string {
	return strings.ReplaceAll(strings.ToUpper(job), "-", "_")
}
