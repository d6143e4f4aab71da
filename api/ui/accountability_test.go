package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// A job's accountability in the console: the strips of its slots over a day and a week with
// the gaps listed, its notification rules and messages, Re-run of a failed slot, and a
// backfill from its dry run to its end; and what a viewer may not do, disabled with why.
func TestConsoleAccountability(t *testing.T) {
	browser := startBrowser(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(receiver.Close)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken,
		Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}}})
	shots := screenshotDir(t)
	axe := axeSource(t)
	requireRuntimeRoutes(t, srv.URL)

	status, out := call(t, srv.URL, fullToken, "POST", "/v1/jobs", fmt.Sprintf(`{"name": "acct", "schedule": "*/10 * * * *",
		"retry": {"max_attempts": 1}, "http": {"url": %q},
		"notify": [{"on": ["failed", "missed", "recovered"], "webhook": {"url": "https://alerts.example.com/hook?token=abc"}}]}`, receiver.URL+"/acct"))
	require.Equal(t, http.StatusCreated, status, "%v", out)
	failed, missed := seedSlots(t, srv, "acct")

	tab := newTab(t, browser)
	run(t, tab, chromedp.EmulateViewport(1366, 900), signIn(srv.URL, fullToken))

	t.Run("the strips show the failed and the missed slot, and the list links them", func(t *testing.T) {
		run(t, tab, chromedp.Navigate(srv.URL+"/ui/#/jobs/acct"))
		for _, w := range []string{"day", "week"} {
			for _, o := range []string{"failed", "missed", "unrecorded", "succeeded"} {
				run(t, tab, waitJS(fmt.Sprintf(`document.querySelector('.slot-window[data-window=%q] .cell[data-outcome=%q]')`, w, o)))
			}
		}
		run(t, tab,
			waitJS(`document.querySelector('.slot-window[data-window="day"] .cell[data-outcome="failed"]').textContent === "✗"`),
			waitJS(`document.querySelector('.slot-window[data-window="day"] .cell[data-outcome="missed"]').textContent === "○"`),
			// A screen reader hears each strip as one image named by its counts.
			waitJS(`document.querySelector('.slot-window[data-window="day"] [role="img"]').getAttribute("aria-label").includes("1 failed")`),
			waitJS(`document.querySelector('.slot-window[data-window="week"] [role="img"]').getAttribute("aria-label").includes("2 failed")`),
			// A week of ten-minute slots is drawn in buckets, at most 150 cells.
			waitJS(`document.querySelectorAll('.slot-window[data-window="week"] .cell').length <= 150`),
			waitJS(fmt.Sprintf(`document.querySelector('#slots tr[data-outcome="failed"] a').getAttribute("href") === "#/runs/%d"`, failed)),
			waitJS(fmt.Sprintf(`document.querySelector('#slots tr[data-outcome="missed"] a').getAttribute("href") === "#/runs/%d"`, missed)),
			waitJS(`document.querySelector('#slots tr[data-outcome="missed"]').textContent.includes("catch-up window passed")`))
	})

	t.Run("the notification rules show the host only, and the messages sent", func(t *testing.T) {
		run(t, tab,
			waitJS(`document.querySelector("#notify-rules").textContent.includes("alerts.example.com")`),
			waitJS(`!document.querySelector("main").textContent.includes("token=abc")`),
			waitJS(`document.querySelectorAll("#deliveries tr[data-delivery]").length === 2`),
			waitJS(fmt.Sprintf(`(() => { const r = document.querySelector('#deliveries tr[data-status="failed"]');
				return r.textContent.includes("HTTP 503") && r.textContent.includes("5") && r.querySelector('a[href="#/runs/%d"]') })()`, failed)))
		viewport(t, tab, shots, "acct-job-1366-top")
		screenshot(t, tab, shots, "acct-job-1366")
		axeClean(t, tab, axe, "a job's slots and notifications")
	})

	t.Run("Re-run queues the failed slot again, as trigger rerun", func(t *testing.T) {
		run(t, tab, confirmByKeyboard(`#slots tr[data-outcome="failed"] button.rerun`),
			waitJS(`document.querySelector("#flash").textContent.includes("a re-run of the slot")`))
		var runs struct {
			Runs []struct {
				ID          int64
				Trigger     string
				ScheduledAt time.Time `json:"scheduled_at"`
			}
		}
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/acct/runs?trigger=rerun", &runs))
		require.Len(t, runs.Runs, 1)
		assert.Equal(t, "rerun", runs.Runs[0].Trigger)
		var orig struct {
			ScheduledAt time.Time `json:"scheduled_at"`
		}
		require.Equal(t, http.StatusOK, get(t, srv.URL, fmt.Sprintf("/v1/runs/%d", failed), &orig))
		assert.True(t, orig.ScheduledAt.Equal(runs.Runs[0].ScheduledAt), "the re-run is of another slot")
		run(t, tab, chromedp.Click(chromedp.CSS("#f-trigger")), js(`document.querySelector("#f-trigger").value = "rerun"; document.querySelector("#f-trigger").dispatchEvent(new Event("change"))`),
			waitJS(fmt.Sprintf(`document.querySelector('tr[data-run="%d"]') && document.querySelectorAll("tr[data-run]").length === 1`, runs.Runs[0].ID)),
			js(`document.querySelector("#f-trigger").value = ""; document.querySelector("#f-trigger").dispatchEvent(new Event("change"))`))
	})

	t.Run("a backfill lists its slots first, then runs them to the end", func(t *testing.T) {
		run(t, tab,
			openByKeyboard("#backfill"),
			// The keyboard, not a click: the list above moves as the re-run ends.
			waitJS(enabled("#bf-preview")),
			js(`document.querySelector("#bf-preview").focus()`),
			chromedp.KeyEvent("\r"),
			waitJS(`document.querySelectorAll("#bf-preview-list li").length >= 1`),
			waitJS(fmt.Sprintf(`[...document.querySelectorAll("#bf-preview-list time")].some((t) => t.getAttribute("datetime") === %q)`, slotOf(t, srv, missed))))
		screenshot(t, tab, shots, "acct-backfill-1366")
		run(t, tab, confirmByKeyboard("#bf-start"),
			waitJS(`document.querySelector("#bf-progress")`))
		run(t, tab, waitJS(`document.querySelector("#bf-progress").dataset.state === "done"`))
		var runs struct{ Runs []struct{ ID int64 } }
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/acct/runs?trigger=backfill", &runs))
		assert.NotEmpty(t, runs.Runs)
	})

	t.Run("a viewer sees it all, and Re-run and Backfill are disabled with why", func(t *testing.T) {
		viewer := newTab(t, browser)
		run(t, viewer, signIn(srv.URL, readToken),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/acct"),
			waitJS(`document.querySelector('#slots tr[data-outcome="failed"] button.rerun')`),
			waitJS(refusedWith(`#slots button.rerun`, "viewer of every namespace")),
			openByKeyboard("#backfill"),
			waitJS(refusedWith("#bf-preview", "viewer of every namespace")),
			waitJS(refusedWith("#bf-start", "viewer of every namespace")))
	})

	t.Run("the job page fits a phone", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/acct"),
			waitJS(`document.querySelectorAll("#deliveries tr[data-delivery]").length === 2`),
			waitJS(`document.querySelector('#slots tr[data-outcome="failed"] button.rerun')`),
			openByKeyboard("#backfill"))
		screenshot(t, phone, shots, "acct-job-390px")
		for _, part := range []string{"slots-h", "problems-h", "backfill", "notify-h"} {
			run(t, phone, js(`document.getElementById("`+part+`").scrollIntoView()`))
			viewport(t, phone, shots, "acct-390px-"+part)
		}
		noSideways(t, phone, "a job's page with its slots")
		// Re-run is a touch target of at least 24 × 24 px (WCAG 2.5.8).
		run(t, phone, waitJS(`[...document.querySelectorAll("#slots button.rerun")].every((b) => { const r = b.getBoundingClientRect(); return r.width >= 24 && r.height >= 24 })`))
	})
}

