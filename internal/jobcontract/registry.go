package jobcontract

import "github.com/schedulerhq/scheduler/internal/config"

// Registry is the ordered list of jobs a replica knows. Adding a job means adding it here.
type Registry struct {
	list   []Job
	byName map[string]Job
}

// NewRegistry builds a registry from jobs (names must be unique).
func NewRegistry(list ...Job) *Registry {
	r := &Registry{byName: map[string]Job{}}
	for _, j := range list {
		if _, dup := r.byName[j.Name()]; dup {
			panic("jobs: duplicate job name " + j.Name())
		}
		r.list = append(r.list, j)
		r.byName[j.Name()] = j
	}
	return r
}

// All returns the jobs in registration order.
func (r *Registry) All() []Job { return r.list }

// Defaults returns every job's defaults, named, in registration order: what config.LoadJobs
// checks the environment's SCHEDULER_JOB_* variables against.
func (r *Registry) Defaults() []config.JobDefaults {
	out := make([]config.JobDefaults, len(r.list))
	for i, j := range r.list {
		out[i] = j.Defaults()
		out[i].Name = j.Name()
	}
	return out
}

// Get returns the named job.
func (r *Registry) Get(name string) (Job, bool) {
	j, ok := r.byName[name]
	return j, ok
}
