package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const (
	fullToken = "ui-full-token"
	readToken = "ui-read-token"
	// stepTimeout bounds every wait for the page: live updates must show within 2 s, and
	// the rest is a margin for a loaded 2-core machine.
	stepTimeout = 10 * time.Second
)

// The dashboard in real headless Chromium against a whole replica: the built-in jobs and
// seven test jobs (21 rows), one browser, one tab per operator.
func TestDashboard(t *testing.T) {
	browser := startBrowser(t)
	extra := []jobs.Job{replicatest.Blocking{JobName: "slow-export"}}
	for i := range 6 {
		extra = append(extra, replicatest.Quick{JobName: fmt.Sprintf("quick-%d", i+1), Schedule: []string{
			"*/15 * * * *", "0 * * * *", "30 6 * * 1-5", "@every 10m", "0 3 1 1 *", "CRON_TZ=Europe/Berlin 0 8 * * *"}[i]})
	}
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken, Extra: extra,
		Paused: []string{"rounds-open", "rounds-close"}})
	shots := screenshotDir(t)
	seedHistory(t, srv)

	operator := newTab(t, browser)
	run(t, operator, signIn(srv.URL, fullToken))

	t.Run("overview lists the jobs and the leader", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/"),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)),
			waitJS(`document.querySelector("#leader").textContent.includes("`+srv.InstanceID+`")`),
			waitJS(`document.querySelector('tr[data-job="rounds-open"] [data-badge="paused"]') !== null`),
			waitJS(`document.querySelector('tr[data-job="plan-change"]').textContent.includes("every day at 02:00 UTC")`))
		screenshot(t, operator, shots, "overview")
	})

	t.Run("a refresh keeps focus and the strip has no interactive content in an image", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/"),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)),
			js(`document.querySelector("#step-down").focus()`),
			refreshed("#leader"), refreshed("#leader"),
			waitJS(`document.activeElement && document.activeElement.id === "step-down"`),
			waitJS(`document.querySelectorAll('[role="img"] a, [role="img"] button').length === 0`),
			waitJS(`[...document.querySelectorAll(".strip a")].every(a => a.getAttribute("aria-label") && !a.hasAttribute("aria-hidden"))`))
		// The job page: a control that has focus keeps it across refreshes too.
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/plan-change"),
			chromedp.WaitVisible(chromedp.CSS("#next-runs li")),
			js(`document.querySelector("#run-now").focus()`),
			refreshed("#schedule-text"), refreshed("#schedule-text"),
			waitJS(`document.activeElement && document.activeElement.id === "run-now"`))
	})

	t.Run("run now makes a run appear and finish without a reload", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-1"),
			chromedp.WaitVisible(chromedp.CSS("#next-runs li")),
			setReload(),
			chromedp.SendKeys(chromedp.CSS("#reason"), "check after deploy"),
			chromedp.Click(chromedp.CSS("#run-now")),
			chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
			chromedp.Click(chromedp.CSS("#confirm-ok")),
			waitJS(`[...document.querySelectorAll("tr[data-run]")].some(r => r.dataset.status === "succeeded" && r.textContent.includes("check after deploy"))`),
			noReload())
		screenshot(t, operator, shots, "job")
		id := latestRun(t, srv.URL, "quick-1")
		run(t, operator,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelector("#run-status").textContent.includes("succeeded")`),
			waitJS(`document.body.textContent.includes("Per tenant")`))
		screenshot(t, operator, shots, "run")
	})

	t.Run("pause then resume change the badge", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-2"),
			chromedp.WaitVisible(chromedp.CSS("#next-runs li")),
			chromedp.Click(chromedp.CSS("#pause")),
			chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
			waitJS(`document.querySelector("#confirm").getAttribute("aria-describedby") === "confirm-text"`),
			chromedp.Click(chromedp.CSS("#confirm-ok")),
			waitJS(`document.querySelector('h1 [data-badge="paused"]') !== null`),
			waitJS(`document.querySelector("#resume").disabled === false`),
			// Pause is now disabled: focus went to its counterpart, not to the page.
			waitJS(`document.activeElement && document.activeElement.id === "resume"`),
			chromedp.Click(chromedp.CSS("#resume")),
			chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
			chromedp.Click(chromedp.CSS("#confirm-ok")),
			waitJS(`document.querySelector('h1 [data-badge="paused"]') === null && document.querySelector("#next-runs li") !== null`),
			waitJS(`document.activeElement && document.activeElement.id === "pause"`))
	})

	t.Run("cancel stops a long run", func(t *testing.T) {
		id := trigger(t, srv.URL, fullToken, "slow-export")
		run(t, operator,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelector("#run-status").textContent.includes("running")`),
			chromedp.Click(chromedp.CSS("#cancel")),
			chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
			chromedp.Click(chromedp.CSS("#confirm-ok")),
			waitJS(`document.querySelector("#run-status").textContent.includes("cancelled")`),
			waitJS(`document.querySelector("#cancel") === null`))
		screenshot(t, operator, shots, "run-cancelled")
	})

	t.Run("locks and audit pages", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/locks"),
			waitJS(`document.body.textContent.includes("scheduler-leader")`))
		screenshot(t, operator, shots, "locks")
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/audit"),
			waitJS(`document.querySelectorAll("table.audit tbody tr").length >= 4`),
			waitJS(`document.body.textContent.includes("check after deploy")`))
		screenshot(t, operator, shots, "audit")
	})

	t.Run("the read-only token sees everything and every action is refused", func(t *testing.T) {
		viewer := newTab(t, browser)
		run(t, viewer, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
		screenshot(t, viewer, shots, "token")
		// The page asked /healthz whether a token is needed: no request answered 401 (each
		// would be an audited refusal without a token, and an error in the browser's console).
		var refusedWithoutToken int
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operator_actions WHERE action = 'refused' AND token_kind = 'none'`).Scan(&refusedWithoutToken))
		assert.Zero(t, refusedWithoutToken, "no /v1 request before the token was entered")
		run(t, viewer, signIn(srv.URL, readToken),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)))
		refused := func(button string) chromedp.Action[chromedp.Void] {
			return chromedp.Steps(
				js(`document.querySelector("#flash").textContent = ""`),
				chromedp.Click(chromedp.CSS(button)),
				chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
				chromedp.Click(chromedp.CSS("#confirm-ok")),
				waitJS(`document.querySelector("#flash").textContent.startsWith("Refused") && document.querySelector("#flash").textContent.includes("read-only token")`),
			)
		}
		run(t, viewer, refused("#step-down"))
		screenshot(t, viewer, shots, "read-only-refused")
		require.Equal(t, http.StatusOK, post(t, srv.URL, fullToken, "/v1/jobs/quick-3/pause"))
		run(t, viewer,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-3"),
			waitJS(`document.querySelector("#resume") && document.querySelector("#resume").disabled === false`),
			refused("#run-now"), refused("#resume"))
		require.Equal(t, http.StatusOK, post(t, srv.URL, fullToken, "/v1/jobs/quick-3/resume"))
		run(t, viewer,
			waitJS(`document.querySelector("#pause").disabled === false`),
			refused("#pause"))
		id := trigger(t, srv.URL, fullToken, "slow-export")
		run(t, viewer,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelector("#cancel") !== null`),
			refused("#cancel"),
			waitJS(`document.querySelector("#run-status").textContent.includes("running")`))
		require.Equal(t, http.StatusAccepted, post(t, srv.URL, fullToken, fmt.Sprintf("/v1/runs/%d/cancel", id)))
		var n int
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operator_actions WHERE token_kind = 'read' AND action <> 'refused'`).Scan(&n))
		assert.Zero(t, n, "the read-only token took no action")
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operator_actions WHERE token_kind = 'read' AND action = 'refused'`).Scan(&n))
		assert.Positive(t, n, "its refused attempts are audited")
	})

	t.Run("a phone-sized screen", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)))
		screenshot(t, phone, shots, "overview-390px")
		viewport(t, phone, shots, "overview-390px-top")
		run(t, phone, chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-1"), chromedp.WaitVisible(chromedp.CSS("tr[data-run]")))
		screenshot(t, phone, shots, "job-390px")
		viewport(t, phone, shots, "job-390px-top")
		// Nothing may be wider than the screen but the scrolling tables.
		overflow, err := chromedp.Run(phone, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		require.NoError(t, err)
		assert.False(t, overflow, "the job page scrolls sideways at 390 px")
	})
}

