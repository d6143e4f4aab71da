package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// The overview of issue 34, against a replica with 300 runtime jobs and one failing job:
// it leads with the namespace's health, each count a filter, names the failing job where
// both a phone and a laptop show it without scrolling, filters by state, kind, label and
// words on the server, moves the focus to each new page's heading, keeps Step down out of
// the way, marks its data stale when its replica stops answering, and fixes the issue's
// smaller items. Each subtest failed on the console before this change.
func TestConsoleOverview(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken,
		Extra: []jobcontract.Job{replicatest.Failing{JobName: "flaky"}}, Paused: []string{"flaky"},
		Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}}})
	shots := screenshotDir(t)
	axe := axeSource(t)
	admin := func(method, path, body string) map[string]any {
		t.Helper()
		status, out := call(t, srv.URL, fullToken, method, path, body)
		require.Less(t, status, 300, "%s %s: %v", method, path, out)
		return out
	}
	for i := range 299 {
		admin("POST", "/v1/jobs", idleJob(fmt.Sprintf("job-%03d", i+1)))
	}
	// Enabled, in Paris, next due on 1 January: it does not run during the test.
	admin("POST", "/v1/jobs", `{"name": "paris", "schedule": "0 9 1 1 *", "time_zone": "Europe/Paris", "labels": {"site": "paris"},
		"http": {"url": "https://example.com/hook"}}`)
	trigger(t, srv.URL, fullToken, "flaky")
	failingShown := `document.querySelector('[data-status="failing"] .n').textContent === "1" &&
		document.querySelector('#failing-now a[href="#/jobs/flaky"]') !== null`
	inView := func(sel string) string {
		return fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect();
			return r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth })()`, sel)
	}

	// Each subtest starts from the overview, so each fails on its own on a console without
	// what it checks.
	overview := chromedp.Steps(chromedp.Navigate(srv.URL+"/ui/#/locks"), chromedp.Navigate(srv.URL+"/ui/#/"),
		waitJS(`document.querySelectorAll("tr[data-job]").length > 0`))
	tab := newTab(t, browser)
	run(t, tab, chromedp.EmulateViewport(1366, 768), signIn(srv.URL, fullToken))

	t.Run("the health counts lead, the failing job is named without scrolling, and each count filters", func(t *testing.T) {
		run(t, tab, waitJS(failingShown), waitJS(inView(`#failing-now a[href="#/jobs/flaky"]`)),
			waitJS(`document.querySelector('[data-status="paused"] .n').textContent === "1"`),
			waitJS(`document.querySelector(".health .total").textContent.includes("of `+fmt.Sprint(srv.Jobs+300)+` jobs")`))
		viewport(t, tab, shots, "overview-300-jobs-1366px")
		axeClean(t, tab, axe, "the overview with 300 jobs at 1366 px")
		run(t, tab, chromedp.Click(chromedp.CSS(`[data-status="failing"]`)),
			waitJS(jobRows("flaky")),
			waitJS(`document.querySelector('[data-status="failing"]').getAttribute("aria-pressed") === "true"`),
			waitJS(`document.querySelector("#job-status").value === "failing"`),
			chromedp.Click(chromedp.CSS(`[data-status="failing"]`)),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 100`))
	})

	t.Run("the filters ask the server: state, kind, label and words over every job", func(t *testing.T) {
		run(t, tab, overview,
			chromedp.SendKeys(chromedp.CSS("#job-label"), "site=paris"),
			waitJS(jobRows("paris")),
			waitJS(`document.querySelector("#jobs-count").textContent.startsWith("1 of ")`),
			js(`document.querySelector("#job-label").value = ""; document.querySelector("#job-label").dispatchEvent(new Event("input"))`),
			chromedp.SendKeys(chromedp.CSS("#job-filter"), "job-29"),
			// job-290 to job-299 are on the list's third page: the filter finds them.
			waitJS(`document.querySelectorAll("tr[data-job]").length === 10`),
			js(`document.querySelector("#job-filter").value = ""; document.querySelector("#job-filter").dispatchEvent(new Event("input"))`),
			js(`{ const k = document.querySelector("#job-kind"); k.value = "sql"; k.dispatchEvent(new Event("change")) }`),
			waitJS(`document.querySelector("#jobs-count").textContent.startsWith("No job of")`),
			js(`{ const k = document.querySelector("#job-kind"); k.value = ""; k.dispatchEvent(new Event("change")) }`),
			js(`{ const s = document.querySelector("#job-size"); s.value = "500"; s.dispatchEvent(new Event("change")) }`),
			waitJS(fmt.Sprintf(`document.querySelectorAll("tr[data-job]").length === %d`, srv.Jobs+300)),
			js(`{ const s = document.querySelector("#job-size"); s.value = "100"; s.dispatchEvent(new Event("change")) }`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 100`))
	})

	t.Run("times show in the job's zone beside UTC, and strip links are 24 px targets", func(t *testing.T) {
		run(t, tab, overview, chromedp.SendKeys(chromedp.CSS("#job-filter"), "paris"),
			waitJS(`document.querySelector('tr[data-job="paris"] td[data-label="Next run"]').textContent.includes("09:00 Europe/Paris")`),
			waitJS(`document.querySelector('tr[data-job="paris"] td[data-label="Next run"]').textContent.includes("08:00:00 UTC")`),
			js(`document.querySelector("#job-filter").value = "flaky"; document.querySelector("#job-filter").dispatchEvent(new Event("input"))`),
			waitJS(`document.querySelector('tr[data-job="flaky"] .strip a') !== null`),
			waitJS(`(() => { const r = document.querySelector('tr[data-job="flaky"] .strip a').getBoundingClientRect();
				return r.width >= 24 && r.height >= 24 })()`),
			js(`document.querySelector("#job-filter").value = ""; document.querySelector("#job-filter").dispatchEvent(new Event("input"))`))
	})

	t.Run("Step down is neither the first tab stop nor above the jobs", func(t *testing.T) {
		run(t, tab, overview, waitJS(`(() => {
			const stops = [...document.querySelectorAll("main a[href], main button, main input, main select")]
				.filter((e) => e.tabIndex >= 0 && !e.closest("[hidden]") && e.getClientRects().length);
			return stops[0].id !== "step-down" &&
				(document.querySelector("#step-down").compareDocumentPosition(document.querySelector("#jobs-count")) & Node.DOCUMENT_POSITION_PRECEDING) })()`))
	})

	t.Run("each page change hands the focus to the new page's heading", func(t *testing.T) {
		run(t, tab, overview, chromedp.Click(chromedp.CSS(`tr[data-job="flaky"] a[href="#/jobs/flaky"]`)),
			waitJS(`location.hash === "#/jobs/flaky" && document.querySelector("main h1").textContent.startsWith("flaky")`),
			waitJS(`document.activeElement === document.querySelector("main h1")`))
	})

	t.Run("Queued run N links to the run", func(t *testing.T) {
		run(t, tab, chromedp.Navigate(srv.URL+"/ui/#/jobs/flaky"), confirmByKeyboard("#run-now"),
			waitJS(`document.querySelector("#flash a#queued-run") !== null`),
			waitJS(`/^#\/runs\/\d+$/.test(document.querySelector("#flash a#queued-run").getAttribute("href"))`))
	})

	t.Run("the form: placeholders read as examples, the preview comes before Save on a phone, and the URL checks say what to write", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken), newJobForm(srv.URL),
			waitJS(`document.querySelector("#jf-schedule").placeholder.startsWith("e.g. ")`),
			waitJS(`getComputedStyle(document.querySelector("#jf-schedule"), "::placeholder").fontStyle === "italic"`),
			waitJS(`document.querySelector(".preview").getBoundingClientRect().top < document.querySelector("#save").getBoundingClientRect().top`),
			chromedp.SendKeys(chromedp.CSS("#jf-name"), "no-scheme"),
			chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "0 2 * * *"),
			chromedp.SendKeys(chromedp.CSS("#jf-http-url"), "billing.internal:8080/x"),
			js(`document.querySelector("#preview-btn").click()`),
			waitJS(invalidWithError("#jf-http-url")),
			waitJS(`document.querySelector("main").textContent.includes("the url needs a scheme, e.g. https://billing.internal:8080/x")`),
			js(`{ const u = document.querySelector("#jf-http-url"); u.value = "http://localhost:8080/x"; u.dispatchEvent(new Event("input", {bubbles: true})) }`),
			js(`document.querySelector("#preview-btn").click()`),
			waitJS(`document.querySelector("main").textContent.includes("localhost names are refused even where SCHEDULER_HTTP_ALLOW allows 127.0.0.1/32; use the address it names: http://127.0.0.1:8080/x")`))
		screenshot(t, phone, shots, "overview-form-390px")
	})

	t.Run("at 390 px the failing job shows without scrolling, nothing scrolls sideways, and axe finds nothing", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			waitJS(failingShown), waitJS(inView(`#failing-now a[href="#/jobs/flaky"]`)), refreshes(1))
		viewport(t, phone, shots, "overview-300-jobs-390px")
		screenshot(t, phone, shots, "overview-300-jobs-390px-full")
		noSideways(t, phone, "the overview")
		axeClean(t, phone, axe, "the overview with 300 jobs at 390 px")
	})

	t.Run("when the page's replica stops answering, its data is marked not current and the other replicas are offered", func(t *testing.T) {
		// The page talks to the replica through a proxy the test can cut, as a replica dies.
		target, err := url.Parse(srv.URL)
		require.NoError(t, err)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var dead atomic.Bool
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if dead.Load() {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		// Another replica, listening on every address of its host.
		_, err = srv.DB.Pool.Exec(context.Background(), `INSERT INTO scheduler_instances
			(instance_id, host, version, http_addr, started_at, last_seen_at, is_leader)
			VALUES ('replica-b', 'b-host', 'test', '0.0.0.0:18081', now(), now() + interval '1 hour', false)`)
		require.NoError(t, err)

		far := newTab(t, browser)
		run(t, far, chromedp.EmulateViewport(1366, 768), signIn(front.URL, fullToken), refreshes(2))
		dead.Store(true)
		run(t, far,
			waitJS(`!document.querySelector("#stale").hidden && document.querySelector("#stale").textContent.includes("Not current")`),
			waitJS(`document.querySelector("main").classList.contains("not-current") && document.title.startsWith("(not current)")`),
			waitJS(`document.querySelector('#other-replicas a[href^="http://b-host:18081/ui/"]') !== null`))
		viewport(t, far, shots, "overview-not-current-1366px")
		axeClean(t, far, axe, "the overview marked not current")
		dead.Store(false)
		run(t, far, waitJS(`document.querySelector("#stale").hidden && !document.querySelector("main").classList.contains("not-current")`))
	})
}
