package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// TestHistoryPagesUseAnIndex checks on 300 000 runs that the API's history pages, first and
// deep, filtered or not, are index scans in id order that stop after the page, not a sort
// of the job's whole history. The rows are laid out adversarially: plan-change's runs are
// all older than the other jobs', which lures a plain "job = $1 ORDER BY id DESC" into
// walking the primary key backwards through 200 000 other rows.
func TestHistoryPagesUseAnIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 300 000 rows")
	}
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	const perJob = 100_000
	statuses := []string{store.StatusSucceeded, store.StatusSucceeded, store.StatusSucceeded, store.StatusFailed, store.StatusSkipped}
	var runs []storetest.RunOpts
	for _, job := range []string{"plan-change", "status-sync", "rounds-open"} {
		for i := 1; i <= perJob; i++ {
			ts := time.Date(2020, 1, 1, 0, i, 0, 0, time.UTC)
			r := storetest.RunOpts{Job: job, Trigger: store.TriggerSchedule, Status: statuses[i%5], ScheduledAt: ts,
				CreatedAt: ts, StartedAt: ts, FinishedAt: ts.Add(time.Second)}
			if i%50 == 0 {
				r.Trigger, r.ScheduledAt = store.TriggerManual, time.Time{}
			}
			runs = append(runs, r)
		}
	}
	storetest.Runs(ctx, t, db.Pool, runs...)
	_, err := db.Pool.Exec(ctx, `ANALYZE job_runs`)
	require.NoError(t, err)
	var deep int64
	require.NoError(t, db.Pool.QueryRow(ctx,
		`SELECT id FROM job_runs WHERE job = 'plan-change' ORDER BY id LIMIT 1 OFFSET $1`, perJob/2).Scan(&deep))
	since := time.Date(2020, 2, 1, 0, 0, 0, 0, time.UTC)

	for name, f := range map[string]store.RunFilter{
		"first page":                {Job: "plan-change", Limit: 51},
		"deep page":                 {Job: "plan-change", BeforeID: deep, Limit: 51},
		"first page, status":        {Job: "plan-change", Status: "failed", Limit: 51},
		"deep page, status":         {Job: "plan-change", Status: "failed", BeforeID: deep, Limit: 51},
		"first page, rare trigger":  {Job: "plan-change", Trigger: "manual", Limit: 51},
		"deep page, rare trigger":   {Job: "plan-change", Trigger: "manual", BeforeID: deep, Limit: 51},
		"deep page, status + since": {Job: "plan-change", Status: "skipped", Since: &since, BeforeID: deep, Limit: 51},
	} {
		sql, args := store.ListRunsSQL(f)
		var plan []byte
		require.NoError(t, db.Pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args...).Scan(&plan), name)
		nodes, exec, buffers := planNodes(t, plan)
		shown := nodes
		if len(shown) > 4 {
			shown = append(shown[:3:3], fmt.Sprintf("… (%d nodes)", len(nodes)))
		}
		t.Logf("%-27s %6.2f ms, %4d buffers: %s", name, exec, buffers, strings.Join(shown, " > "))
		assert.NotContains(t, nodes, "Sort", name)
		assert.NotContains(t, nodes, "Seq Scan", name)
		assert.Contains(t, strings.Join(nodes, ","), "Index", name)
		// A page touches a few hundred buffers at most, not the job's 100 000 rows.
		assert.Less(t, buffers, 2000, name)
	}
}

func planNodes(t *testing.T, plan []byte) (nodes []string, execMS float64, buffers int) {
	var out []struct {
		Plan          map[string]any `json:"Plan"`
		ExecutionTime float64        `json:"Execution Time"`
	}
	require.NoError(t, json.Unmarshal(plan, &out))
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		nodes = append(nodes, n["Node Type"].(string)+" "+strOr(n["Index Name"]))
		if h, ok := n["Shared Hit Blocks"].(float64); ok && len(nodes) == 1 {
			r, _ := n["Shared Read Blocks"].(float64)
			buffers = int(h + r)
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(out[0].Plan)
	for i, n := range nodes {
		nodes[i] = strings.TrimSpace(n)
	}
	return nodes, out[0].ExecutionTime, buffers
}

func strOr(v any) string {
	s, _ := v.(string)
	return s
}
