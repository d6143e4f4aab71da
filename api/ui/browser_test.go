package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testpace"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// netLog records what a tab received: each answer's URL and status, and the browser's
// error log lines (a failed load, such as a 401, is one).
type netLog struct {
	mu      sync.Mutex
	answers []answer
	errors  []string
	// urls and cached: a revalidated answer reaches responseReceived as the cached 200;
	// its extra info has the 304 that came over the wire.
	urls   map[network.RequestID]string
	cached map[network.RequestID]bool
}

type answer struct {
	url    string
	status int64
}

// watch starts recording the tab's answers and error log lines.
func watch(t *testing.T, tab context.Context) *netLog {
	t.Helper()
	l := &netLog{urls: map[network.RequestID]string{}, cached: map[network.RequestID]bool{}}
	require.NoError(t, chromedp.Listen(tab, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventResponseReceived:
			l.answers = append(l.answers, answer{e.Response.URL, e.Response.Status})
			l.urls[e.RequestID] = e.Response.URL
			if l.cached[e.RequestID] {
				l.answers = append(l.answers, answer{e.Response.URL, http.StatusNotModified})
			}
		case *network.EventResponseReceivedExtraInfo:
			if e.StatusCode == http.StatusNotModified {
				if url, ok := l.urls[e.RequestID]; ok {
					l.answers = append(l.answers, answer{url, e.StatusCode})
				} else {
					l.cached[e.RequestID] = true
				}
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				l.errors = append(l.errors, e.Entry.Text+" "+e.Entry.URL)
			}
		}
	}))
	require.NoError(t, chromedp.Do(tab, chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tgt, log.Enable, cdp.Empty{})
		return err
	})))
	return l
}

// statuses returns the statuses of the answers whose URL contains part (a revalidated
// answer counts as its 304).
func (l *netLog) statuses(part string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, a := range l.answers {
		if strings.Contains(a.url, part) {
			out = append(out, a.status)
		}
	}
	return out
}

// answered returns the URLs answered that contain part, in order.
func (l *netLog) answered(part string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.answers {
		if strings.Contains(a.url, part) {
			out = append(out, a.url)
		}
	}
	return out
}

func (l *netLog) errorLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errors...)
}

