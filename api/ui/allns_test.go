package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// The admin's view of every namespace (#/all), at 1366 and 390 px: each namespace's failing,
// paused and running jobs, and the failing jobs linked to their pages in their own
// namespaces; a team's token is not offered it, and is told why at its address. Every wait
// is for the page to show something, with a deadline.
func TestConsoleAllNamespaces(t *testing.T) {
	browser := startBrowser(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for the test", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken,
		Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}}})
	shots := screenshotDir(t)
	axe := axeSource(t)
	admin := func(method, path, body string) map[string]any {
		t.Helper()
		status, out := call(t, srv.URL, fullToken, method, path, body)
		require.Less(t, status, 300, "%s %s: %v", method, path, out)
		return out
	}
	for _, ns := range []string{"billing", "ops", "quiet"} {
		admin("PUT", "/v1/namespaces/"+ns, "")
	}
	admin("PUT", "/v1/namespaces/billing", `{"http_allow": ["127.0.0.1"]}`) // its failing job calls a local server
	failingJob := fmt.Sprintf(`{"name": "report", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": %q}}`, failing.URL+"/report")
	admin("POST", "/v1/namespaces/billing/jobs", failingJob)
	admin("POST", "/v1/namespaces/billing/jobs", idleJob("invoice"))
	admin("POST", "/v1/namespaces/ops/jobs", idleJob("backup"))
	admin("POST", "/v1/namespaces/ops/jobs/backup/pause", "")
	admin("POST", "/v1/namespaces/billing/jobs/report/runs", "")
	viewer := admin("POST", "/v1/tokens", `{"name": "billing-watch", "role": "viewer", "namespace": "billing"}`)["token"].(string)

	// billing's row: one failing of two jobs; ops': one paused; quiet: no job at all.
	nsRow := func(ns, failing, paused, jobs string) string {
		return fmt.Sprintf(`(() => { const r = document.querySelector('#ns-health tr[data-key=%q]'); if (!r) return false;
			const c = [...r.querySelectorAll("td")].map((d) => d.textContent.trim());
			return c[1] === %q && c[2] === %q && c[4] === %q })()`, ns, failing, paused, jobs)
	}
	t.Run("an admin sees every namespace's health and its failing jobs", func(t *testing.T) {
		tab := newTab(t, browser)
		run(t, tab, chromedp.EmulateViewport(1366, 900), signIn(srv.URL, fullToken),
			waitJS(`!document.querySelector('[data-nav="all"]').closest("li").hidden`),
			chromedp.Click(chromedp.CSS(`[data-nav="all"]`)),
			waitJS(`location.hash === "#/all" && document.title === "All namespaces · scheduler"`),
			waitJS(nsRow("billing", "1", "0", "2")), waitJS(nsRow("ops", "0", "1", "1")), waitJS(nsRow("quiet", "0", "0", "0")),
			// The failing namespace first.
			waitJS(`document.querySelector('#ns-health tbody tr').dataset.key === "billing"`),
			waitJS(`document.querySelector('#all-failing li[data-key="billing/report"] a').getAttribute("href") === "#/ns/billing/jobs/report"`),
			refreshes(1))
		screenshot(t, tab, shots, "all-namespaces-1366")
		axeClean(t, tab, axe, "all namespaces")
		run(t, tab, chromedp.Click(chromedp.CSS(`#all-failing li[data-key="billing/report"] a`)),
			waitJS(`location.hash === "#/ns/billing/jobs/report"`),
			waitJS(`document.querySelector("#ns-picker").value === "billing"`))
	})

	t.Run("at 390 px the namespaces fit the screen", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			js(`location.hash = "#/all"`), waitJS(nsRow("billing", "1", "0", "2")),
			waitJS(`document.querySelector('#all-failing li[data-key="billing/report"]') !== null`))
		screenshot(t, phone, shots, "all-namespaces-390")
		noCardPastTheScreen(t, phone, "table.ns-health", "the namespaces' health")
		axeClean(t, phone, axe, "all namespaces at 390 px")
	})

	t.Run("a team's token is not offered the page, and its address says why", func(t *testing.T) {
		tab := newTab(t, browser)
		run(t, tab, signIn(srv.URL, viewer),
			waitJS(`document.querySelector('[data-nav="all"]').closest("li").hidden`),
			chromedp.Navigate(srv.URL+"/ui/#/ns/billing/all"),
			waitJS(`document.querySelector("main").textContent.includes("Only an admin sees every namespace")`),
			waitJS(`document.querySelector("main").textContent.includes("viewer of billing")`))
	})
}
