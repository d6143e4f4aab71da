package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
)

// TestRoundsCreateUsesTheGroupsLocalDate runs rounds-create at instants on either side of a
// local midnight and checks the date of the round it creates.
func TestRoundsCreateUsesTheGroupsLocalDate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, zone, now, date string
	}{
		{"UTC late evening", "UTC", "2024-06-01T23:30:00Z", "2024-06-01"},
		{"UTC+14 already tomorrow", "Pacific/Kiritimati", "2024-06-01T10:30:00Z", "2024-06-02"},
		{"UTC+14 one minute before midnight", "Pacific/Kiritimati", "2024-06-01T09:59:00Z", "2024-06-01"},
		{"UTC-11 still yesterday", "Pacific/Pago_Pago", "2024-06-02T10:59:00Z", "2024-06-01"},
		{"UTC-11 at midnight", "Pacific/Pago_Pago", "2024-06-02T11:00:00Z", "2024-06-02"},
		{"UTC+5:30 before midnight", "Asia/Kolkata", "2024-06-01T18:29:00Z", "2024-06-01"},
		{"UTC+5:30 at midnight", "Asia/Kolkata", "2024-06-01T18:30:00Z", "2024-06-02"},
		{"UTC+5:45 before midnight", "Asia/Kathmandu", "2024-06-01T18:14:00Z", "2024-06-01"},
		{"UTC+5:45 at midnight", "Asia/Kathmandu", "2024-06-01T18:15:00Z", "2024-06-02"},
		// New York springs forward on 2024-03-10 at 02:00 EST (07:00Z) and falls back on
		// 2024-11-03 at 02:00 EDT (06:00Z).
		{"New York eve of spring-forward", "America/New_York", "2024-03-10T04:59:00Z", "2024-03-09"},
		{"New York just after the gap", "America/New_York", "2024-03-10T07:00:00Z", "2024-03-10"},
		{"New York first 01:30 of fall-back", "America/New_York", "2024-11-03T05:30:00Z", "2024-11-03"},
		{"New York eve of fall-back, still EDT", "America/New_York", "2024-11-03T03:59:00Z", "2024-11-02"},
		// Paris springs forward on 2024-03-31 at 02:00 CET (01:00Z) and falls back on
		// 2024-10-27 at 03:00 CEST (01:00Z).
		{"Paris midnight before spring-forward", "Europe/Paris", "2024-03-30T23:00:00Z", "2024-03-31"},
		{"Paris eve of fall-back, CEST", "Europe/Paris", "2024-10-26T21:59:00Z", "2024-10-26"},
		{"Paris midnight of fall-back day", "Europe/Paris", "2024-10-26T22:00:00Z", "2024-10-27"},
		{"Paris second 02:30 of fall-back", "Europe/Paris", "2024-10-27T01:30:00Z", "2024-10-27"},
		// Lord Howe (UTC+10:30, +11 in summer) springs forward by 30 minutes on 2024-10-06.
		{"Lord Howe before midnight", "Australia/Lord_Howe", "2024-10-05T13:29:00Z", "2024-10-05"},
		{"Lord Howe at midnight", "Australia/Lord_Howe", "2024-10-05T13:30:00Z", "2024-10-06"},
		{"Lord Howe summer midnight", "Australia/Lord_Howe", "2024-12-31T13:00:00Z", "2025-01-01"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := roundsDB(t)
			g, _ := group(t, db, tc.zone, "09:00", 1)

			stats := runJob(t, NewRoundsCreate(), roundsEnv(db, mustTime(t, tc.now), nil))

			assert.Equal(t, int64(1), stats.Changed)
			got := rounds(t, db, g)
			require.Len(t, got, 1)
			assert.Equal(t, tc.date, got[0].ScheduledFor.Format("2006-01-02"))
			assert.Equal(t, "scheduled", got[0].Status)
		})
	}
}

func TestRoundsCreateNeverRepeatsOneOfTheLast7Prompts(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	g, p := group(t, db, "UTC", "09:00", 10)
	// An old round used p[7]; the last 7 rounds used p[0]..p[6].
	closedRound(t, db, g, p[7], "2024-06-01", mustTime(t, "2024-06-02T09:00:00Z"))
	history := []int64{p[0], p[1], p[2], p[3], p[4], p[5], p[6]}
	for i, id := range history {
		date := fmt.Sprintf("2024-06-%02d", 10+i)
		closedRound(t, db, g, id, date, mustTime(t, fmt.Sprintf("2024-06-%02dT09:00:00Z", 11+i)))
	}

	stats := runJob(t, NewRoundsCreate(), roundsEnv(db, now, nil))

	require.Equal(t, int64(1), stats.Changed)
	got := rounds(t, db, g)
	created := got[len(got)-1]
	assert.Equal(t, "2024-06-20", created.ScheduledFor.Format("2006-01-02"))
	assert.NotContains(t, history, created.PromptID, "a prompt of the last 7 rounds must not come back")
	// Among the fresh prompts (p[7] used long ago, p[8] and p[9] never), a never-used one
	// comes first, the lowest id on a tie.
	assert.Equal(t, p[8], created.PromptID)
}

