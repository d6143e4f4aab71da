package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// The rest of issue 34 in the console: a retrying run says when its next attempt comes; the
// job page links to its sections from the top, history first; an HTTP job's definition shows
// its headers' values and its body.
func TestConsoleRetryWaitAndJobPage(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken})
	requireRuntimeRoutes(t, srv.URL)
	axe := axeSource(t)
	shots := screenshotDir(t)

	body := `{"report": "daily", "rows": [` + strings.Repeat(`{"tenant": "acme", "amount": 12.5}, `, 30) + `{"end": "END-OF-BODY"}]}`
	code, _ := call(t, srv.URL, fullToken, "POST", "/v1/jobs", fmt.Sprintf(`{"name": "billing-push", "schedule": "*/10 * * * *",
		"enabled": false, "http": {"url": "https://example.com/push", "method": "POST",
		"headers": {"Content-Type": "application/json", "X-Team": "billing"}, "body": %s},
		"retry": {"max_attempts": 3, "initial_backoff": "30s"}}`, jsString(body)))
	require.Equal(t, http.StatusCreated, code)

	tab := newTab(t, browser)
	run(t, tab, chromedp.EmulateViewport(1366, 900), signIn(srv.URL, fullToken))

	t.Run("a run waiting between attempts says when the next one comes", func(t *testing.T) {
		id := seedWaitingRun(t, srv, "billing-push")
		run(t, tab,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`/next attempt at \d\d:\d\d:\d\d UTC \(in \d+ s\)/.test(document.querySelector("#next-attempt").textContent)`),
			waitJS(`document.querySelector("#next-attempt").textContent.includes("Attempt 1 failed")`))
		axeClean(t, tab, axe, "a retrying run's page")
		viewport(t, tab, shots, "retry-run-1366")
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelector("#next-attempt") !== null`))
		viewport(t, phone, shots, "retry-run-390")

		_, err := srv.DB.Pool.Exec(context.Background(),
			`UPDATE job_runs SET status = 'failed', finished_at = now(), next_attempt_at = NULL, error = 'failed after 2 attempts' WHERE id = $1`, id)
		require.NoError(t, err)
		run(t, tab, waitJS(`document.querySelector("#run-status").textContent.includes("failed")`),
			waitJS(`document.querySelector("#next-attempt") === null`))
	})

	t.Run("the history is a link away from the top of the job page", func(t *testing.T) {
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/billing-push"),
			waitJS(`document.querySelector("#job-target") !== null && document.querySelector("tr[data-run]") !== null`),
			waitJS(`(() => { const a = document.querySelector('nav.on-page a[data-section="history-h"]');
				return a && a.getBoundingClientRect().bottom <= innerHeight; })()`),
			// Every section the links name is there, and the headings go down one level at a time.
			waitJS(`[...document.querySelectorAll('nav.on-page a')].every((a) => document.getElementById(a.dataset.section))`),
			waitJS(`(() => { let last = 1; for (const e of document.querySelectorAll("main h1, main h2, main h3")) {
				const n = +e.tagName[1]; if (n > last + 1) return false; last = n; } return true; })()`),
			// History comes before the definition, the backfill and the notifications.
			waitJS(`(() => { const y = (s) => document.querySelector(s).getBoundingClientRect().top + scrollY;
				return y("#history-h") < y("#definition-h") && y("#history-h") < y("#backfill") && y("#history-h") < y("#notify-h"); })()`))
		viewport(t, tab, shots, "job-top-1366")
		run(t, tab,
			chromedp.Click(chromedp.CSS(`nav.on-page a[data-section="history-h"]`)),
			waitJS(`document.activeElement === document.querySelector("#history-h")`),
			// Within a pixel: the page scrolls by whole pixels, the heading may sit at a fraction.
			waitJS(`(() => { const r = document.querySelector("#history-h").getBoundingClientRect(); return r.top > -1 && r.bottom < innerHeight + 1; })()`),
			waitJS(`location.hash === "#/jobs/billing-push"`))
		run(t, tab,
			chromedp.Click(chromedp.CSS(`nav.on-page a[data-section="backfill"]`)),
			waitJS(`document.querySelector("#backfill").open && document.activeElement === document.querySelector("#backfill summary")`))
		axeClean(t, tab, axe, "a job page with its section links")
	})

	t.Run("an HTTP job's definition shows its headers' values and its body", func(t *testing.T) {
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/billing-push"),
			waitJS(`document.querySelector("#job-headers").textContent.includes("X-Team: billing")`),
			waitJS(`document.querySelector("#job-headers").textContent.includes("Content-Type: application/json")`),
			waitJS(`document.querySelector("#job-body").dataset.full === "false"`),
			waitJS(`!document.querySelector("#job-body").textContent.includes("END-OF-BODY")`),
			waitJS(`document.querySelector("#job-body").textContent.startsWith('{"report": "daily"')`),
			js(`document.querySelector("#definition-h").scrollIntoView()`))
		screenshot(t, tab, shots, "job-definition-1366")
		run(t, tab,
			chromedp.Click(chromedp.CSS("#job-body-all")),
			waitJS(`document.querySelector("#job-body").dataset.full === "true"`),
			waitJS(`document.querySelector("#job-body").textContent === `+jsString(body)),
			waitJS(`document.activeElement === document.querySelector("#job-body")`),
			// The page's refreshes leave the whole body shown, and the focus on it.
			refreshes(2),
			waitJS(`document.querySelector("#job-body").dataset.full === "true" && document.querySelector("#job-body-all") === null`),
			waitJS(`document.activeElement === document.querySelector("#job-body")`))
		axeClean(t, tab, axe, "an HTTP job's definition")
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/billing-push"),
			waitJS(`document.querySelector("#job-headers") !== null`))
		noSideways(t, phone, "the job page on a phone")
		viewport(t, phone, shots, "job-top-390")
		screenshot(t, phone, shots, "job-full-390")
	})
}

// seedWaitingRun records a running run of job whose first attempt got a 503 and whose next
// attempt is 40 s away, as the leader records it. No epoch: no leader takes it for its own
// orphan or a dead leader's run while the test reads it.
func seedWaitingRun(t *testing.T, srv *replicatest.Server, job string) int64 {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	id := storetest.Run(ctx, t, srv.DB.Pool, storetest.RunOpts{Job: job, Status: store.StatusRunning,
		CreatedAt: now.Add(-2 * time.Second), StartedAt: now.Add(-2 * time.Second), InstanceID: srv.InstanceID,
		DefinitionVersion: 1, NextAttemptAt: now.Add(40 * time.Second)}).ID
	_, err := srv.DB.Pool.Exec(ctx, `
		INSERT INTO run_attempts (run_id, attempt, started_at, duration_ms, status_code, body, error)
		VALUES ($1, 1, now() - interval '2 s', 95, 503, 'upstream busy', 'status 503 is not a success status')`, id)
	require.NoError(t, err)
	return id
}