// seedSlots records a week of job's ten-minute slots as a replica that ran them would have,
// but for a failed slot three hours ago and one two days ago, a missed one five hours ago,
// one skipped, and two with no row at all (unrecorded), and two messages of its notify
// rule: a failed one about the failed run and a sent one about the missed run. It dates
// the job's creation back eight days, so the slots it did not record count. It returns the
// ids of the recent failed and missed runs.
func seedSlots(t *testing.T, srv *replicatest.Server, job string) (failed, missed int64) {
	t.Helper()
	ctx := context.Background()
	// The days' partitions, as a leader that was up all week made them (store.AddRunDaysFor).
	_, err := srv.DB.Pool.Exec(ctx, `
		SELECT d FROM generate_series(current_date - 8, current_date, interval '1 day') AS d
		WHERE CASE WHEN d >= job_run_cutover() AND to_regclass('job_runs_p' || to_char(d, 'YYYYMMDD')) IS NULL
		      THEN scheduler_add_run_day(d::date) ELSE false END`)
	require.NoError(t, err)
	bin := time.Now().Truncate(10 * time.Minute) // date_bin(interval '10 minutes', now(), timestamptz '2000-01-01')
	var runs []storetest.RunOpts
	for i := 2; i <= 7*144-2; i++ {
		if i == 40 || i == 41 {
			continue
		}
		at := bin.Add(time.Duration(-i) * 10 * time.Minute)
		r := storetest.RunOpts{Job: job, Status: store.StatusSucceeded, ScheduledAt: at, CreatedAt: at, StartedAt: at,
			FinishedAt: at.Add(2 * time.Second), InstanceID: "console-test-0", Epoch: storetest.Ptr(int64(1))}
		switch i {
		case 18, 300:
			r.Status, r.Error = store.StatusFailed, "status 500 is not a success status"
		case 30:
			r.Status, r.Reason, r.StartedAt = store.StatusMissed, "catch-up window passed", time.Time{}
		case 50:
			r.Status, r.Reason, r.StartedAt = store.StatusSkipped, "overlap", time.Time{}
		}
		runs = append(runs, r)
	}
	storetest.RunsUnlessTaken(ctx, t, srv.DB.Pool, runs...)
	at := func(i int) string {
		return fmt.Sprintf(`date_bin(interval '10 minutes', now(), timestamptz '2000-01-01') - %d * interval '10 minutes'`, i)
	}
	require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE job = $1 AND scheduled_at = `+at(18), job).Scan(&failed))
	require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE job = $1 AND scheduled_at = `+at(30), job).Scan(&missed))
	_, err = srv.DB.Pool.Exec(ctx, `
		INSERT INTO scheduler_notification_deliveries (job, event, kind, url, run_ids, count, body, status, attempts, last_status, last_error, sent_at)
		VALUES ($1, 'missed', 'webhook', 'https://alerts.example.com/hook?token=abc', ARRAY[$2::bigint], 1, '{}', 'sent', 1, 200, NULL, now() - interval '5 hours'),
		       ($1, 'failed', 'webhook', 'https://alerts.example.com/hook?token=abc', ARRAY[$3::bigint], 1, '{}', 'failed', 5, 503, 'status 503 is not a success status', NULL)`,
		job, missed, failed)
	require.NoError(t, err)
	// The version moves too, so every replica reads the job's creation again.
	_, err = srv.DB.Pool.Exec(ctx, `UPDATE job_definitions SET created_at = now() - interval '8 days', version = version + 1 WHERE name = $1`, job)
	require.NoError(t, err)
	return failed, missed
}

// slotOf is run id's slot time as the API writes it.
func slotOf(t *testing.T, srv *replicatest.Server, id int64) string {
	t.Helper()
	var r struct {
		ScheduledAt string `json:"scheduled_at"`
	}
	require.Equal(t, http.StatusOK, get(t, srv.URL, fmt.Sprintf("/v1/runs/%d", id), &r))
	return r.ScheduledAt
}