// refreshes waits until the page has refreshed its data n more times (app.js counts them
// in main's data-refreshes). The page waits ten times its last refresh between two, at
// least a second and at most MAX_REFRESH_WAIT_MS (app.js): on a loaded machine one slow
// refresh slows the next ones, so the deadline follows the slowest pace the page shows
// while it is awaited, and the rest of the deadline the machine's (internal/testpace).
func refreshes(n int) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		type state struct {
			Refreshes int
			Pace      float64 // ms
		}
		read := chromedp.Evaluate[state](`({refreshes: Number(document.querySelector("main").dataset.refreshes || 0),
			pace: typeof nextRefreshWait === "function" ? nextRefreshWait() : 0})`)
		first, err := read(ctx, tgt)
		if err != nil {
			return err
		}
		began := time.Now()
		pace := time.Second
		for {
			now, err := read(ctx, tgt)
			if err != nil {
				return err
			}
			if now.Refreshes >= first.Refreshes+n {
				return nil
			}
			pace = max(pace, time.Duration(now.Pace)*time.Millisecond)
			if time.Since(began) > testpace.Scaled(stepTimeout)+time.Duration(n)*pace {
				return fmt.Errorf("waiting %s for %d refreshes (the page's slowest pace: one each %s; the machine's: %.1f×; the page then: %s)",
					time.Since(began).Round(time.Millisecond), n, pace, testpace.Pace(), pageState(ctx, tgt, ""))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// keepsFocus focuses the element the expression finds, lets the page refresh twice and
// checks that the same element, still in the page, has the focus.
func keepsFocus(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		waitJS(expr),
		js(`window.focusedForTest = `+expr+`; window.focusedForTest.focus()`),
		waitJS(`document.activeElement === window.focusedForTest`),
		refreshes(2),
		chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			ok, err := chromedp.Evaluate[bool](`document.activeElement === window.focusedForTest && window.focusedForTest.isConnected`)(ctx, tgt)
			if err != nil {
				return err
			}
			if !ok {
				who, _ := chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 120)`)(ctx, tgt)
				return fmt.Errorf("%s lost the focus over two refreshes; it is on %s", expr, who)
			}
			return nil
		}),
	)
}

// recordLayoutShifts makes every new document of the tab sum its layout shifts (those not
// caused by input, as Cumulative Layout Shift counts them); layoutShift() reads the sum.
// The observer's callback comes late, so the reading also takes the entries still queued.
func recordLayoutShifts() chromedp.Action[chromedp.Void] {
	const src = `(() => {
  let total = 0;
  const add = (entries) => { for (const e of entries) if (!e.hadRecentInput) total += e.value; };
  const observer = new PerformanceObserver((list) => add(list.getEntries()));
  observer.observe({ type: "layout-shift", buffered: true });
  window.layoutShiftTotal = () => { add(observer.takeRecords()); return total; };
})();`
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tgt, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
		return err
	})
}

// slowAPI starts a proxy to the replica at base that delays every answer of the API (paths
// under /v1/) by latency, as a slow network or a busy replica does, so the page paints
// before its data arrives: the moment a layout shift can happen. (Lighthouse's throttled
// phone sees the same.) It returns the proxy's URL, another origin than base's: a tab signs
// in there anew. A proxy in the test, not the browser's network emulation: the experimental
// Network.emulateNetworkConditionsByRule is refused by today's Chromium (148 and later,
// "Invalid parameters"), and the tests must depend on the stable protocol only.
func slowAPI(t *testing.T, base string, latency time.Duration) string {
	t.Helper()
	target, err := url.Parse(base)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			delay := time.NewTimer(latency)
			defer delay.Stop()
			select {
			case <-delay.C:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	return slow.URL
}

// axeSource returns axe-core's script when it is installed (scripts/test.sh installs it
// with npm into tmp/axe), or "".
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("SCHEDULER_AXE_JS")
	if path == "" {
		path = filepath.Join(testdb.RepoRoot(), "tmp", "axe", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("axe-core not found at %s (scripts/test.sh installs it with npm): the pages are not audited with it", path)
		return ""
	}
	return string(b)
}

// axeClean runs axe-core on the page (WCAG 2.x A and AA rules and best practices) and fails
// with the rules it finds broken.
func axeClean(t *testing.T, tab context.Context, source, what string) {
	t.Helper()
	if source == "" {
		return
	}
	ctx, cancel := testpace.Context(tab, 2*stepTimeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[any](source))
	require.NoError(t, err)
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then((r) =>
		JSON.stringify(r.violations.map((v) => ({id: v.id, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5)}))))`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var violations []struct {
		ID    string   `json:"id"`
		Nodes []string `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &violations))
	require.Empty(t, violations, "axe-core finds violations on %s", what)
}

// enabled is true when the button is there and may be used: the page marks a button that
// cannot act now aria-disabled, so it keeps the focus.
func enabled(sel string) string {
	q := fmt.Sprintf(`document.querySelector(%q)`, sel)
	return q + ` && !` + q + `.disabled && ` + q + `.getAttribute("aria-disabled") !== "true"`
}

// confirmByKeyboard opens a confirmation with the keyboard from the button sel, as an
// operator without a mouse does, and confirms it.
func confirmByKeyboard(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		waitJS(enabled(sel)),
		js(fmt.Sprintf(`document.querySelector(%q).focus()`, sel)),
		chromedp.KeyEvent("\r"),
		waitJS(`document.querySelector("#confirm").open`),
		js(`document.querySelector("#confirm-ok").focus()`),
		chromedp.KeyEvent("\r"),
		waitJS(`!document.querySelector("#confirm").open`),
	)
}

// openByKeyboard opens the <details> sel from its summary with the keyboard. A click could
// land beside the summary when the page above it moves between the aim and the press.
func openByKeyboard(sel string) chromedp.Action[chromedp.Void] {
	summary := sel + " summary"
	return chromedp.Steps(
		waitJS(fmt.Sprintf(`document.querySelector(%q)`, summary)),
		js(fmt.Sprintf(`document.querySelector(%q).focus()`, summary)),
		chromedp.KeyEvent("\r"),
		waitJS(fmt.Sprintf(`document.querySelector(%q).open`, sel)),
	)
}

// focusedOn checks, now, that the element sel has the focus.
func focusedOn(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		ok, err := chromedp.Evaluate[bool](fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, sel))(ctx, tgt)
		if err != nil {
			return err
		}
		if !ok {
			who, _ := chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 120)`)(ctx, tgt)
			return fmt.Errorf("the focus is not on %s but on %s", sel, who)
		}
		return nil
	})
}

