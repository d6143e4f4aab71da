package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testpace"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const (
	fullToken = "ui-full-token"
	readToken = "ui-read-token"
	// stepTimeout bounds every wait for the page on an idle machine: live updates must show
	// within 2 s, and the rest is a margin for the race detector. Every wait stretches it by
	// the machine's pace while it waits (internal/testpace): on a machine that other work
	// slows down, the page is as late as everything else.
	stepTimeout = 10 * time.Second
)

// The dashboard in real headless Chromium against a whole replica: the built-in jobs and
// seven test jobs (21 rows), one browser, one tab per operator.
func TestDashboard(t *testing.T) {
	browser := startBrowser(t)
	extra := []jobcontract.Job{replicatest.Blocking{JobName: "slow-export"}}
	for i := range 6 {
		extra = append(extra, replicatest.Quick{JobName: fmt.Sprintf("quick-%d", i+1), Schedule: []string{
			"*/15 * * * *", "0 * * * *", "30 6 * * 1-5", "@every 10m", "0 3 1 1 *", "CRON_TZ=Europe/Berlin 0 8 * * *"}[i]})
	}
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken, Extra: extra,
		Paused: []string{"rounds-open", "rounds-close"}})
	shots := screenshotDir(t)
	seedHistory(t, srv)

	axe := axeSource(t)

	operator := newTab(t, browser)
	t.Run("no request answers 401 before the token is given", func(t *testing.T) {
		net := watch(t, operator)
		run(t, operator, chromedp.Navigate(srv.URL+"/ui/"), visible("#token"))
		axeClean(t, operator, axe, "the token form")
		run(t, operator, signIn(srv.URL, fullToken), refreshes(1))
		assert.NotContains(t, net.statuses("/v1/"), int64(http.StatusUnauthorized))
		assert.NotEmpty(t, net.statuses("/v1/jobs"), "the overview loads once the token is given")
		assert.Empty(t, net.errorLines(), "the console shows errors")
	})

	t.Run("overview lists the jobs and the leader", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/"),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)),
			waitJS(`document.querySelector("#leader").textContent.includes("`+srv.InstanceID+`")`),
			waitJS(`document.querySelector('tr[data-job="rounds-open"] [data-badge="paused"]') !== null`),
			waitJS(`document.querySelector('tr[data-job="plan-change"]').textContent.includes("every day at 02:00 UTC")`))
		screenshot(t, operator, shots, "overview")
		axeClean(t, operator, axe, "the overview")
	})

	t.Run("the last-20 strip is a list of runs a keyboard reaches", func(t *testing.T) {
		strip := `document.querySelector('tr[data-job="plan-change"] .strip')`
		run(t, operator,
			waitJS(strip+`.querySelectorAll("a").length === 20`),
			// No link hides inside an image or from assistive technology, and each says which run it is.
			waitJS(`document.querySelectorAll('[role="img"] a, a[aria-hidden="true"]').length === 0`),
			waitJS(`[...`+strip+`.querySelectorAll("a")].every((a) => /^run #\d+: /.test(a.getAttribute("aria-label")))`),
			// One tab stop per strip, on the newest run; the arrow keys move along it.
			waitJS(`[...`+strip+`.querySelectorAll("a")].filter((a) => a.tabIndex === 0).length === 1`),
			js(strip+`.querySelector('a[tabindex="0"]').focus()`),
			waitJS(`document.activeElement === `+strip+`.querySelector("li:last-child a")`),
			chromedp.KeyEvent(kb.ArrowLeft),
			waitJS(`document.activeElement === `+strip+`.querySelector("li:nth-last-child(2) a")`),
			chromedp.KeyEvent(kb.Home),
			waitJS(`document.activeElement === `+strip+`.querySelector("li:first-child a")`))
		viewport(t, operator, shots, "focus-strip")
	})

	t.Run("focus stays where the operator put it while the overview refreshes", func(t *testing.T) {
		run(t, operator,
			keepsFocus(`document.querySelector("#step-down")`),
			keepsFocus(`document.querySelector('tr[data-job="plan-change"] td a')`),
			keepsFocus(`document.querySelector('tr[data-job="quick-2"] .strip li:nth-child(5) a')`))
	})

	t.Run("a re-poll of an unchanged answer is a 304", func(t *testing.T) {
		net := watch(t, operator)
		run(t, operator, refreshes(2))
		assert.Contains(t, net.statuses("/v1/jobs"), int64(http.StatusNotModified))
	})

	t.Run("run now makes a run appear and finish without a reload", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-1"),
			visible("#next-runs li"),
			setReload(),
			chromedp.SendKeys(chromedp.CSS("#reason"), "check after deploy"),
			chromedp.Click(chromedp.CSS("#run-now")),
			visible("#confirm-ok"),
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
		axeClean(t, operator, axe, "a run's page")
	})

	t.Run("pause then resume change the badge, and the focus returns to the button", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-2"),
			visible("#next-runs li"),
			confirmByKeyboard("#pause"),
			waitJS(`document.querySelector('h1 [data-badge="paused"]') !== null`),
			waitJS(enabled("#resume")),
			refreshes(2),
			focusedOn("#pause"))
		viewport(t, operator, shots, "focus-after-pause")
		run(t, operator,
			confirmByKeyboard("#resume"),
			waitJS(`document.querySelector('h1 [data-badge="paused"]') === null && document.querySelector("#next-runs li") !== null`),
			refreshes(2),
			focusedOn("#resume"))
	})

	t.Run("the dialog describes itself and gives the focus back after a step-down", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/"),
			waitJS(`document.querySelector("#leader").textContent.includes("`+srv.InstanceID+`")`),
			waitJS(`document.querySelector("#confirm").getAttribute("aria-describedby") === "confirm-text"`),
			js(`window.epochBefore = document.querySelector("#leader").textContent`),
			confirmByKeyboard("#step-down"),
			waitJS(`document.querySelector("#flash").textContent.includes("step down")`),
			waitJS(`document.querySelector("#leader").textContent.includes("`+srv.InstanceID+`") && document.querySelector("#leader").textContent !== window.epochBefore`),
			refreshes(2),
			focusedOn("#step-down"))
	})

	t.Run("focus stays on a run and on the pager while the history grows", func(t *testing.T) {
		var runs []storetest.RunOpts
		for i := 1; i <= 30; i++ {
			at := time.Now().Add(time.Duration(-i) * time.Minute)
			runs = append(runs, storetest.RunOpts{Job: "quick-6", Status: store.StatusSucceeded, CreatedAt: at, StartedAt: at,
				FinishedAt: at.Add(20 * time.Millisecond), InstanceID: "console-test-0", Epoch: storetest.Ptr(int64(1))})
		}
		storetest.Runs(context.Background(), t, srv.DB.Pool, runs...)
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-6"),
			waitJS(`document.querySelectorAll("tr[data-run]").length === 25`),
			keepsFocus(`document.querySelector("#older")`),
			js(`window.focusedForTest = document.querySelector("tr[data-run] a"); window.focusedForTest.focus()`))
		first := latestRun(t, srv.URL, "quick-6")
		id := trigger(t, srv.URL, fullToken, "quick-6")
		run(t, operator,
			waitJS(fmt.Sprintf(`document.querySelector("tr[data-run]").dataset.run === "%d"`, id)),
			refreshes(2),
			waitJS(fmt.Sprintf(`document.activeElement === window.focusedForTest && document.activeElement.closest("tr").dataset.run === "%d"`, first)))
		axeClean(t, operator, axe, "a job's page")
	})

	t.Run("cancel stops a long run", func(t *testing.T) {
		id := trigger(t, srv.URL, fullToken, "slow-export")
		run(t, operator,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelector("#run-status").textContent.includes("running")`),
			confirmByKeyboard("#cancel"),
			waitJS(`document.querySelector("#run-status").textContent.includes("cancelled")`),
			waitJS(`document.querySelector("#cancel") === null`),
			// The button gone, the focus goes to the run's heading, not to the page's body.
			waitJS(`document.activeElement === document.querySelector("h1")`))
		screenshot(t, operator, shots, "run-cancelled")
	})

	t.Run("a finished run's page stops polling", func(t *testing.T) {
		// The page's own timer is the clock: a page that no longer polls still ticks every
		// second to move its relative times on, and three ticks are more than two polling
		// intervals. (A second tab was the clock before: after a slow first load its
		// refreshes come ten times that load apart, past the step's timeout.)
		id := latestRun(t, srv.URL, "slow-export")
		// The page's requests for the run are counted as they are made. (Resource timing
		// entries, which this counted before, are added after the answer is used: the
		// entry of the very fetch that showed "cancelled" could land after the count was
		// cleared, and the test failed once.) The hash changes in the same document, so
		// the counter stays.
		run(t, operator,
			js(fmt.Sprintf(`window.runFetches = 0; window.realFetch = window.realFetch || window.fetch;
				window.fetch = (url, opts) => { if (String(url).endsWith("/v1/runs/%d")) window.runFetches++; return window.realFetch(url, opts); }`, id)),
			// The tab shows this run already (the previous step cancelled it): leave, and
			// come back to it with the counter in place.
			js(`location.hash = "#/locks"`), waitJS(`document.body.textContent.includes("scheduler-leader")`),
			js(fmt.Sprintf(`location.hash = "#/runs/%d"`, id)),
			waitJS(`document.querySelector("#run-status").textContent.includes("cancelled")`))
		before, err := chromedp.Run(operator, chromedp.Evaluate[int](`window.runFetches`))
		require.NoError(t, err)
		require.Positive(t, before, "the run page fetched the run")
		run(t, operator, js(`window.ticks = 0; window.realTickTimes = window.realTickTimes || window.tickTimes;
				window.tickTimes = () => { window.ticks++; window.realTickTimes(); }`), waitJS(`window.ticks >= 3`))
		after, err := chromedp.Run(operator, chromedp.Evaluate[int](`window.runFetches`))
		require.NoError(t, err)
		assert.Equal(t, before, after, "the finished run was fetched again")
	})

	t.Run("locks and audit pages", func(t *testing.T) {
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/locks"),
			waitJS(`document.body.textContent.includes("scheduler-leader")`))
		screenshot(t, operator, shots, "locks")
		axeClean(t, operator, axe, "the locks page")
		run(t, operator,
			chromedp.Navigate(srv.URL+"/ui/#/audit"),
			waitJS(`document.querySelectorAll("table.audit tbody tr").length >= 4`),
			waitJS(`document.body.textContent.includes("check after deploy")`),
			keepsFocus(`document.querySelector("table.audit a")`))
		screenshot(t, operator, shots, "audit")
		axeClean(t, operator, axe, "the audit page")
	})

	t.Run("the read-only token sees everything and every action is disabled, saying why", func(t *testing.T) {
		viewer := newTab(t, browser)
		run(t, viewer, chromedp.Navigate(srv.URL+"/ui/"), visible("#token"))
		screenshot(t, viewer, shots, "token")
		run(t, viewer, signIn(srv.URL, readToken),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)),
			waitJS(`document.querySelector("#session").textContent.includes("viewer of every namespace")`))
		// A control it may not use says so before it is pressed, and pressing it sends nothing.
		untouchable := func(button, why string) chromedp.Action[chromedp.Void] {
			return chromedp.Steps(
				waitJS(refusedWith(button, why)),
				js(`document.querySelector("#flash").textContent = ""`),
				chromedp.Click(chromedp.CSS(button)),
				refreshes(1),
				waitJS(`!document.querySelector("#confirm").open && document.querySelector("#flash").textContent === ""`),
			)
		}
		run(t, viewer, untouchable("#step-down", "Only an admin"), untouchable("#new-job", "viewer of every namespace"))
		screenshot(t, viewer, shots, "read-only-disabled")
		require.Equal(t, http.StatusOK, post(t, srv.URL, fullToken, "/v1/jobs/quick-3/pause"))
		run(t, viewer,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/quick-3"),
			waitJS(`document.querySelector('h1 [data-badge="paused"]') !== null`),
			untouchable("#run-now", "viewer of every namespace"), untouchable("#resume", "viewer of every namespace"))
		viewport(t, viewer, shots, "read-only-job")
		require.Equal(t, http.StatusOK, post(t, srv.URL, fullToken, "/v1/jobs/quick-3/resume"))
		run(t, viewer,
			waitJS(`document.querySelector('h1 [data-badge="paused"]') === null`),
			untouchable("#pause", "viewer of every namespace"))
		id := trigger(t, srv.URL, fullToken, "slow-export")
		run(t, viewer,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelector("#cancel") !== null`),
			untouchable("#cancel", "viewer of every namespace"),
			waitJS(`document.querySelector("#run-status").textContent.includes("running")`))
		require.Equal(t, http.StatusAccepted, post(t, srv.URL, fullToken, fmt.Sprintf("/v1/runs/%d/cancel", id)))
		var n int
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operator_actions WHERE token_kind = 'read'`).Scan(&n))
		assert.Zero(t, n, "the read-only token's console sent no action, so none was refused either")
		// The page knew a token was needed before its first request: nothing was refused
		// for want of one.
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operator_actions WHERE action = 'refused' AND token_kind = 'none'`).Scan(&n))
		assert.Zero(t, n, "no /v1 request before the token was entered")
	})

	t.Run("a phone-sized screen", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)))
		screenshot(t, phone, shots, "overview-390px")
		viewport(t, phone, shots, "overview-390px-top")
		slow := slowAPI(t, srv.URL, 500*time.Millisecond)
		run(t, phone, signIn(slow, fullToken), recordLayoutShifts(), chromedp.Navigate("about:blank"),
			chromedp.Navigate(slow+"/ui/#/jobs/quick-1"), visible("tr[data-run]"), refreshes(1))
		shift, err := chromedp.Run(phone, chromedp.Evaluate[float64](`window.layoutShiftTotal()`))
		require.NoError(t, err)
		t.Logf("the job page's Cumulative Layout Shift at 390 px: %.3f", shift)
		assert.Less(t, shift, 0.05, "the job page's layout shifts as it loads (Cumulative Layout Shift)")
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

