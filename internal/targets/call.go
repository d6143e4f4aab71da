package targets

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/config"
)

const (
	concurrencyDefault     = config.HTTPConcurrencyDefault     // SCHEDULER_HTTP_CONCURRENCY
	hostConcurrencyDefault = config.HTTPHostConcurrencyDefault // SCHEDULER_HTTP_HOST_CONCURRENCY
	jobConcurrencyDefault  = config.HTTPJobConcurrencyDefault  // SCHEDULER_HTTP_JOB_CONCURRENCY
	// attemptTimeoutDefault applies when a request names none: an attempt that may hang
	// forever would hold its concurrency slots forever.
	attemptTimeoutDefault = 30 * time.Second
	initialBackoffDefault = time.Second
	maxBackoffDefault     = time.Minute
	tlsHandshakeTimeout   = 10 * time.Second
	idleConnTimeout       = 90 * time.Second
)

// Config is what a Caller is built from.
type Config struct {
	Guard           *Guard // nil: a guard with an empty allow list
	Concurrency     int    // all targets together (SCHEDULER_HTTP_CONCURRENCY, default 512)
	HostConcurrency int    // per target host (SCHEDULER_HTTP_HOST_CONCURRENCY, default 64)
	JobConcurrency  int    // per job (SCHEDULER_HTTP_JOB_CONCURRENCY, default 16)
	// OnCall, when set, is told of every attempt that got an answer or failed: host,
	// StatusClass, duration. For metrics.
	OnCall func(host, class string, d time.Duration)
	// NATSRootCAs are what a NATS server's certificate must chain to; nil: the system's.
	NATSRootCAs *x509.CertPool
}

// Caller makes the HTTP calls of runtime jobs. It is safe for concurrent use; one Caller
// serves the whole process, so that its concurrency bounds and connection pool are shared.
type Caller struct {
	guard  *Guard
	client *http.Client
	slots  *slots
	onCall func(host, class string, d time.Duration)

	conf    Config
	mu      sync.Mutex
	clients map[string]*http.Client // by namespace allowance (Guard.key)
}

// NewCaller builds a Caller; zero fields of c take their defaults.
func NewCaller(c Config) *Caller {
	if c.Guard == nil {
		c.Guard, _ = NewGuard(nil) // an empty list has no bad entry
	}
	if c.Concurrency <= 0 {
		c.Concurrency = concurrencyDefault
	}
	if c.HostConcurrency <= 0 {
		c.HostConcurrency = hostConcurrencyDefault
	}
	if c.JobConcurrency <= 0 {
		c.JobConcurrency = jobConcurrencyDefault
	}
	caller := &Caller{guard: c.Guard, slots: newSlots(c.Concurrency, c.HostConcurrency, c.JobConcurrency), onCall: c.OnCall,
		conf: c, clients: map[string]*http.Client{}}
	caller.client = caller.newClient(c.Guard)
	return caller
}