func TestRoundsCreateFallsBackToTheLeastRecentlyUsedPrompt(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	g, p := group(t, db, "UTC", "09:00", 3)
	inactive := prompt(t, db, g, false) // never used, but inactive: never chosen
	// All three active prompts were used in the last 7 rounds; p[1] least recently.
	for i, id := range []int64{p[0], p[1], p[2], p[0], p[1], p[2], p[0], p[2]} {
		date := fmt.Sprintf("2024-06-%02d", 10+i)
		closedRound(t, db, g, id, date, mustTime(t, fmt.Sprintf("2024-06-%02dT09:00:00Z", 11+i)))
	}

	stats := runJob(t, NewRoundsCreate(), roundsEnv(db, now, nil))

	require.Equal(t, int64(1), stats.Changed)
	got := rounds(t, db, g)
	created := got[len(got)-1]
	assert.Equal(t, p[1], created.PromptID)
	assert.NotEqual(t, inactive, created.PromptID)
}

func TestRoundsCreateSkipsGroupsWithoutActivePrompt(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	onlyInactive, _ := group(t, db, "UTC", "09:00", 0)
	prompt(t, db, onlyInactive, false)
	noPrompts, _ := group(t, db, "UTC", "09:00", 0)
	ok, _ := group(t, db, "UTC", "09:00", 1)
	logs := &logBuffer{}

	stats := runJob(t, NewRoundsCreate(), roundsEnv(db, now, logs))

	assert.Equal(t, int64(3), stats.Processed)
	assert.Equal(t, int64(1), stats.Changed)
	assert.Equal(t, int64(2), stats.Detail[detailNoPrompt])
	assert.Empty(t, rounds(t, db, onlyInactive))
	assert.Empty(t, rounds(t, db, noPrompts))
	assert.Len(t, rounds(t, db, ok), 1)
	assert.Contains(t, logs.String(), fmt.Sprintf("group_id=%d", noPrompts))
}

// TestRoundsCreateWaits24HoursAfterTheLastRoundClosed checks which groups are due: none
// whose latest round is still scheduled or open, or closed less than 24 hours ago.
func TestRoundsCreateWaits24HoursAfterTheLastRoundClosed(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	ctx := context.Background()
	now := mustTime(t, "2024-06-20T12:00:00Z")

	closed24h, p1 := group(t, db, "UTC", "09:00", 2)
	closedRound(t, db, closed24h, p1[0], "2024-06-18", now.Add(-roundDuration))
	closedRecently, p2 := group(t, db, "UTC", "09:00", 2)
	closedRound(t, db, closedRecently, p2[0], "2024-06-18", now.Add(-roundDuration).Add(time.Second))
	stillScheduled, p3 := group(t, db, "UTC", "09:00", 2)
	closedRound(t, db, stillScheduled, p3[0], "2024-06-10", now.Add(-10*roundDuration))
	insertScheduledRound(t, db, stillScheduled, p3[1], "2024-06-19")
	inactive, _ := group(t, db, "UTC", "09:00", 2)
	_, err := db.Pool.Exec(ctx, `UPDATE groups SET is_active = false WHERE id = $1`, inactive)
	require.NoError(t, err)
	noSettings, _ := group(t, db, "UTC", "09:00", 2)
	_, err = db.Pool.Exec(ctx, `DELETE FROM group_settings WHERE group_id = $1`, noSettings)
	require.NoError(t, err)

	stats := runJob(t, NewRoundsCreate(), roundsEnv(db, now, nil))

	assert.Equal(t, int64(1), stats.Changed)
	assert.Equal(t, int64(1), stats.Detail[detailNoSettings])
	assert.Len(t, rounds(t, db, closed24h), 2, "closed exactly 24 h ago: due")
	assert.Len(t, rounds(t, db, closedRecently), 1, "closed less than 24 h ago: not due")
	assert.Len(t, rounds(t, db, stillScheduled), 2, "latest round still scheduled: not due")
	assert.Empty(t, rounds(t, db, inactive))
	assert.Empty(t, rounds(t, db, noSettings))
}

func TestRoundsCreateIsIdempotentAndBatched(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	var groups []int64
	for range 7 {
		g, _ := group(t, db, "Europe/Paris", "09:00", 2)
		groups = append(groups, g)
	}
	j := &roundsCreate{batchSize: 2} // 4 batches, keyset over ids

	first := runJob(t, j, roundsEnv(db, now, nil))
	second := runJob(t, j, roundsEnv(db, now.Add(59*time.Minute), nil))

	assert.Equal(t, int64(7), first.Processed)
	assert.Equal(t, int64(7), first.Changed)
	assert.Zero(t, second.Changed, "a second run changes nothing")
	assert.Zero(t, second.Processed, "groups with a scheduled round are not even read")
	for _, g := range groups {
		assert.Len(t, rounds(t, db, g), 1)
	}
}

func TestRoundsCreateDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	g1, _ := group(t, db, "UTC", "09:00", 1)
	g2, _ := group(t, db, "UTC", "09:00", 1)
	env := roundsEnv(db, now, nil)
	env.Params.DryRun = true

	stats := runJob(t, NewRoundsCreate(), env)

	assert.Equal(t, int64(2), stats.Changed, "a dry run counts what it would create")
	assert.Empty(t, rounds(t, db, g1))
	assert.Empty(t, rounds(t, db, g2))
}

func TestRoundsCreateConcurrentRunsCreateOneRoundPerGroup(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	var groups []int64
	for range 40 {
		g, _ := group(t, db, "Asia/Kolkata", "09:00", 3)
		groups = append(groups, g)
	}

	var wg sync.WaitGroup
	results := make([]jobcontract.Stats, 4)
	errs := make([]error, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = (&roundsCreate{batchSize: 5}).Run(context.Background(), roundsEnv(db, now, nil))
		}()
	}
	wg.Wait()

	var changed int64
	for i, s := range results {
		require.NoError(t, errs[i])
		changed += s.Changed
	}
	assert.Equal(t, int64(len(groups)), changed, "each group's round is counted once, by the run that created it")
	for _, g := range groups {
		assert.Len(t, rounds(t, db, g), 1, "group %d", g)
	}
}

// TestRoundsCreateSkipsLockedGroups holds one group's lock, as a concurrent run would, and
// checks that the run skips and counts it and creates the others' rounds.
func TestRoundsCreateSkipsLockedGroups(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	ctx := context.Background()
	now := mustTime(t, "2024-06-20T12:00:00Z")
	locked, _ := group(t, db, "UTC", "09:00", 1)
	free, _ := group(t, db, "UTC", "09:00", 1)
	holder, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('rounds-create:' || $1::bigint, 0))`, locked)
	require.NoError(t, err)

	stats := runJob(t, NewRoundsCreate(), roundsEnv(db, now, nil))

	assert.Equal(t, int64(1), stats.SkippedLocked)
	assert.Equal(t, int64(1), stats.Changed)
	assert.Empty(t, rounds(t, db, locked))
	assert.Len(t, rounds(t, db, free), 1)

	require.NoError(t, holder.Rollback(ctx))
	stats = runJob(t, NewRoundsCreate(), roundsEnv(db, now, nil))
	assert.Equal(t, int64(1), stats.Changed, "the skipped group gets its round once its lock is free")
	assert.Len(t, rounds(t, db, locked), 1)
}

func TestRoundsCreateSkipsGroupsWithAnInvalidTimeZone(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-20T12:00:00Z")
	before, _ := group(t, db, "Asia/Tokyo", "09:00", 1)
	mars, _ := group(t, db, "Mars/Olympus_Mons", "09:00", 1)
	local, _ := group(t, db, "Local", "09:00", 1)
	after, _ := group(t, db, "America/Sao_Paulo", "09:00", 1)
	logs := &logBuffer{}

	stats := runJob(t, NewRoundsCreate(), roundsEnv(db, now, logs))

	assert.Equal(t, int64(2), stats.Errors)
	assert.Equal(t, int64(2), stats.Detail[detailBadTimezone])
	assert.Equal(t, int64(2), stats.Changed)
	assert.Len(t, rounds(t, db, before), 1)
	assert.Len(t, rounds(t, db, after), 1)
	assert.Empty(t, rounds(t, db, mars))
	assert.Empty(t, rounds(t, db, local))
	assert.Contains(t, logs.String(), fmt.Sprintf("group_id=%d timezone=Mars/Olympus_Mons", mars))
	assert.Contains(t, logs.String(), fmt.Sprintf("group_id=%d timezone=Local", local))
}

// TestRoundsCreateWritesNothingOnceDeposed runs rounds-create with a stale epoch: its
// fenced transaction must refuse to commit.
func TestRoundsCreateWritesNothingOnceDeposed(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	g, _ := group(t, db, "UTC", "09:00", 1)
	_, err := db.Pool.Exec(context.Background(), `UPDATE scheduler_leader SET epoch = 2`)
	require.NoError(t, err)

	_, err = NewRoundsCreate().Run(context.Background(), roundsEnv(db, mustTime(t, "2024-06-20T12:00:00Z"), nil))

	require.ErrorIs(t, err, store.ErrNotLeader)
	assert.Empty(t, rounds(t, db, g))
}
