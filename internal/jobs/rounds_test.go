package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/seed"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// roundsDB is a fresh migrated database whose leader row is at epoch 1, so that a run's
// fenced transactions commit without a leader.
func roundsDB(t *testing.T) *testdb.DB {
	t.Helper()
	db, _ := testdb.Open(t, store.Options{InstanceID: "rounds-test"})
	_, err := db.Pool.Exec(context.Background(), `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)
	return db
}

// logBuffer collects a run's log lines; runs may log from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// roundsEnv is a run's environment with the clock fixed at now.
func roundsEnv(db *testdb.DB, now time.Time, logs *logBuffer) *jobcontract.Env {
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil)).With("run_id", int64(0))
	} else {
		log = slog.New(slog.DiscardHandler)
	}
	return &jobcontract.Env{
		Tx: func(ctx context.Context, fn func(pgx.Tx) error) error {
			return db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error { return fn(tx) })
		},
		ReadOnly: db.ReadOnly(),
		Log:      log,
		Now:      now,
	}
}

func runJob(t *testing.T, j jobcontract.Job, env *jobcontract.Env) jobcontract.Stats {
	t.Helper()
	stats, err := j.Run(context.Background(), env)
	require.NoError(t, err)
	return stats
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

// group inserts a group with its settings and `prompts` active prompts, returning the
// group's id and its prompts' ids.
func group(t *testing.T, db *testdb.DB, timezone, dropTime string, prompts int) (int64, []int64) {
	t.Helper()
	ctx := context.Background()
	var id int64
	require.NoError(t, db.Pool.QueryRow(ctx,
		`INSERT INTO groups (name, timezone) VALUES ('g', $1) RETURNING id`, timezone).Scan(&id))
	_, err := db.Pool.Exec(ctx, `INSERT INTO group_settings (group_id, drop_time) VALUES ($1, $2::time)`, id, dropTime)
	require.NoError(t, err)
	var promptIDs []int64
	for range prompts {
		promptIDs = append(promptIDs, prompt(t, db, id, true))
	}
	return id, promptIDs
}

func prompt(t *testing.T, db *testdb.DB, groupID int64, active bool) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`INSERT INTO group_prompts (group_id, text, is_active) VALUES ($1, 'p', $2) RETURNING id`,
		groupID, active).Scan(&id))
	return id
}

// round is one row of daily_rounds as the tests read it.
type round struct {
	ID           int64
	GroupID      int64
	PromptID     int64
	ScheduledFor time.Time
	Status       string
	OpenAt       *time.Time
	CloseAt      *time.Time
	ClosedAt     *time.Time
}

func rounds(t *testing.T, db *testdb.DB, groupID int64) []round {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT id, group_id, group_prompt_id, scheduled_for, status, open_at, close_at, closed_at
		FROM daily_rounds WHERE group_id = $1 ORDER BY scheduled_for`, groupID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (round, error) {
		var r round
		err := row.Scan(&r.ID, &r.GroupID, &r.PromptID, &r.ScheduledFor, &r.Status, &r.OpenAt, &r.CloseAt, &r.ClosedAt)
		return r, err
	})
	require.NoError(t, err)
	return out
}

// closedRound inserts a past round of the group, closed at closedAt.
func closedRound(t *testing.T, db *testdb.DB, groupID, promptID int64, date string, closedAt time.Time) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
		INSERT INTO daily_rounds (group_id, group_prompt_id, scheduled_for, status, open_at, close_at, closed_at)
		VALUES ($1, $2, $3::date, 'closed', $4::timestamptz - interval '24 hours', $4, $4)`,
		groupID, promptID, date, closedAt)
	require.NoError(t, err)
}

// insertScheduledRound inserts a scheduled round of the group for date and returns its id.
func insertScheduledRound(t *testing.T, db *testdb.DB, groupID, promptID int64, date string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		INSERT INTO daily_rounds (group_id, group_prompt_id, scheduled_for) VALUES ($1, $2, $3::date)
		RETURNING id`, groupID, promptID, date).Scan(&id))
	return id
}

func TestRoundTransitionsOnlyGoForward(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	ctx := context.Background()
	g, p := group(t, db, "UTC", "09:00", 1)
	id := insertScheduledRound(t, db, g, p[0], "2024-06-01")

	_, err := db.Pool.Exec(ctx, `UPDATE daily_rounds SET status = 'closed', open_at = now(), close_at = now(), closed_at = now() WHERE id = $1`, id)
	require.ErrorContains(t, err, "scheduled -> closed is not allowed", "a round must open before it closes")

	_, err = db.Pool.Exec(ctx, `UPDATE daily_rounds SET status = 'open', open_at = now(), close_at = now() + interval '1 day' WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE daily_rounds SET status = 'scheduled', open_at = NULL, close_at = NULL WHERE id = $1`, id)
	require.ErrorContains(t, err, "open -> scheduled is not allowed")

	_, err = db.Pool.Exec(ctx, `UPDATE daily_rounds SET status = 'closed', closed_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE daily_rounds SET status = 'open', closed_at = NULL WHERE id = $1`, id)
	require.ErrorContains(t, err, "closed -> open is not allowed")

	_, err = db.Pool.Exec(ctx, `INSERT INTO daily_rounds (group_id, group_prompt_id, scheduled_for) VALUES ($1, NULL, '2024-06-02')`, g)
	require.Error(t, err, "a round without a prompt must be refused")
	assert.Len(t, rounds(t, db, g), 1)
}

// BenchmarkRounds100k runs one daily cycle over 100 000 seeded groups in about 500 zones:
// rounds-create for all of them, rounds-open at an instant where roughly half the zones
// have reached their drop time, then rounds-open and rounds-close a day later.
func BenchmarkRounds100k(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		db, _ := testdb.Open(b, store.Options{InstanceID: "rounds-bench"})
		_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
		require.NoError(b, err)
		_, err = seed.Rounds(ctx, db.Pool, 100_000)
		require.NoError(b, err)
		now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
		b.StartTimer()
		for _, step := range []struct {
			job jobcontract.Job
			at  time.Time
		}{
			{NewRoundsCreate(), now},
			{NewRoundsOpen(), now},
			{NewRoundsOpen(), now.Add(24 * time.Hour)},
			{NewRoundsClose(), now.Add(48 * time.Hour)},
		} {
			start := time.Now()
			stats, err := step.job.Run(ctx, roundsEnv(db, step.at, nil))
			require.NoError(b, err)
			b.Logf("%s: %s processed=%d changed=%d", step.job.Name(), time.Since(start).Round(time.Millisecond), stats.Processed, stats.Changed)
		}
	}
}
