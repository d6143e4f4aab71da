// Package replicatest starts a whole replica (replica.New) inside a test: the HTTP API, with
// the dashboard, on a local port, the elector and the run engine, on a test database. The
// console's tests (the command-line client's and the browser's) drive it as an operator would.
package replicatest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/replica"
)

// Options choose the replica's tokens and any jobs besides the built-in ones.
type Options struct {
	Token, ReadToken string
	// Extra jobs run beside the built-in ones, with the schedule of their Defaults.
	Extra []jobcontract.Job
	// Paused names jobs paused before the replica starts (so no catch-up run makes noise).
	Paused []string
	// Runtime configures runtime jobs (allowed addresses, secrets, the SQL role).
	Runtime config.Runtime
	// Log receives the replica's log (nil: discarded), for a test that reads it.
	Log *slog.Logger
}

// Server is a running replica.
type Server struct {
	URL        string
	DB         *testdb.DB
	InstanceID string
	// Jobs is how many jobs the replica runs: the built-in ones and Extra.
	Jobs int
}

// Start starts a replica and returns once it leads. Everything stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	const id = "console-test-1"
	db, _ := testdb.Open(t, store.Options{InstanceID: id, LeaseTimeout: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	for _, name := range o.Paused {
		if err := db.SetPaused(ctx, name, true); err != nil {
			t.Fatalf("replicatest: pause %s: %v", name, err)
		}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	defaults := append(jobs.Defaults(), jobcontract.NewRegistry(o.Extra...).Defaults()...)
	var conf []config.Job
	for _, d := range defaults {
		s, err := schedule.Parse(d.Schedule)
		if err != nil {
			t.Fatalf("replicatest: job %s: %v", d.Name, err)
		}
		conf = append(conf, config.Job{Name: d.Name, Schedule: s, Enabled: true, Timeout: d.Timeout, MinGap: d.MinGap})
	}
	rep, err := replica.New(replica.Config{DB: db.DB, InstanceID: id, Log: log, Extra: o.Extra, Jobs: conf,
		APIToken: o.Token, ReadToken: o.ReadToken, LeaseTimeout: 2 * time.Second,
		InstanceHeartbeat: 500 * time.Millisecond, PollInterval: 200 * time.Millisecond,
		Version: "test", HTTPAddr: "127.0.0.1", Runtime: o.Runtime})
	if err != nil {
		t.Fatal(err)
	}
	watch := rep.Listen()
	done := make(chan struct{})
	go func() { defer close(done); rep.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(rep.Handler())
	t.Cleanup(srv.Close)

	// watch is not read after the first term; its buffer holds the few a test makes.
	select {
	case <-watch.C():
	case <-time.After(30 * time.Second):
		t.Fatal("replicatest: the replica was not elected within 30 s")
	}
	return &Server{URL: srv.URL, DB: db, InstanceID: id, Jobs: len(conf)}
}

// Blocking is a job whose runs last until they are cancelled (or time out after an hour):
// the long run an operator cancels.
type Blocking struct{ JobName string }

func (b Blocking) Name() string { return b.JobName }

func (Blocking) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 0 1 1 *", Timeout: time.Hour}
}

func (Blocking) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	env.Log.Info("blocking until cancelled")
	<-ctx.Done()
	return jobcontract.Stats{}, context.Cause(ctx)
}

// Quick is a job that succeeds at once with a few counts, per-tenant ones among them.
type Quick struct{ JobName, Schedule string }

func (q Quick) Name() string { return q.JobName }

func (q Quick) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: q.Schedule, Timeout: time.Minute}
}

func (Quick) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	st := jobcontract.Stats{Processed: 12, Changed: 5}
	for i := range 3 {
		st.Count(fmt.Sprintf("tenant:%d", i+1), int64(i+1))
	}
	if env.Params.DryRun {
		st.Changed = 0
	}
	return st, nil
}

// Failing is a job whose runs fail at once with an error that says what to do.
type Failing struct{ JobName string }

func (f Failing) Name() string { return f.JobName }

func (Failing) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 0 1 1 *", Timeout: time.Minute}
}

func (Failing) Run(context.Context, *jobcontract.Env) (jobcontract.Stats, error) {
	return jobcontract.Stats{Errors: 1}, errors.New("the export target refused the upload; check its credentials")
}
