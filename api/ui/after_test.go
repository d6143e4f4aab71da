package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// Issue 46 in the console: a job's page names its parents and children, each a link, and a
// run's page links the runs it came from and the runs it caused; at 1366 px and on a phone.
func TestConsoleShowsAfterChains(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken})
	requireRuntimeRoutes(t, srv.URL)
	axe := axeSource(t)
	shots := screenshotDir(t)
	for _, def := range []string{
		`{"name": "extract", "schedule": "0 * * * *", "enabled": false, "http": {"url": "https://example.com/extract"}}`,
		`{"name": "transform", "after": ["extract"], "http": {"url": "https://example.com/transform"}}`,
	} {
		code, _ := call(t, srv.URL, fullToken, "POST", "/v1/jobs", def)
		require.Equal(t, http.StatusCreated, code)
	}
	// extract's slot an hour ago succeeded, and transform ran after it.
	ctx := context.Background()
	slot := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	parent := storetest.Run(ctx, t, srv.DB.Pool, storetest.RunOpts{Job: "extract", Status: store.StatusSucceeded,
		ScheduledAt: slot, StartedAt: slot, FinishedAt: slot.Add(time.Second)})
	var child int64
	require.NoError(t, srv.DB.Pool.QueryRow(ctx, `INSERT INTO job_runs (id, job, trigger, status, scheduled_at, started_at, finished_at, parent_run_ids)
		VALUES (job_run_id($1), 'transform', 'after', 'succeeded', $1, $2, $2, ARRAY[$3::bigint]) RETURNING id`,
		slot, slot.Add(2*time.Second), parent.ID).Scan(&child))

	tab := newTab(t, browser)
	run(t, tab, chromedp.EmulateViewport(1366, 900), signIn(srv.URL, fullToken),
		chromedp.Navigate(srv.URL+"/ui/#/jobs/transform"),
		waitJS(`document.querySelector("#job-after a[href$='/jobs/extract']") !== null`),
		waitJS(`document.querySelector("#next-runs") === null && document.body.textContent.includes("it runs after its parents succeed")`))
	axeClean(t, tab, axe, "a child's job page")
	viewport(t, tab, shots, "after-job-1366")
	run(t, tab, chromedp.Navigate(srv.URL+"/ui/#/jobs/extract"),
		waitJS(`document.querySelector("#job-children a[href$='/jobs/transform']") !== null`))
	run(t, tab, chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, child)),
		waitJS(fmt.Sprintf(`document.querySelector("#run-parents a[href$='/runs/%d']") !== null`, parent.ID)))
	axeClean(t, tab, axe, "a child's run page")
	viewport(t, tab, shots, "after-run-1366")
	run(t, tab, chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, parent.ID)),
		waitJS(fmt.Sprintf(`document.querySelector("#run-caused a[href$='/runs/%d']") !== null`, child)))

	phone := newTab(t, browser)
	run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
		chromedp.Navigate(srv.URL+"/ui/#/jobs/transform"),
		waitJS(`document.querySelector("#job-after a") !== null`))
	viewport(t, phone, shots, "after-job-390")
	run(t, phone, chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, child)),
		waitJS(`document.querySelector("#run-parents a") !== null`))
	viewport(t, phone, shots, "after-run-390")
}
