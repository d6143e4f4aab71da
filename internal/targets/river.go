package targets

// River jobs: a runtime job's slot becomes one River job in a SQL target's database.
//
// The insert is the "statements" of a SQL run (SQLTarget.Run): it runs on the run's own
// session of the target's login, after the same login checks, in one transaction with the
// slot's marker. A slot that committed is never inserted again (a retry, a recovery after a
// leader died and a catch-up find the marker), and two runs of one slot at once serialise on
// the marker's key, the second rolling its insert back. So a River worker gets one job per
// slot.
//
// The row is written by River's own insert (Client.InsertTx on the run's transaction), not
// by SQL of ours: the columns of river_job, its unique keys and the notification that wakes
// River's producers are River's business and change with its schema versions.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// River's rules for what a job may be called and where it may go (River keeps the kind's
// rule in an internal package; river_job's CHECK bounds the kind's length).
var (
	RiverKindRE  = regexp.MustCompile(`\A[\w][\w\-\[\]<>\/.·:+]+\z`)
	RiverQueueRE = regexp.MustCompile(`^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`)
)

const (
	// RiverMaxKind and RiverMaxQueue are River's bounds on a kind's and a queue's length.
	RiverMaxKind  = 127
	RiverMaxQueue = 64
	// RiverQueueDefault is River's queue when a job names none.
	RiverQueueDefault = river.QueueDefault
)

// RiverJob is the River job a slot inserts.
type RiverJob struct {
	Kind  string
	Args  json.RawMessage // a JSON object, checked by the definition's check
	Queue string
	// Unique asks River not to insert the job while one of the same kind, args and queue
	// still waits or runs (River's unique insert); the slot's run then succeeds and says so.
	Unique bool
}

// RiverInserted says what a slot's insert did.
type RiverInserted struct {
	// JobID is the River job's id: the one inserted, or the one waiting that Unique kept.
	JobID int64
	// Duplicate is set when Unique kept River from inserting a second job.
	Duplicate bool
}

// riverMetadata is what a River job carries of its slot in its metadata, so that a worker
// knows which slot it serves (Key is the slot's Idempotency-Key).
type riverMetadata struct {
	Key   string `json:"scheduler_key"`
	Job   string `json:"scheduler_job"`
	Slot  string `json:"scheduler_slot,omitempty"` // RFC 3339; none for a manual run
	RunID int64  `json:"scheduler_run_id"`
}

// rawArgs is a River job's args as the definition wrote them: River encodes a job's args
// with encoding/json, which takes RawMessage as it is.
type rawArgs struct {
	kind string
	args json.RawMessage
}

func (a rawArgs) Kind() string                 { return a.kind }
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.args, nil }

// riverUniqueStates are the states in which a job keeps a Unique slot from inserting
// another: waiting or running. River's default also counts completed jobs, which would keep
// a job with constant args from ever running twice.
var riverUniqueStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// riverInserter is an insert-only River client: no pool (it inserts on the run's
// transaction only), no queues, no workers, so it starts nothing.
var riverInserter = func() *river.Client[pgx.Tx] {
	c, err := river.NewClient(riverpgxv5.New(nil), &river.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(fmt.Sprintf("targets: make River's insert-only client: %v", err)) // a programming error
	}
	return c
}()

// insertRiver inserts r's River job on tx, the run's transaction.
func (t *SQLTarget) insertRiver(ctx context.Context, tx pgx.Tx, r SQLRun) (RiverInserted, error) {
	j := r.River
	meta := riverMetadata{Key: r.Key, Job: r.Job, RunID: r.RunID}
	if !r.ScheduledAt.IsZero() {
		meta.Slot = r.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	metadata, err := json.Marshal(meta)
	if err != nil {
		return RiverInserted{}, err
	}
	opts := &river.InsertOpts{Queue: j.Queue, Metadata: metadata}
	if j.Unique {
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByQueue: true, ByState: riverUniqueStates}
	}
	res, err := riverInserter.InsertTx(ctx, tx, rawArgs{kind: j.Kind, args: j.Args}, opts)
	switch {
	case isUndefinedTable(err):
		return RiverInserted{}, fmt.Errorf("SQL target %s has no River tables on login %s's search_path: migrate River's schema in the target "+
			"(the river CLI's migrate-up, or rivermigrate) where that login finds it: %w", t.conf.Name, t.Login(), err)
	case err != nil:
		return RiverInserted{}, fmt.Errorf("SQL target %s: insert the River job: %w", t.conf.Name, err)
	case res == nil || res.Job == nil:
		return RiverInserted{}, fmt.Errorf("SQL target %s: the River insert returned no job and no error", t.conf.Name)
	}
	return RiverInserted{JobID: res.Job.ID, Duplicate: res.UniqueSkippedAsDuplicate}, nil
}
