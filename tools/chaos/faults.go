package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"syscall"
	"time"
)

// injectFaults strikes the current leader with a fault of a kind drawn at random every few
// seconds, measures the hand-over and repairs what the fault broke (restarts a killed
// replica, heals a blackhole), until ctx ends.
func (r *runner) injectFaults(ctx context.Context, res *Result) error {
	for {
		pause := r.cfg.KillMin + time.Duration(r.rng.Int64N(int64(r.cfg.KillMax-r.cfg.KillMin)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		epoch, id, _, err := r.leader(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.cfg.Log.Warn("reading the leader row failed; retrying", "error", err)
			continue
		}
		rep := r.byID(id)
		if rep == nil {
			r.cfg.Log.Info("no live leader to strike yet", "leader", id, "epoch", epoch)
			continue
		}
		fault := r.cfg.Faults[r.rng.IntN(len(r.cfg.Faults))]
		sent := time.Now()
		repair, name, err := r.strike(ctx, fault, rep)
		if err != nil {
			return err
		}
		h := r.measureHandover(ctx, epoch, sent)
		h.Fault = name
		if h.Err != "" && ctx.Err() == nil {
			res.NoHandover++
		}
		if fault == FaultPause && h.Err == "" && h.Elected > r.lease()+3*time.Second {
			res.SlowTakeovers++
		}
		if ctx.Err() == nil || h.Err == "" {
			res.Handovers = append(res.Handovers, h)
		}
		r.cfg.Log.Info("fault", "fault", name, "instance", id, "epoch", epoch,
			"elected_after", h.Elected, "first_start_after", h.FirstStart, "beyond_due", h.BeyondDue, "error", h.Err)
		if err := repair(); err != nil {
			return err
		}
	}
}

// strike applies one fault to the leader rep and returns how to repair it once the
// hand-over is measured, and the fault's name in the report.
func (r *runner) strike(ctx context.Context, fault string, rep *replica) (repair func() error, name string, err error) {
	none := func() error { return nil }
	switch fault {
	case FaultKill, FaultTerm:
		sig := syscall.SIGKILL
		if fault == FaultTerm {
			sig = syscall.SIGTERM
		}
		if err := rep.cmd.Process.Signal(sig); err != nil {
			return nil, "", fmt.Errorf("signal %s: %w", rep.id, err)
		}
		return func() error {
			select {
			case <-rep.done:
			case <-time.After(10 * time.Second):
				_ = rep.cmd.Process.Kill()
				<-rep.done
			}
			return r.start(rep.n)
		}, fault, nil
	case FaultTerminate:
		// Every backend of the leader: its lock session and its running jobs' connections.
		var n int
		err := r.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = 'scheduler:' || $1 AND datname = current_database()`, rep.id).Scan(&n)
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("terminating the leader's backends failed", "error", err)
		}
		return none, fault, nil
	case FaultPGRestart:
		mode := "fast"
		if r.restarts%2 == 1 {
			mode = "immediate"
		}
		r.restarts++
		out, err := exec.CommandContext(ctx, "scripts/pg.sh", "restart", r.primaryDir(), mode).CombinedOutput()
		if err != nil && ctx.Err() == nil {
			return nil, "", fmt.Errorf("restart PostgreSQL (-m %s): %v: %s", mode, err, out)
		}
		// The pool's connections died with the server; drop them rather than fail a check.
		r.pool.Reset()
		return none, fault + " " + mode, nil
	case FaultBlackhole:
		rep.proxy.Cut()
		return func() error { rep.proxy.Heal(); return nil }, fault, nil
	case FaultFailover:
		return r.failover(ctx)
	case FaultPause:
		// Stopped past its lease: its lock connection stays open (the kernel still answers
		// keepalives), so only the others' takeover of a holder that stopped renewing
		// moves its coordinator term and partitions on. Resumed after the measure.
		if err := rep.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return nil, "", fmt.Errorf("signal %s: %w", rep.id, err)
		}
		resume := time.AfterFunc(r.lease()+4*time.Second, func() { _ = rep.cmd.Process.Signal(syscall.SIGCONT) })
		return func() error {
			if resume.Stop() { // the hand-over came first: resume it now
				return rep.cmd.Process.Signal(syscall.SIGCONT)
			}
			return nil
		}, fault, nil
	}
	return nil, "", fmt.Errorf("unknown fault %q", fault)
}

// failover kills the primary (-m immediate: the commits its asynchronous standby had not
// received are lost), promotes the standby and switches every proxy to it, as a stable
// address moves with a failover. The repair builds a new standby from the new primary in
// the old one's directory, for the next failover.
func (r *runner) failover(ctx context.Context) (repair func() error, name string, err error) {
	u, err := url.Parse(r.cfg.DatabaseURL)
	if err != nil {
		return nil, "", err
	}
	primary, standby := r.cfg.PGData, r.cfg.Standby
	pPort, sPort := u.Port(), r.cfg.StandbyPort
	if r.failovers%2 == 1 {
		primary, standby, pPort, sPort = standby, primary, sPort, pPort
	}
	r.cfg.Log.Info("failing PostgreSQL over", "primary", primary, "standby", standby)
	if err := r.pg(ctx, "kill", primary); err != nil {
		return nil, "", err
	}
	if err := r.pg(ctx, "promote", standby); err != nil {
		return nil, "", err
	}
	r.failovers++
	for _, p := range r.proxies() {
		p.Switch(net.JoinHostPort(u.Hostname(), sPort))
	}
	r.pool.Reset()
	return func() error {
		// Not cancelled by the end of the chaos phase: the next run needs a whole pair.
		return r.pg(context.WithoutCancel(ctx), "standby", sPort, primary, pPort)
	}, FaultFailover, nil
}

// primaryDir is the data directory of the current primary.
func (r *runner) primaryDir() string {
	if r.failovers%2 == 1 {
		return r.cfg.Standby
	}
	return r.cfg.PGData
}

// lease is the replicas' lease timeout.
func (r *runner) lease() time.Duration {
	if r.cfg.Lease > 0 {
		return r.cfg.Lease
	}
	return 5 * time.Second
}

// pg runs scripts/pg.sh with args.
func (r *runner) pg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "scripts/pg.sh", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg.sh %v: %v: %s", args, err, out)
	}
	return nil
}

// watchEpochs records every epoch and its since, for the commit-order check.
func (r *runner) watchEpochs(ctx context.Context) {
	for ctx.Err() == nil {
		if epoch, _, since, err := r.leader(ctx); err == nil && epoch > 0 {
			r.epochsMu.Lock()
			if _, ok := r.epochs[termKey{0, epoch}]; !ok {
				r.epochs[termKey{0, epoch}] = since
			}
			r.epochsMu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// measureHandover waits for an epoch after old and for the first run of it to start.
func (r *runner) measureHandover(ctx context.Context, old int64, sent time.Time) Handover {
	var h Handover
	deadline := time.Now().Add(15 * time.Second)
	var epoch int64
	for {
		e, _, since, err := r.leader(context.WithoutCancel(ctx))
		if err == nil && e > old {
			epoch, h.Elected = e, since.Sub(sent)
			break
		}
		if time.Now().After(deadline) {
			h.Err = "no new leader within 15 s"
			return h
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var started time.Time
		var slot *time.Time
		err := r.pool.QueryRow(context.WithoutCancel(ctx), `
SELECT started_at, scheduled_at FROM job_runs
WHERE epoch = $1 AND started_at IS NOT NULL
ORDER BY started_at LIMIT 1`, epoch).Scan(&started, &slot)
		if err == nil {
			h.FirstStart = started.Sub(sent)
			// The part of the wait the hand-over caused: a slot that came due after the
			// fault could not have started before it came due anyway.
			due := sent
			if slot != nil && slot.After(sent) {
				due = *slot
			}
			h.BeyondDue = started.Sub(due)
			return h
		}
		time.Sleep(5 * time.Millisecond)
	}
	return h
}