// newTab opens a tab of its own: its own sessionStorage, so its own token. Each of its
// documents keeps its last console errors, uncaught errors and unhandled rejections in
// window.testErrors, for a failed wait to report.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	// The tab lives as long as the context of its first action: a context without timeout.
	require.NoError(t, chromedp.Do(tab, chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tgt, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
  const errors = window.testErrors = [];
  const keep = (s) => { errors.push(String(s).slice(0, 300)); if (errors.length > 10) errors.shift(); };
  const consoleError = console.error;
  console.error = function (...args) { keep(args.join(" ")); return consoleError.apply(this, args); };
  addEventListener("error", (e) => keep("uncaught " + e.message + " at " + e.filename + ":" + e.lineno));
  addEventListener("unhandledrejection", (e) => keep("unhandled rejection " + ((e.reason && e.reason.stack) || e.reason)));
})();`})
		return err
	})))
	return tab
}

// run does the actions in the tab. Each wait among them has its own deadline; the whole
// run has one too, as some actions (a click waits for its element) have none of their own.
// Both follow the machine's pace (internal/testpace).
func run(t *testing.T, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := testpace.Context(tab, 4*stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		require.NoError(t, err, "the run's context: %v; the page then: %s", context.Cause(ctx), tabState(tab, ""))
	}
}

// waitJS waits until the expression is true in the page; an element it reads that is not
// there yet counts as false. Every wait for the page is this one: its deadline is
// stepTimeout at the machine's pace (internal/testpace), and when it passes the error says
// what the page showed (pageState).
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	guarded := "(() => { try { return !!(" + expr + ") } catch (e) { return false } })()"
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		deadline := testpace.Start(stepTimeout)
		for {
			// An evaluation that fails (the document is being replaced) counts as false too.
			ok, err := chromedp.Evaluate[bool](guarded)(ctx, tgt)
			switch {
			case err == nil && ok:
				return nil
			case ctx.Err() != nil:
				return fmt.Errorf("waiting for %s: %v; the page then: %s", expr, context.Cause(ctx), pageState(ctx, tgt, expr))
			case deadline.Passed():
				return fmt.Errorf("waiting for %s: %s; the page then: %s", expr, deadline, pageState(ctx, tgt, expr))
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// visible waits until the element sel is shown.
func visible(sel string) chromedp.Action[chromedp.Void] {
	return waitJS(fmt.Sprintf(`document.querySelector(%q).getClientRects().length > 0`, sel))
}

// settled waits until the page has handled the events sent to it before: a task it queues
// now runs after theirs. A check that something did not happen comes after it.
func settled() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`new Promise((done) => setTimeout(() => done(true)))`, chromedp.EvalAwaitPromise)(ctx, tgt)
		return err
	})
}

// sendsNothing does act and checks that the page sent no write for it, once the page has
// handled it: a refusal could show only in the answer to one. (The form's fetches are
// made when it acts, through window.fetch.)
func sendsNothing(act chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		js(`window.writesForTest = 0; window.realFetchForTest = window.realFetchForTest || window.fetch;
			window.fetch = (url, opts) => { if (opts && opts.method && opts.method !== "GET") window.writesForTest++; return window.realFetchForTest(url, opts); }`),
		act,
		settled(),
		chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			n, err := chromedp.Evaluate[int](`window.writesForTest`)(ctx, tgt)
			if err == nil && n != 0 {
				err = fmt.Errorf("the page sent %d writes; the page then: %s", n, pageState(ctx, tgt, ""))
			}
			return err
		}),
	)
}

// selectorsIn finds the CSS selectors an expression queries, for a failed wait to show
// what they find.
var selectorsIn = regexp.MustCompile(`querySelector(?:All)?\(("(?:[^"\\]|\\.)*"|'[^']*')\)`)

