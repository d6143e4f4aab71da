package runtimejob_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// A job with parents needs no schedule of its own, and then has no slot of its own: the
// engine's timers find nothing to fire for it.
func TestAfterWithoutSchedule(t *testing.T) {
	j, errs := runtimejob.Check(decode(t, `{"name": "load", "after": ["transform"], "http": {"url": "https://etl.example/load"}}`), env())
	require.Nil(t, errs)
	assert.True(t, j.FollowsOnly)
	assert.True(t, j.Schedule.Next(env().Now).IsZero(), "a follower has no slot of its own")
	assert.Equal(t, []string{"transform"}, j.Def.Parents())

	j, errs = runtimejob.Check(decode(t, `{"name": "load", "namespace": "etl", "schedule": "@every 1h", "after": ["transform"], "http": {"url": "https://etl.example/load"}}`), env())
	require.Nil(t, errs)
	assert.False(t, j.FollowsOnly)
	assert.Equal(t, []string{"etl/transform"}, j.Def.Parents())

	_, errs = runtimejob.Check(decode(t, `{"name": "load", "http": {"url": "https://etl.example/load"}}`), env())
	assert.Contains(t, fields(errs), "schedule", "neither a schedule nor parents")

	// What shapes a schedule's slots is refused without one, not ignored.
	_, errs = runtimejob.Check(decode(t, `{"name": "load", "after": ["transform"], "max_runs": 3, "time_zone": "Europe/Paris",
		"start_at": "2026-12-01T00:00:00Z", "http": {"url": "https://etl.example/load"}}`), env())
	f := fields(errs)
	for _, field := range []string{"max_runs", "time_zone", "start_at"} {
		assert.Contains(t, f[field], "a job with only parents", field)
	}
}

// The hostile or careless names of parents are all refused at once: another namespace's
// job, a name that is not one, the job itself, a parent twice, too many parents.
func TestAfterNamesRefused(t *testing.T) {
	_, errs := runtimejob.Check(decode(t, `{"name": "load", "after": ["billing/invoices", "Bad Name", "load", "x", "x"],
		"http": {"url": "https://etl.example/load"}}`), env())
	f := fields(errs)
	assert.Contains(t, f["after[0]"], "another namespace")
	assert.Contains(t, f["after[1]"], "not a job name")
	assert.Contains(t, f["after[2]"], "load → load")
	assert.Contains(t, f["after[4]"], "named twice")
	assert.Len(t, errs, 4)

	_, errs = runtimejob.Check(decode(t, `{"name": "load", "after": ["a","b","c","d","e","f","g","h","i","j","k"],
		"http": {"url": "https://etl.example/load"}}`), env())
	assert.Contains(t, fields(errs)["after"], "at most 10")
}

// The graph check names every missing parent and the cycle a definition would close, in the
// order the runs would go, and a chain longer than ten jobs.
func TestAfterGraph(t *testing.T) {
	jobs := map[string][]string{"etl/extract": nil, "etl/transform": {"etl/load"}}
	errs := runtimejob.AfterGraph("etl/load", []string{"etl/gone", "etl/transform", "etl/extract"}, jobs)
	f := fields(errs)
	assert.Contains(t, f["after[0]"], `no job "gone" in namespace etl`)
	assert.Contains(t, f["after[1]"], "cycle: load → transform → load")
	assert.Len(t, errs, 2)

	// j0 ← j1 ← ... ← j9 is ten jobs; a child of j9 would make eleven, and so would a new
	// first parent above j0.
	chain := map[string][]string{"j0": nil}
	for i := 1; i < 10; i++ {
		chain[name(i)] = []string{name(i - 1)}
	}
	assert.Empty(t, runtimejob.AfterGraph("j9", []string{"j8"}, chain))
	errs = runtimejob.AfterGraph("j10", []string{"j9"}, chain)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Message, "11 jobs long: j0 → j1 → j2 → j3 → j4 → j5 → j6 → j7 → j8 → j9 → j10")
	chain["top"] = nil
	errs = runtimejob.AfterGraph("j0", []string{"top"}, chain)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Message, "top → j0")
}

func name(i int) string { return fmt.Sprintf("j%d", i) }