// newClient is a client whose connections are dialled through guard g, pooled apart from
// every other guard's.
func (c *Caller) newClient(g *Guard) *http.Client {
	transport := &http.Transport{
		Proxy: nil, // a proxy from the environment would dial for us, past the guard
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.dial(ctx, g, network, addr)
		},
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		MaxIdleConns:        c.conf.Concurrency,
		MaxIdleConnsPerHost: c.conf.HostConcurrency,
		MaxConnsPerHost:     c.conf.HostConcurrency,
		IdleConnTimeout:     idleConnTimeout,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{
		Transport: allowedHostsTransport{next: transport},
		// A redirect could lead anywhere; the guard would still check it, but the user
		// asked for this URL, and a 3xx usually means a mistyped one (http for https).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// clientFor is the client of a request's guard: the caller's own for nil or the operator's
// guard, else one per namespace allowance (Guard.Narrow), made on first use. The pool key of
// a connection is only its host and port, so namespaces whose allowances differ must not
// share a pool: a connection to a private address dialled for one would serve the other.
func (c *Caller) clientFor(g *Guard) *http.Client {
	if g == nil || g == c.guard || g.outer == nil {
		return c.client
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	client, ok := c.clients[g.key]
	if !ok {
		client = c.newClient(g)
		c.clients[g.key] = client
	}
	return client
}

// Waiting is how many calls wait for a concurrency slot now (a gauge for metrics).
func (c *Caller) Waiting() int64 { return c.slots.waiting.Load() }

// Queued reports whether calls wait for a host's or the global concurrency bound: a burst
// (every job of a schedule due at once) is being called as fast as the bounds allow.
func (c *Caller) Queued() bool { return c.slots.queued.Load() > 0 }

// RetryPolicy says how often and how far apart a failed call is tried again.
type RetryPolicy struct {
	MaxAttempts    int           // <= 1: one attempt
	InitialBackoff time.Duration // <= 0: 1s
	MaxBackoff     time.Duration // <= 0: 1m; never below InitialBackoff
}

// Request is one call of a runtime job, to be tried up to Retry.MaxAttempts times.
type Request struct {
	// Job names the job the call is made for: its calls share the job's bound
	// (JobConcurrency). "" is a job of its own.
	Job string
	// Namespace owns the job: its calls share the namespace's max_concurrent_calls
	// (SetNamespaceLimits). "" has no bound of its own.
	Namespace string
	// AllowedHosts are the hosts each stored secret the call carries may be sent to: every
	// connection the call makes must be to a host (and port) of every list, or the attempt
	// is refused before anything is sent. Empty: no secret restricts the call.
	AllowedHosts []AllowedHosts
	// Guard is the outbound guard of the job's namespace (Guard.Narrow); nil: the caller's.
	Guard *Guard
	// Subject makes the call a NATS JetStream publish to it (Caller.Publish): URL is then
	// the server's (nats:// or tls://), Body the message; Method, Header and Success are
	// not used.
	Subject        string
	Method, URL    string
	Header         http.Header // the user's headers plus auth, already resolved; never logged
	Body           []byte
	AttemptTimeout time.Duration // whole attempt incl. reading the body; <= 0: 30s
	Success        []int         // statuses that count as success; empty = any 2xx
	IdempotencyKey string        // sent as Idempotency-Key AND as webhook-id; the same on every attempt
	RunID          int64
	ScheduledAt    time.Time // zero for manual runs: then X-Scheduler-Scheduled-At is omitted
	SigningKey     []byte    // nil: no webhook-signature header (webhook-id/-timestamp are still sent)
	// Authorize, when set, makes attempt n's Authorization value just before it is sent (a
	// short-lived token, made anew for each attempt so that a retry minutes later does not
	// carry an expired one); it replaces any Authorization in Header. Its error fails the
	// attempt, nothing sent, and a retry may follow.
	Authorize func(ctx context.Context, attempt int) (string, error)
	Retry     RetryPolicy
	// Deadline: no retry starts after it, and no backoff sleeps past it (the next slot, or
	// the run's timeout); zero = none. The first attempt is made however late the run
	// started (a slot's call is made at least once: a catch-up or recovery run that starts
	// late in its period must not record the slot failed without calling), bounded by ctx;
	// an attempt under way is not cut short by it.
	Deadline  time.Time
	OnAttempt func(Attempt) // called after each attempt, before any backoff (the engine records it)
	// OnWait, when set, is told when the next attempt starts as the backoff wait before it
	// begins, and the zero time when the wait is over and that attempt starts (the engine
	// records both, so a retrying run says when it tries again).
	OnWait func(next time.Time)
}

// Attempt is what one try of a Request did.
type Attempt struct {
	Number     int // 1-based
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode int    // 0 when no answer
	Body       string // the first 4 KiB of the response body, valid UTF-8 (cut cleanly)
	Error      string // "" on success; otherwise in words, e.g. "connection refused"
	Retryable  bool
}

// Result is the outcome of a Request: its attempts, and Err nil on success or otherwise saying
// what happened on the last attempt and how many attempts were made. When ctx ended the call,
// Err wraps ctx.Err().
type Result struct {
	Attempts []Attempt
	Err      error
}

// Do calls r.URL, retrying as r.Retry allows. The URL is checked again before the first
// attempt, because the allow list may have been narrowed since the definition was written.
func (c *Caller) Do(ctx context.Context, r Request) Result {
	guard := r.Guard
	if guard == nil {
		guard = c.guard
	}
	if err := guard.CheckURL(r.URL); err != nil {
		return Result{Err: fmt.Errorf("not attempted: %w", err)}
	}
	u, _ := url.Parse(r.URL) // CheckURL parsed it already
	return c.try(ctx, &r, normalHost(u.Hostname()), c.attempt)
}

// try makes the attempts of r to host, each by attempt once it holds its concurrency slots,
// retrying as r.Retry allows: the one loop of every kind of call (an HTTP request, a NATS
// publish), so every kind is bounded, retried, recorded and counted the same way.
func (c *Caller) try(ctx context.Context, r *Request, host string,
	attempt func(ctx context.Context, r *Request, n int) (Attempt, time.Duration)) Result {
	maxAttempts := max(r.Retry.MaxAttempts, 1)
	initial := cmpOr(r.Retry.InitialBackoff, initialBackoffDefault)
	delays := backoff.New(initial, max(cmpOr(r.Retry.MaxBackoff, maxBackoffDefault), initial))

	var res Result
	for n := 1; ; n++ {
		deadline := r.Deadline
		if n == 1 {
			deadline = time.Time{}
		}
		release, err := c.slots.acquire(ctx, slotRequest{job: r.Job, namespace: r.Namespace, host: host,
			deadline: deadline, nsDeadline: r.Deadline})
		if err != nil {
			var quota *QuotaError
			if ctx.Err() != nil && !errors.As(err, &quota) {
				res.Err = stopped(ctx, n-1)
			} else {
				res.Err = fmt.Errorf("gave up after %s: %w", attempts(n-1), err)
			}
			return res
		}
		a, retryAfter := attempt(ctx, r, n)
		release()
		res.Attempts = append(res.Attempts, a)
		if c.onCall != nil {
			c.onCall(host, attemptClass(r, a), a.Duration)
		}
		if r.OnAttempt != nil {
			r.OnAttempt(a)
		}

		switch {
		case a.Error == "":
			return res
		case ctx.Err() != nil:
			res.Err = stopped(ctx, n)
			return res
		case !a.Retryable:
			res.Err = fmt.Errorf("failed after %s, not retryable: %s", attempts(n), a.Error)
			return res
		case n >= maxAttempts:
			res.Err = fmt.Errorf("failed after %s: %s", attempts(n), a.Error)
			return res
		}
		wait := max(delays.Next(), retryAfter) // a server that says when to come back knows best
		if !r.Deadline.IsZero() && time.Now().Add(wait).After(r.Deadline) {
			res.Err = fmt.Errorf("gave up after %s: the next attempt would start after the run's deadline %s (the next slot or the run's timeout); last: %s",
				attempts(n), r.Deadline.UTC().Format(time.RFC3339), a.Error)
			return res
		}
		if r.OnWait != nil {
			r.OnWait(time.Now().Add(wait))
		}
		if !backoff.Sleep(ctx, wait) {
			res.Err = stopped(ctx, n)
			return res // the run's end clears the time recorded
		}
		if r.OnWait != nil {
			r.OnWait(time.Time{})
		}
	}
}

// stopped says that ctx ended the call, keeping ctx.Err() for errors.Is and the cause (a lost
// leadership, a cancelled run) for the reader.
func stopped(ctx context.Context, n int) error {
	if cause := context.Cause(ctx); cause != ctx.Err() {
		return fmt.Errorf("stopped after %s: %w (%w)", attempts(n), ctx.Err(), cause)
	}
	return fmt.Errorf("stopped after %s: %w", attempts(n), ctx.Err())
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// PublishAcked is the class of a NATS publish the stream acknowledged (a duplicate too).
const PublishAcked = "ack"

// attemptClass is the class an attempt is counted under: StatusClass for an HTTP call;
// PublishAcked or NoAnswer for a NATS publish.
func attemptClass(r *Request, a Attempt) string {
	if r.Subject == "" {
		return StatusClass(a.StatusCode)
	}
	if a.Error == "" {
		return PublishAcked
	}
	return NoAnswer
}