// pageState says, for a failed wait, where the page was, what it showed, what its refresh
// loop did, the console's last errors, and what each selector expr queries finds. It reads
// the page on a context of its own: the wait's may have ended.
func pageState(ctx context.Context, tgt *chromedp.Target, expr string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), testpace.Scaled(5*time.Second))
	defer cancel()
	sels := []string{}
	for _, m := range selectorsIn.FindAllStringSubmatch(expr, 5) {
		if sel, err := strconv.Unquote(m[1]); err == nil {
			sels = append(sels, sel)
		} else {
			sels = append(sels, strings.Trim(m[1], "'"))
		}
	}
	sel, _ := json.Marshal(sels)
	state, err := chromedp.Evaluate[string](`(() => { try { return JSON.stringify({url: location.href,
		refreshes: document.querySelector("main").dataset.refreshes, inFlight, again, timer: !!timer, lastRefreshMs,
		hidden: document.hidden, flash: document.querySelector("#flash").textContent,
		h1: (document.querySelector("main h1") || {}).textContent, rows: document.querySelectorAll("tr[data-job]").length,
		count: (document.querySelector("#jobs-count") || {}).textContent,
		scrollY, innerHeight, height: document.documentElement.scrollHeight,
		focus: document.activeElement && (document.activeElement.id || document.activeElement.tagName),
		main: (document.querySelector("main") || document.body).innerText.replace(/\s+/g, " ").slice(0, 400),
		found: Object.fromEntries(`+string(sel)+`.map((s) => { try { const all = document.querySelectorAll(s);
			return [s, all.length ? all.length + " found, the first: " + all[0].outerHTML.replace(/\s+/g, " ").slice(0, 300) : "none"] }
			catch (e) { return [s, String(e)] } })),
		errors: window.testErrors}) } catch (e) { return String(e) } })()`)(ctx, tgt)
	if err != nil {
		return err.Error()
	}
	return state
}