// Runtime jobs in the console: made, previewed, edited and deleted through the form, as an
// operator does, against a whole replica whose API checks them. The jobs made here are
// disabled or only previewed: this machine's network reaches no public address, so no job
// may call one (its HTTP runs' attempts are written into the database instead).
func TestConsoleRuntimeJobs(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken})
	shots := screenshotDir(t)
	axe := axeSource(t)
	requireRuntimeRoutes(t, srv.URL)

	tab := newTab(t, browser)
	run(t, tab, signIn(srv.URL, fullToken))

	t.Run("a new HTTP job made with the form is listed with its kind and target", func(t *testing.T) {
		run(t, tab, newJobForm(srv.URL),
			chromedp.SendKeys(chromedp.CSS("#jf-name"), "hook-job"),
			chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "*/5 * * * *"),
			chromedp.SendKeys(chromedp.CSS("#jf-http-url"), "https://example.com/hook"),
			chromedp.SendKeys(chromedp.CSS("#jf-labels"), "team=billing"),
			chromedp.SendKeys(chromedp.CSS("#jf-http-headers"), "Content-Type: application/json"),
			// Disabled, so it never calls example.com from this machine.
			chromedp.Click(chromedp.CSS("#jf-enabled")),
			waitJS(`!document.querySelector("#jf-enabled").checked`),
			chromedp.Click(chromedp.CSS("#preview-btn")),
			waitJS(`document.querySelector("#preview-status").textContent.includes("accepts")`),
			waitJS(`document.querySelector("#preview").textContent.includes("POST https://example.com/hook")`))
		axeClean(t, tab, axe, "the new job's form")
		run(t, tab,
			chromedp.Click(chromedp.CSS("#save")),
			waitJS(`location.hash === "#/jobs/hook-job"`),
			waitJS(`document.querySelector("#flash").textContent.includes("Created hook-job")`),
			waitJS(`document.activeElement === document.querySelector("h1")`),
			waitJS(`document.querySelector('h1 [data-badge="kind"]').textContent === "HTTP"`),
			waitJS(`document.querySelector("#job-target").textContent === "POST https://example.com/hook"`),
			waitJS(`!document.querySelector("#edit").hidden && !document.querySelector("#delete").hidden`))
		axeClean(t, tab, axe, "a runtime job's page")

		row := `document.querySelector('tr[data-job="hook-job"]')`
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/"),
			waitJS(row+`.textContent.includes("POST https://example.com/hook")`),
			waitJS(row+`.querySelector('[data-badge="kind"]').textContent === "HTTP"`),
			waitJS(row+`.querySelector('[data-badge="disabled"]') !== null`),
			waitJS(row+`.textContent.includes("team=billing")`),
			waitJS(`document.querySelector('tr[data-job="plan-change"] [data-badge="kind"]').textContent === "built-in"`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs+1)))
		run(t, tab, refreshes(1))
		screenshot(t, tab, shots, "console-list")
		axeClean(t, tab, axe, "the overview with a runtime job")

		// The filter narrows the list by name, label or target, and keeps the focus.
		run(t, tab,
			chromedp.SendKeys(chromedp.CSS("#job-filter"), "team=billing"),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 1 && `+row+` !== null`),
			waitJS(`document.querySelector("#jobs-count").textContent.startsWith("1 of ")`),
			refreshes(2),
			focusedOn("#job-filter"),
			js(`document.querySelector("#job-filter").value = "built-in"; document.querySelector("#job-filter").dispatchEvent(new Event("input"))`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)),
			js(`document.querySelector("#job-filter").value = ""; document.querySelector("#job-filter").dispatchEvent(new Event("input"))`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs+1)))
	})

	t.Run("preview shows the next five runs and stores nothing", func(t *testing.T) {
		run(t, tab, newJobForm(srv.URL),
			chromedp.SendKeys(chromedp.CSS("#jf-name"), "preview-only"),
			chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "*/5 * * * *"),
			chromedp.SendKeys(chromedp.CSS("#jf-http-url"), "https://example.com/hook"),
			chromedp.Click(chromedp.CSS("#preview-btn")),
			waitJS(`document.querySelectorAll("#preview-runs li time").length === 5`),
			waitJS(`document.querySelector("#preview-when").textContent.includes("5 minutes")`),
			// Five slots five minutes apart.
			waitJS(`(() => { const t = [...document.querySelectorAll("#preview-runs time")].map((e) => Date.parse(e.getAttribute("datetime")));
				return t.every((v, i) => i === 0 || v - t[i-1] === 300000) })()`))
		assert.Equal(t, http.StatusNotFound, get(t, srv.URL, "/v1/jobs/preview-only", nil), "a preview stored the job")
	})

	t.Run("a bad schedule and a bad URL are shown beside their fields", func(t *testing.T) {
		run(t, tab, newJobForm(srv.URL),
			chromedp.SendKeys(chromedp.CSS("#jf-name"), "bad-job"),
			chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "every tuesday"),
			chromedp.SendKeys(chromedp.CSS("#jf-http-url"), "http://10.0.0.1/x"),
			chromedp.Click(chromedp.CSS("#preview-btn")),
			waitJS(invalidWithError("#jf-schedule")),
			waitJS(invalidWithError("#jf-http-url")),
			waitJS(`document.querySelector("#jf-http-url-error").textContent.includes("10.0.0.1")`),
			// Each error sits in its own field's box, and only those two fields are marked.
			waitJS(`document.querySelector("#jf-schedule-error").closest("[data-field]").dataset.field === "schedule"`),
			waitJS(`document.querySelector("#jf-http-url-error").closest("[data-field]").dataset.field === "http.url"`),
			waitJS(`document.querySelectorAll('[aria-invalid="true"]').length === 2`),
			waitJS(`document.querySelector("#preview-status").textContent.includes("2 problems")`),
			waitJS(`document.querySelectorAll("#preview-runs").length === 0`))
		screenshot(t, tab, shots, "console-form-errors")
		viewport(t, tab, shots, "console-form-errors-top")
		axeClean(t, tab, axe, "the job form with errors")
		// A failed save moves the focus to the first wrong field.
		run(t, tab,
			js(`document.querySelector("#preview-btn").focus()`),
			chromedp.Click(chromedp.CSS("#save")),
			waitJS(`document.activeElement === document.querySelector("#jf-schedule")`),
			waitJS(invalidWithError("#jf-http-url")))
		assert.Equal(t, http.StatusNotFound, get(t, srv.URL, "/v1/jobs/bad-job", nil))
		// Fixed, the errors go.
		run(t, tab,
			js(`document.querySelector("#jf-schedule").value = ""; document.querySelector("#jf-http-url").value = ""`),
			typeInto("#jf-schedule", "@every 10m"),
			typeInto("#jf-http-url", "https://example.com/x"),
			chromedp.Click(chromedp.CSS("#preview-btn")),
			waitJS(`document.querySelectorAll('[aria-invalid="true"]').length === 0 && document.querySelector("#form-problems").hidden`),
			waitJS(`document.querySelectorAll("#preview-runs li").length === 5`))
	})

	t.Run("edit changes the schedule, and a description with markup stays text", func(t *testing.T) {
		const injected = `<img src=x onerror="window.injected=1"><script>window.injected=2</script>`
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/hook-job"),
			waitJS(enabledLink("#edit")),
			chromedp.Click(chromedp.CSS("#edit")),
			waitJS(`document.querySelector("#jf-schedule").value === "*/5 * * * *"`),
			waitJS(`document.querySelector("#jf-name").readOnly && document.querySelector("#jf-http-url").value === "https://example.com/hook"`),
			waitJS(`document.querySelector("#jf-http-headers").value === "Content-Type: application/json"`),
			waitJS(`!document.querySelector("#jf-enabled").checked`),
			js(`document.querySelector("#jf-schedule").value = ""`),
			chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "0 * * * *"),
			chromedp.SendKeys(chromedp.CSS("#jf-description"), injected),
			chromedp.Click(chromedp.CSS("#preview-btn")),
			waitJS(`document.querySelector("#preview-when").textContent.includes("hour")`),
			chromedp.Click(chromedp.CSS("#save")),
			waitJS(`location.hash === "#/jobs/hook-job"`),
			waitJS(`document.querySelector("#flash").textContent.includes("Saved hook-job (version 2)")`),
			waitJS(`[...document.querySelectorAll(".card dd")].some((d) => d.textContent === "0 * * * *")`),
			waitJS(`document.querySelector("#job-description").textContent === `+jsString(injected)),
			waitJS(`document.querySelector("main img, main script") === null && window.injected === undefined`))
		screenshot(t, tab, shots, "console-job")
		var job struct {
			Version    int64
			Schedule   string
			Definition struct{ Description string }
		}
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/hook-job", &job))
		assert.Equal(t, int64(2), job.Version)
		assert.Equal(t, "0 * * * *", job.Schedule)
		assert.Equal(t, injected, job.Definition.Description)
	})

	t.Run("saving over someone else's change says so", func(t *testing.T) {
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/hook-job/edit"),
			waitJS(`document.querySelector("#jf-schedule").value === "0 * * * *"`))
		var job struct {
			Version    int64
			Definition map[string]any
		}
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/hook-job", &job))
		job.Definition["description"] = "changed by a colleague"
		require.Equal(t, http.StatusOK, put(t, srv.URL, "/v1/jobs/hook-job", job.Definition, job.Version))
		run(t, tab,
			chromedp.Click(chromedp.CSS("#save")),
			waitJS(`document.querySelector("#form-problems").textContent.includes("Someone else changed this job")`),
			waitJS(`document.activeElement === document.querySelector("#form-problems")`),
			chromedp.Click(chromedp.CSS("#reload-job")),
			waitJS(`document.querySelector("#jf-description").value === "changed by a colleague"`),
			waitJS(`document.querySelector("#form-problems").hidden`))
	})

	t.Run("an HTTP run's page shows its attempts, and their bodies as text", func(t *testing.T) {
		id := seedAttempts(t, srv, "hook-job")
		run(t, tab,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/runs/%d", srv.URL, id)),
			waitJS(`document.querySelectorAll("#attempts > li").length === 3`),
			waitJS(`document.querySelector('[data-attempt="1"]').textContent.includes("HTTP 503")`),
			waitJS(`document.querySelector('[data-attempt="2"]').textContent.includes("i/o timeout")`),
			waitJS(`document.querySelector('[data-attempt="3"]').textContent.includes("HTTP 200")`),
			waitJS(`document.querySelector('[data-attempt="1"] pre').textContent.includes("<script>window.injected=3</script>")`),
			waitJS(`document.querySelector("main img, main script, main pre *") === null && window.injected === undefined`),
			waitJS(`document.body.textContent.includes("version 2")`))
		screenshot(t, tab, shots, "console-run-attempts")
		axeClean(t, tab, axe, "an HTTP run's page")
	})

	t.Run("the form fits a phone", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/hook-job/edit"),
			waitJS(`document.querySelector("#jf-schedule").value === "0 * * * *"`),
			js(`document.querySelector("#jf-http-url").value = "http://10.0.0.1/x"`),
			chromedp.Click(chromedp.CSS("#save")),
			waitJS(`document.activeElement === document.querySelector("#jf-http-url")`))
		screenshot(t, phone, shots, "console-form-390px")
		overflow, err := chromedp.Run(phone, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		require.NoError(t, err)
		assert.False(t, overflow, "the job form scrolls sideways at 390 px")
	})

	t.Run("built-in jobs have no Edit or Delete", func(t *testing.T) {
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/plan-change"),
			waitJS(`document.querySelector('h1 [data-badge="kind"]').textContent === "built-in"`),
			waitJS(`document.querySelector("#edit").hidden && document.querySelector("#delete").hidden`),
			waitJS(`document.querySelector("#job-target") === null`))
	})

	t.Run("the read-only token may not save, and is told so before it tries", func(t *testing.T) {
		viewer := newTab(t, browser)
		run(t, viewer, signIn(srv.URL, readToken),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/hook-job/edit"),
			waitJS(`document.querySelector("#jf-schedule").value === "0 * * * *"`),
			waitJS(refusedWith("#save", "viewer of every namespace")),
			waitJS(refusedWith("#preview-btn", "viewer of every namespace")),
			sendsNothing(chromedp.Click(chromedp.CSS("#save"))),
			waitJS(`document.querySelector("#form-problems").hidden`))
		var job struct{ Version int64 }
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/hook-job", &job))
		assert.Equal(t, int64(3), job.Version, "the read-only token changed the job")
	})

	t.Run("delete asks first, naming the job, then removes it", func(t *testing.T) {
		run(t, tab,
			chromedp.Navigate(srv.URL+"/ui/#/jobs/hook-job"),
			waitJS(enabled("#delete")),
			chromedp.Click(chromedp.CSS("#delete")),
			waitJS(`document.querySelector("#confirm").open`),
			waitJS(`document.querySelector("#confirm-title").textContent === "Delete hook-job?"`),
			waitJS(`document.querySelector("#confirm-text").textContent.includes("hook-job")`),
			chromedp.KeyEvent(kb.Escape),
			waitJS(`!document.querySelector("#confirm").open`),
			focusedOn("#delete"))
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/hook-job", nil), "cancelled, the job stays")
		// Opened again at once, before the Escape's close event may have come: one delete.
		run(t, tab,
			confirmByKeyboard("#delete"),
			waitJS(`location.hash === "#/"`),
			waitJS(`document.querySelector("#flash").textContent.includes("Deleted hook-job")`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === `+fmt.Sprint(srv.Jobs)),
			waitJS(`document.querySelector('tr[data-job="hook-job"]') === null`),
			// A second delete would have replaced the message with its 404.
			refreshes(2),
			waitJS(`document.querySelector("#flash").textContent === "Deleted hook-job."`))
		assert.Equal(t, http.StatusNotFound, get(t, srv.URL, "/v1/jobs/hook-job", nil))
	})
}

