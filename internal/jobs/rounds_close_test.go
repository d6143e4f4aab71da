package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// openRoundClosingAt inserts an open round of a new group, due to close at closeAt.
func openRoundClosingAt(t *testing.T, db *testdb.DB, closeAt time.Time) int64 {
	t.Helper()
	g, p := group(t, db, "UTC", "09:00", 1)
	_, err := db.Pool.Exec(context.Background(), `
		INSERT INTO daily_rounds (group_id, group_prompt_id, scheduled_for, status, open_at, close_at)
		VALUES ($1, $2, ($3::timestamptz - interval '24 hours')::date, 'open', $3::timestamptz - interval '24 hours', $3)`,
		g, p[0], closeAt)
	require.NoError(t, err)
	return g
}

func TestRoundsCloseClosesExactlyTheDueRounds(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-01T12:00:00Z")
	var due, notDue []int64
	for _, offset := range []time.Duration{-48 * time.Hour, -time.Hour, -time.Second, 0, -time.Minute} {
		due = append(due, openRoundClosingAt(t, db, now.Add(offset)))
	}
	for _, offset := range []time.Duration{time.Second, time.Hour} {
		notDue = append(notDue, openRoundClosingAt(t, db, now.Add(offset)))
	}
	j := &roundsClose{batchSize: 2} // 3 batches, keyset over (close_at, id)

	first := runJob(t, j, roundsEnv(db, now, nil))
	second := runJob(t, j, roundsEnv(db, now.Add(time.Millisecond), nil))

	assert.Equal(t, int64(len(due)), first.Processed, "only due rounds are read")
	assert.Equal(t, int64(len(due)), first.Changed)
	assert.Zero(t, second.Changed, "a second run changes nothing")
	for _, g := range due {
		r := rounds(t, db, g)[0]
		assert.Equal(t, "closed", r.Status)
		require.NotNil(t, r.ClosedAt)
		assert.True(t, now.Equal(*r.ClosedAt), "closed_at is the run's clock")
	}
	for _, g := range notDue {
		r := rounds(t, db, g)[0]
		assert.Equal(t, "open", r.Status)
		assert.Nil(t, r.ClosedAt)
	}
}

func TestRoundsCloseDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-01T12:00:00Z")
	g := openRoundClosingAt(t, db, now.Add(-time.Minute))
	env := roundsEnv(db, now, nil)
	env.Params.DryRun = true

	stats := runJob(t, NewRoundsClose(), env)

	assert.Equal(t, int64(1), stats.Changed, "a dry run counts what it would close")
	assert.Equal(t, "open", rounds(t, db, g)[0].Status)
}

func TestRoundsCloseSkipsLockedGroups(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	ctx := context.Background()
	now := mustTime(t, "2024-06-01T12:00:00Z")
	locked := openRoundClosingAt(t, db, now.Add(-time.Minute))
	free := openRoundClosingAt(t, db, now.Add(-time.Minute))
	holder, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('rounds-close:' || $1::bigint, 0))`, locked)
	require.NoError(t, err)

	stats := runJob(t, NewRoundsClose(), roundsEnv(db, now, nil))

	assert.Equal(t, int64(1), stats.SkippedLocked)
	assert.Equal(t, int64(1), stats.Changed)
	assert.Equal(t, "open", rounds(t, db, locked)[0].Status)
	assert.Equal(t, "closed", rounds(t, db, free)[0].Status)
}

// TestRoundsDailyCycle drives one group through the three jobs with an injected clock:
// created for its local date, opened at its drop time, closed 24 hours later, and given its
// next round only 24 hours after that.
func TestRoundsDailyCycle(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	g, _ := group(t, db, "Asia/Kolkata", "20:00", 3) // 20:00 IST = 14:30Z
	run := func(j jobcontract.Job, now string) jobcontract.Stats {
		return runJob(t, j, roundsEnv(db, mustTime(t, now), nil))
	}

	assert.Equal(t, int64(1), run(NewRoundsCreate(), "2024-06-01T00:00:00Z").Changed)
	assert.Zero(t, run(NewRoundsOpen(), "2024-06-01T14:25:00Z").Changed)
	assert.Equal(t, int64(1), run(NewRoundsOpen(), "2024-06-01T14:30:00Z").Changed)
	assert.Zero(t, run(NewRoundsCreate(), "2024-06-02T00:00:00Z").Changed, "the round is still open")
	assert.Zero(t, run(NewRoundsClose(), "2024-06-02T14:25:00Z").Changed)
	assert.Equal(t, int64(1), run(NewRoundsClose(), "2024-06-02T14:30:00Z").Changed)
	assert.Zero(t, run(NewRoundsCreate(), "2024-06-03T14:00:00Z").Changed, "closed less than 24 h ago")
	assert.Equal(t, int64(1), run(NewRoundsCreate(), "2024-06-03T15:00:00Z").Changed)
	// 2024-06-03T15:00Z is already past 20:00 IST: the new round opens at the next run.
	assert.Equal(t, int64(1), run(NewRoundsOpen(), "2024-06-03T15:05:00Z").Changed)

	got := rounds(t, db, g)
	require.Len(t, got, 2)
	assert.Equal(t, "2024-06-01", got[0].ScheduledFor.Format("2006-01-02"))
	assert.Equal(t, "closed", got[0].Status)
	assert.Equal(t, "2024-06-03", got[1].ScheduledFor.Format("2006-01-02"))
	assert.Equal(t, "open", got[1].Status)
	assert.NotEqual(t, got[0].PromptID, got[1].PromptID, "the next round uses a fresh prompt")
}