// startBrowser starts the system's Chromium with a fresh profile, or skips the test when
// there is none (scripts/test.sh installs it).
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no Chromium found: the dashboard's browser tests need Debian's chromium (scripts/test.sh installs it: apt-get install -y chromium)")
	}
	// The background-networking flags keep Chromium from flooding a closed network with
	// connection attempts.
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(browser); err != nil {
		t.Skipf("Chromium at %s cannot start here: %v", path, err)
	}
	return browser
}

// newTab opens a tab of its own: its own sessionStorage, so its own token.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	// The tab lives as long as the context of its first action: a context without timeout.
	require.NoError(t, chromedp.Do(tab))
	return tab
}

func run(t *testing.T, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 4*stepTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// waitJS waits until the expression is true in the page; an element it reads that is not
// there yet counts as false.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	guarded := "(() => { try { return !!(" + expr + ") } catch (e) { return false } })()"
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := chromedp.Poll[bool](guarded, chromedp.WithPollingTimeout(stepTimeout), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, tgt)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return nil
	})
}

// js runs a statement in the page.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](expr)(ctx, tgt)
		return err
	})
}

// signIn opens the dashboard, which asks for the token, and gives it.
func signIn(base, token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#use-token")),
		waitJS(`document.querySelectorAll("tr[data-job]").length > 0`),
	)
}