// typeInto types text into the field sel, as chromedp.SendKeys does, for a field whose
// attributes the page changes while it is typed into (its error marks going): SendKeys reads
// the node's attributes without chromedp's lock, a data race with chromedp's own DOM event
// handler that the race detector caught on a loaded machine.
func typeInto(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		js(fmt.Sprintf(`document.querySelector(%q).focus()`, sel)),
		focusedOn(sel),
		chromedp.KeyEvent(text),
	)
}

// newJobForm opens an empty job form from the overview, as an operator does.
func newJobForm(base string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(base+"/ui/#/"),
		// From another route of the same page, Navigate changes only the hash, which can
		// take effect after it returns: a click before it would be undone by it.
		waitJS(`location.hash === "#/" && `+enabledLink("#new-job")),
		// The link itself is clicked, not the point where it was laid out: the overview
		// refreshes every second and may move it between the two (a click seen lost under load).
		js(`document.querySelector("#new-job").click()`),
		waitJS(`location.hash === "#/new-job" && document.querySelector("#jf-name").value === ""`),
	)
}

// requireRuntimeRoutes fails at once, saying why, when the replica has no runtime-job
// routes: every step below would only time out.
func requireRuntimeRoutes(t *testing.T, base string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/jobs?dry_run=true", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fullToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.NotContains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, res.StatusCode,
		"POST /v1/jobs is not routed: the replica has no runtime jobs")
}

