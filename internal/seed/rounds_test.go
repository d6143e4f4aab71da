package seed

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

type roundsCounts struct {
	Groups, Inactive, Zones, Settings, Prompts, ActivePrompts, NoActivePrompt, GapDropTimes int
}

func countRounds(t *testing.T, db *testdb.DB) roundsCounts {
	t.Helper()
	var c roundsCounts
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM groups),
		       (SELECT count(*) FROM groups WHERE NOT is_active),
		       (SELECT count(DISTINCT timezone) FROM groups),
		       (SELECT count(*) FROM group_settings),
		       (SELECT count(*) FROM group_prompts),
		       (SELECT count(*) FROM group_prompts WHERE is_active),
		       (SELECT count(*) FROM groups g
		        WHERE NOT EXISTS (SELECT 1 FROM group_prompts p WHERE p.group_id = g.id AND p.is_active)),
		       (SELECT count(*) FROM group_settings WHERE drop_time = '02:30')`).
		Scan(&c.Groups, &c.Inactive, &c.Zones, &c.Settings, &c.Prompts, &c.ActivePrompts, &c.NoActivePrompt, &c.GapDropTimes))
	return c
}

func TestRoundsSeedsVariedGroupsOnce(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()

	n, err := Rounds(ctx, db.Pool, 1000)
	require.NoError(t, err)
	assert.Equal(t, 1000, n)
	c := countRounds(t, db)
	assert.Equal(t, 1000, c.Groups)
	assert.Equal(t, 100, c.Inactive, "every 10th group is inactive")
	assert.GreaterOrEqual(t, c.Zones, 400, "a large seed covers hundreds of zones")
	assert.Equal(t, 1000, c.Settings)
	assert.Equal(t, 900*4+100*10, c.Prompts, "4 prompts a group, 10 for every 10th")
	assert.Equal(t, 1, c.NoActivePrompt, "group 2 has no active prompt")
	assert.Equal(t, 899*3+100*9, c.ActivePrompts, "all but the last of each group's prompts, none of group 2's")
	assert.Positive(t, c.GapDropTimes, "some drop times fall in DST gaps")
	var hasGapZones bool
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT count(DISTINCT timezone) = 3 FROM groups WHERE timezone IN ('America/New_York', 'Europe/Paris', 'Australia/Lord_Howe')`).
		Scan(&hasGapZones))
	assert.True(t, hasGapZones, "the DST zones of the tests are seeded")

	again, err := Rounds(ctx, db.Pool, 1000)
	require.NoError(t, err)
	assert.Zero(t, again, "a second seed inserts nothing")
	assert.Equal(t, c, countRounds(t, db))

	more, err := Rounds(ctx, db.Pool, 1200)
	require.NoError(t, err)
	assert.Equal(t, 200, more, "a larger seed adds only the missing groups")
	assert.Equal(t, 1080*4+120*10, countRounds(t, db).Prompts)
}

// BenchmarkRounds100k measures seeding the 100 000 groups of the rounds benchmarks.
func BenchmarkRounds100k(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		db, _ := testdb.Open(b, store.Options{})
		b.StartTimer()
		if _, err := Rounds(context.Background(), db.Pool, 100_000); err != nil {
			b.Fatal(err)
		}
	}
}