// tabState is pageState for a tab that is not in an action.
func tabState(tab context.Context, expr string) string {
	state := ""
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tab), testpace.Scaled(5*time.Second))
	defer cancel()
	_ = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		state = pageState(ctx, tgt, expr)
		return nil
	}))
	return state
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
		visible("#token"),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#use-token")),
		waitJS(`document.querySelectorAll("tr[data-job]").length > 0`),
	)
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
	hour := time.Now().Truncate(time.Hour)
	var runs []storetest.RunOpts
	for _, job := range []string{"plan-change", "status-sync", "quick-2", "quick-4"} {
		for i := 20; i >= 1; i-- {
			at := hour.Add(time.Duration(-i) * time.Hour)
			r := storetest.RunOpts{Job: job, Status: store.StatusSucceeded, ScheduledAt: at, CreatedAt: at, StartedAt: at,
				FinishedAt: at.Add(time.Duration(i*137%5000) * time.Millisecond), InstanceID: "console-test-0",
				Epoch: storetest.Ptr(int64(1)), Stats: json.RawMessage(`{"processed": 3, "changed": 1}`)}
			switch {
			case i%7 == 3:
				r.Status, r.Error = store.StatusFailed, "connection reset by peer"
			case i%11 == 5:
				r.Status = store.StatusSkipped
			case i == 13:
				r.Status = store.StatusTimedOut
			}
			runs = append(runs, r)
		}
	}
	// A slot the replica's leader has recorded already keeps its row.
	storetest.RunsUnlessTaken(context.Background(), t, srv.DB.Pool, runs...)
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