// invalidWithError is true when the input is marked invalid and describes itself with a
// visible error message.
func invalidWithError(sel string) string {
	q := fmt.Sprintf(`document.querySelector(%q)`, sel)
	return fmt.Sprintf(`%[1]s.getAttribute("aria-invalid") === "true" && (() => {
		const err = document.getElementById(%[1]s.getAttribute("aria-describedby").split(" ")[0]);
		return err && !err.hidden && err.offsetParent !== null && err.textContent.trim().length > 2 })()`, q)
}

// enabledLink is true when the link is shown and leads somewhere. A link the page gates
// (gateLink) has no address until the session says the token may use it: a click before
// then does nothing, and a wait for the page it opens waits in vain (on a loaded machine
// the session's answer comes after the link shows).
func enabledLink(sel string) string {
	q := fmt.Sprintf(`document.querySelector(%q)`, sel)
	return q + ` && !` + q + `.hidden && ` + q + `.offsetParent !== null && ` + q + `.hasAttribute("href") && ` +
		q + `.getAttribute("aria-disabled") !== "true"`
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// get GETs path with the full token and decodes the answer into into, when given.
func get(t *testing.T, base, path string, into any) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fullToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	if into != nil && res.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(res.Body).Decode(into))
	}
	return res.StatusCode
}

