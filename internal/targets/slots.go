package targets

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errNoSlotBeforeDeadline ends a call whose turn would come only after its deadline.
var errNoSlotBeforeDeadline = errors.New("no concurrency slot came free before the run's deadline")

// slots bounds how many attempts run at once: in all, so that a burst of due jobs cannot
// exhaust the scheduler's sockets; per host, so that one slow target cannot take every
// slot from the others, nor the scheduler flood one user's service; and per job, so that
// one job's slow targets (its overlapping runs, its hosts) cannot hold every slot for its
// timeout and starve the other jobs.
type slots struct {
	global  chan struct{}
	perHost int
	perJob  int
	waiting atomic.Int64
	// queued counts the calls waiting for a host's or the global bound: the replica makes
	// calls as fast as its bounds let it (Caller.Queued). Waits for a job's or a namespace's
	// own bound are that tenant's, and not counted.
	queued atomic.Int64

	mu sync.Mutex
	// hosts keeps a semaphore per host for the life of the process: hosts are bounded by
	// the number of job definitions, so this does not grow without end.
	hosts map[string]chan struct{}
	// jobs keeps a semaphore per job while one of its calls holds or waits for it: a job
	// renamed or deleted leaves nothing behind.
	jobs map[string]*jobSlots
	// limits are the namespaces' bounds (quota.go), inUse their calls holding a slot, and
	// changed is closed when either changes, to wake the nsWaiting calls waiting.
	limits    map[string]int
	inUse     map[string]int
	changed   chan struct{}
	nsWaiting int
}

type jobSlots struct {
	sem   chan struct{}
	users int
}

func newSlots(global, perHost, perJob int) *slots {
	return &slots{global: make(chan struct{}, global), perHost: perHost, perJob: perJob,
		hosts: map[string]chan struct{}{}, jobs: map[string]*jobSlots{},
		inUse: map[string]int{}, changed: make(chan struct{})}
}

// slotRequest is what one attempt asks slots of.
type slotRequest struct {
	job, namespace, host string
	// deadline bounds the wait for every slot (zero: none); nsDeadline, the run's deadline
	// whatever the attempt, the wait for the namespace's (quota.go).
	deadline, nsDeadline time.Time
}

// acquire takes a slot for the job, one of its namespace's bound, one for the host, and one
// of the global ones, waiting until ctx ends or the deadlines pass. The narrower slots are
// taken first: a call queued behind its own job, its namespace or a busy host then holds
// nothing the other calls need.
func (s *slots) acquire(ctx context.Context, req slotRequest) (release func(), err error) {
	if !req.deadline.IsZero() {
		if !time.Now().Before(req.deadline) {
			return nil, errNoSlotBeforeDeadline
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.deadline)
		defer cancel()
	}
	jobSem, leaveJob := s.job(req.job)
	if err := s.take(ctx, jobSem, false); err != nil {
		leaveJob()
		return nil, err
	}
	leaveNamespace, err := s.takeNamespace(ctx, req.namespace, req.nsDeadline)
	if err != nil {
		<-jobSem
		leaveJob()
		return nil, err
	}
	hostSem := s.host(req.host)
	if err := s.take(ctx, hostSem, true); err != nil {
		leaveNamespace()
		<-jobSem
		leaveJob()
		return nil, err
	}
	if err := s.take(ctx, s.global, true); err != nil {
		<-hostSem
		leaveNamespace()
		<-jobSem
		leaveJob()
		return nil, err
	}
	return func() { <-s.global; <-hostSem; leaveNamespace(); <-jobSem; leaveJob() }, nil
}

// job returns job's semaphore and the function that gives it up once the call is done with
// it; the last one to give it up removes it.
func (s *slots) job(job string) (chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	js, ok := s.jobs[job]
	if !ok {
		js = &jobSlots{sem: make(chan struct{}, s.perJob)}
		s.jobs[job] = js
	}
	js.users++
	return js.sem, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if js.users--; js.users == 0 {
			delete(s.jobs, job)
		}
	}
}

func (s *slots) host(host string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	sem, ok := s.hosts[host]
	if !ok {
		sem = make(chan struct{}, s.perHost)
		s.hosts[host] = sem
	}
	return sem
}

// take takes a slot of sem, counting the wait, if any, in s.waiting, and in s.queued for a
// bound of the replica's (a host's or the global one).
func (s *slots) take(ctx context.Context, sem chan struct{}, replicaBound bool) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	if replicaBound {
		s.queued.Add(1)
		defer s.queued.Add(-1)
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return errNoSlotBeforeDeadline
		}
		return ctx.Err()
	}
}