// refreshed waits for the page's next refresh of the element sel: a marker attribute set on
// it now is one the refresh's patch does not know, so it removes it.
func refreshed(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		js(`document.querySelector(`+strconv.Quote(sel)+`).setAttribute("data-probe", "1")`),
		waitJS(`!document.querySelector(`+strconv.Quote(sel)+`).hasAttribute("data-probe")`))
}

// setReload and noReload prove a change showed without reloading the page: a marker set on
// window survives only as long as the document does.
func setReload() chromedp.Action[chromedp.Void] {
	return js(`window.sameDocument = true`)
}

func noReload() chromedp.Action[chromedp.Void] {
	return waitJS(`window.sameDocument === true`)
}

func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SCHEDULER_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(testdb.RepoRoot(), "tmp", "ui-screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

func screenshot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
}

// viewport saves what the screen shows, without scrolling.
func viewport(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	path := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
}

// seedHistory gives a few jobs twenty past runs of mixed outcomes, as a replica that has
// been up for a while has, so the overview's strips have something to show.
func seedHistory(t *testing.T, srv *replicatest.Server) {
	t.Helper()
	_, err := srv.DB.Pool.Exec(context.Background(), `
		INSERT INTO job_runs (job, trigger, status, scheduled_at, created_at, started_at, finished_at, instance_id, epoch, stats, error)
		SELECT j.name, 'schedule', s.status, date_trunc('hour', now()) - i * interval '1 hour',
		       date_trunc('hour', now()) - i * interval '1 hour', date_trunc('hour', now()) - i * interval '1 hour',
		       date_trunc('hour', now()) - i * interval '1 hour' + (i * 137 % 5000) * interval '1 ms',
		       'console-test-0', 1, '{"processed": 3, "changed": 1}',
		       CASE WHEN s.status = 'failed' THEN 'connection reset by peer' END
		FROM unnest(ARRAY['plan-change', 'status-sync', 'quick-2', 'quick-4']) AS j(name)
		CROSS JOIN generate_series(20, 1, -1) AS i
		CROSS JOIN LATERAL (SELECT CASE WHEN i % 7 = 3 THEN 'failed' WHEN i % 11 = 5 THEN 'skipped'
		                               WHEN i = 13 THEN 'timed_out' ELSE 'succeeded' END AS status) AS s
		ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
}

func post(t *testing.T, base, token, path string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(""))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

func trigger(t *testing.T, base, token, job string) int64 {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/jobs/"+job+"/runs", strings.NewReader(`{"reason": "long export"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var r struct{ ID int64 }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&r))
	require.Positive(t, r.ID)
	return r.ID
}

func latestRun(t *testing.T, base, job string) int64 {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/jobs/"+job+"/runs?limit=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fullToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var page struct{ Runs []struct{ ID int64 } }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&page))
	require.NotEmpty(t, page.Runs)
	return page.Runs[0].ID
}