// put replaces a runtime job's definition, as another operator would.
func put(t *testing.T, base, path string, def any, version int64) int {
	t.Helper()
	b, err := json.Marshal(def)
	require.NoError(t, err)
	req, err := http.NewRequest("PUT", base+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fullToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("If-Match", fmt.Sprintf(`"%d"`, version))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

// seedAttempts records a finished run of job with three call attempts, as the engine
// records them: a 503 whose body is HTML with script in it (a target's answer is untrusted),
// a timeout with no answer, then a 200.
func seedAttempts(t *testing.T, srv *replicatest.Server, job string) int64 {
	t.Helper()
	ctx := context.Background()
	ago := time.Now().Add(-time.Minute)
	id := storetest.Run(ctx, t, srv.DB.Pool, storetest.RunOpts{Job: job, Status: store.StatusSucceeded,
		CreatedAt: ago, StartedAt: ago, FinishedAt: ago.Add(7 * time.Second), InstanceID: srv.InstanceID,
		Epoch: storetest.Ptr(int64(1)), DefinitionVersion: 2}).ID
	_, err := srv.DB.Pool.Exec(ctx, `
		INSERT INTO run_attempts (run_id, attempt, started_at, duration_ms, status_code, body, error) VALUES
		($1, 1, now() - interval '1 minute', 84, 503,
		 '<html><body><h1>Service Unavailable</h1><img src=x onerror="window.injected=1"><script>window.injected=3</script></body></html>',
		 'status 503 is not a success status'),
		($1, 2, now() - interval '1 minute' + interval '1 s', 5000, NULL, NULL,
		 'dial tcp 93.184.215.14:443: i/o timeout'),
		($1, 3, now() - interval '1 minute' + interval '7 s', 112, 200, '{"queued": true, "report": "daily"}', NULL)`, id)
	require.NoError(t, err)
	return id
}
