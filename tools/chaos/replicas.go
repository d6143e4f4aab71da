package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/schedulerhq/scheduler/internal/jobs"
)

// jobsEnv runs the jobs under test on their chaos schedules and disables every other job of
// the registry.
func jobsEnv(run map[string]string) []string {
	var env []string
	for _, j := range jobs.Defaults() {
		name := "SCHEDULER_JOB_" + strings.ToUpper(strings.ReplaceAll(j.Name, "-", "_"))
		if schedule, ok := run[j.Name]; ok {
			env = append(env, name+"_SCHEDULE="+schedule)
		} else {
			env = append(env, name+"_ENABLED=false")
		}
	}
	return env
}

// replica is one scheduler serve process slot; it is restarted under a new instance id.
// It reaches PostgreSQL through its own proxy, which the blackhole fault cuts.
type replica struct {
	n     int
	gen   int
	id    string
	cmd   *exec.Cmd
	done  chan struct{}
	proxy *proxy
	dbURL string // through the proxy
	addr  string // its API's host:port
}

type runner struct {
	cfg      Config
	pool     *pgxpool.Pool
	rng      *rand.Rand
	mu       sync.Mutex
	replicas []*replica
	restarts int // pg-restarts so far, to alternate their modes

	epochsMu sync.Mutex
	epochs   map[termKey]time.Time // every term seen (the leader's as partition 0), with its since
	// maxUnheld is the longest a partition went from its holder's last renewal to its next
	// term (watchPartitions).
	maxUnheld time.Duration
	receiver  *keyReceiver // the runtime jobs' receiver; nil without runtime jobs

	checkProxy *proxy // the run's own pool's proxy
	failovers  int    // failovers so far: the roles of PGData and Standby swap at each
}

// start launches replica slot i (again, after a kill) under a new instance id.
func (r *runner) start(i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.replicas) <= i {
		r.replicas = append(r.replicas, &replica{n: len(r.replicas)})
	}
	rep := r.replicas[i]
	rep.gen++
	rep.id = fmt.Sprintf("chaos-r%d-g%d", i, rep.gen)
	if rep.proxy == nil {
		var err error
		if rep.proxy, rep.dbURL, err = r.newProxy(); err != nil {
			return err
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(r.cfg.WorkDir, fmt.Sprintf("replica-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.cfg.Binary, "serve")
	env := append(os.Environ(),
		"DATABASE_URL="+rep.dbURL,
		"SCHEDULER_HTTP_ADDR=127.0.0.1:"+port,
		"SCHEDULER_INSTANCE_ID="+rep.id,
		"SCHEDULER_LOG_FORMAT=json",
	)
	env = append(env, jobsEnv(r.cfg.Jobs)...)
	if r.cfg.Partitions > 1 {
		env = append(env, fmt.Sprintf("SCHEDULER_PARTITIONS=%d", r.cfg.Partitions))
	}
	if r.cfg.RuntimeJobs > 0 {
		env = append(env, "SCHEDULER_HTTP_ALLOW=127.0.0.1/32")
	}
	if r.cfg.Lease > 0 {
		env = append(env, "SCHEDULER_LEASE_TIMEOUT="+r.cfg.Lease.String())
	}
	cmd.Env = append(env, r.cfg.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start replica %d: %w", i, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	rep.cmd, rep.done, rep.addr = cmd, done, "127.0.0.1:"+port
	return nil
}

// readyTimeout bounds the wait for a started replica's /readyz: it migrates the schema
// before it answers 200, which on a fresh database takes seconds.
const readyTimeout = 30 * time.Second

// awaitReady waits until rep answers /readyz 200 (its database answers and the schema is
// migrated), failing at once when its process exits, or after readyTimeout. A starting
// process sends nothing this run could listen to: /readyz is asked every 50 ms.
func awaitReady(ctx context.Context, rep *replica) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rep.addr+"/readyz", nil)
		if err != nil {
			return err
		}
		if res, err := http.DefaultClient.Do(req); err != nil {
			last = err.Error()
		} else {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status
		}
		select {
		case <-rep.done:
			return fmt.Errorf("replica %s exited before it was ready; see replica-%d.log in the work directory", rep.id, rep.n)
		case <-ctx.Done():
			return fmt.Errorf("replica %s was not ready within %s (last /readyz: %s); see replica-%d.log in the work directory: %w",
				rep.id, readyTimeout, last, rep.n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopAll signals every live replica and waits for it (SIGKILL after 10 s).
func (r *runner) stopAll(sig syscall.Signal) {
	r.mu.Lock()
	reps := slices.Clone(r.replicas)
	r.mu.Unlock()
	for _, rep := range reps {
		if rep.cmd != nil && rep.cmd.Process != nil {
			_ = rep.cmd.Process.Signal(sig)
		}
	}
	for _, rep := range reps {
		if rep.done == nil {
			continue
		}
		select {
		case <-rep.done:
		case <-time.After(10 * time.Second):
			_ = rep.cmd.Process.Kill()
			<-rep.done
		}
	}
}

// leader reads the leader row.
func (r *runner) leader(ctx context.Context) (epoch int64, id string, since time.Time, err error) {
	var idp *string
	var sincep *time.Time
	err = r.pool.QueryRow(ctx, `SELECT epoch, instance_id, since FROM scheduler_leader WHERE id = 1`).Scan(&epoch, &idp, &sincep)
	if idp != nil {
		id = *idp
	}
	if sincep != nil {
		since = *sincep
	}
	return
}

// newProxy starts a proxy to the current primary and returns it and DatabaseURL through it.
func (r *runner) newProxy() (*proxy, string, error) {
	u, err := url.Parse(r.cfg.DatabaseURL)
	if err != nil {
		return nil, "", err
	}
	host := u.Host
	if r.failovers%2 == 1 {
		host = net.JoinHostPort(u.Hostname(), r.cfg.StandbyPort)
	}
	p, err := startProxy(host)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

// proxied starts the run's own pool's proxy and returns the URL through it.
func (r *runner) proxied() (string, error) {
	p, u, err := r.newProxy()
	r.checkProxy = p
	return u, err
}

// proxies are every proxy to PostgreSQL: the replicas' and the run's own.
func (r *runner) proxies() []*proxy {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []*proxy
	for _, rep := range r.replicas {
		if rep.proxy != nil {
			ps = append(ps, rep.proxy)
		}
	}
	if r.checkProxy != nil {
		ps = append(ps, r.checkProxy)
	}
	return ps
}

func (r *runner) closeProxies() {
	for _, p := range r.proxies() {
		p.Close()
	}
}

func (r *runner) byID(id string) *replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.replicas {
		if rep.id == id {
			select {
			case <-rep.done:
				return nil
			default:
				return rep
			}
		}
	}
	return nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, _ := strings.Cut(l.Addr().String(), ":")
	return port, nil
}
