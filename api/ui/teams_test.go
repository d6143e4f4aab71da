package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// Teams in the console, against one replica with namespaces billing, ops and bulk: the
// namespace picker, a token's powers (what it may not do is disabled, saying why, before
// anything is sent), and the job list read a page at a time.
func TestConsoleTeams(t *testing.T) {
	browser := startBrowser(t)
	// billing's export job calls this receiver, which answers only when the test ends: its
	// run stays running, so its page has a Cancel button.
	release := make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(receiver.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the call to end
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
	for _, ns := range []string{"billing", "ops", "bulk"} {
		admin("PUT", "/v1/namespaces/"+ns, "")
	}
	admin("PUT", "/v1/namespaces/billing", `{"http_allow": ["127.0.0.1"]}`) // its export calls the receiver
	admin("POST", "/v1/namespaces/billing/jobs", idleJob("report"))
	admin("POST", "/v1/namespaces/billing/jobs", idleJob("invoice"))
	admin("POST", "/v1/namespaces/billing/jobs", fmt.Sprintf(`{"name": "export", "schedule": "0 0 1 1 *", "timeout": "10m",
		"retry": {"max_attempts": 1}, "http": {"url": %q, "timeout": "5m"}}`, receiver.URL+"/export"))
	admin("POST", "/v1/namespaces/ops/jobs", idleJob("backup"))
	admin("POST", "/v1/jobs", idleJob("default-report"))
	for i := range 250 {
		admin("POST", "/v1/namespaces/bulk/jobs", idleJob(fmt.Sprintf("job-%03d", i+1)))
	}
	token := func(name, role, ns string) string {
		return admin("POST", "/v1/tokens", fmt.Sprintf(`{"name": %q, "role": %q, "namespace": %q}`, name, role, ns))["token"].(string)
	}
	viewerToken := token("billing-watch", "viewer", "billing")
	editorToken := token("billing-ci", "editor", "billing")
	defaultEditor := token("default-ops", "editor", "default")
	exportRun := int64(admin("POST", "/v1/namespaces/billing/jobs/export/runs", "")["id"].(float64))

	t.Run("a viewer of billing sees billing only, and every action is disabled with the reason", func(t *testing.T) {
		viewer := newTab(t, browser)
		net := watch(t, viewer)
		run(t, viewer, signIn(srv.URL, viewerToken),
			// The token reads no namespace default: the console opens billing's jobs.
			waitJS(`location.hash === "#/ns/billing/"`),
			waitJS(jobRows("export", "invoice", "report")),
			waitJS(`[...document.querySelectorAll("#ns-picker option")].map((o) => o.value).join() === "billing"`),
			waitJS(`document.querySelector("#ns-picker").value === "billing"`),
			waitJS(`document.querySelector("#session").textContent.includes("billing-watch")`),
			waitJS(`document.querySelector("#session").textContent.includes("viewer of billing")`),
			// The cluster's locks are namespace default's to read.
			waitJS(`document.querySelector('[data-nav="locks"]').closest("li").hidden`),
			waitJS(refusedWith("#new-job", "viewer of billing")),
			waitJS(refusedWith("#step-down", "Only an admin")),
			refreshes(1))
		screenshot(t, viewer, shots, "teams-viewer-overview")
		axeClean(t, viewer, axe, "the overview of a namespace's viewer")
		run(t, viewer,
			js(`document.querySelector("#new-job").click(); document.querySelector("#step-down").click()`),
			refreshes(1),
			waitJS(`location.hash === "#/ns/billing/" && !document.querySelector("#confirm").open`))

		run(t, viewer,
			chromedp.Click(chromedp.CSS(`tr[data-job="report"] td a`)),
			waitJS(`location.hash === "#/ns/billing/jobs/report"`),
			waitJS(`document.querySelector("#next-runs li") !== null || document.body.textContent.includes("disabled")`),
			waitJS(`document.querySelector('h1 [data-badge="kind"]').textContent === "HTTP"`),
			waitJS(refusedWith("#run-now", "viewer of billing")),
			waitJS(refusedWith("#pause", "viewer of billing")),
			waitJS(refusedWith("#edit", "viewer of billing")),
			waitJS(refusedWith("#delete", "viewer of billing")),
			waitJS(`document.querySelector("#reason").disabled`),
			js(`document.querySelector("#run-now").click(); document.querySelector("#pause").click();
				document.querySelector("#delete").click(); document.querySelector("#edit").click()`),
			refreshes(1),
			waitJS(`location.hash === "#/ns/billing/jobs/report" && !document.querySelector("#confirm").open`))
		screenshot(t, viewer, shots, "teams-viewer-job")
		axeClean(t, viewer, axe, "a job's page for a viewer")

		run(t, viewer,
			chromedp.Navigate(fmt.Sprintf("%s/ui/#/ns/billing/runs/%d", srv.URL, exportRun)),
			waitJS(`document.querySelector("#cancel") !== null`),
			waitJS(refusedWith("#cancel", "viewer of billing")),
			js(`document.querySelector("#cancel").click()`),
			waitJS(`!document.querySelector("#confirm").open`),
			waitJS(`document.querySelector('a[href="#/ns/billing/jobs/export"]') !== null`))

		run(t, viewer,
			chromedp.Navigate(srv.URL+"/ui/#/ns/billing/jobs/report/edit"),
			waitJS(`document.querySelector("#jf-http-url").value === "https://example.com/hook"`),
			waitJS(refusedWith("#save", "viewer of billing")),
			waitJS(refusedWith("#preview-btn", "viewer of billing")),
			sendsNothing(js(`document.querySelector("#save").click()`)),
			waitJS(`location.hash === "#/ns/billing/jobs/report/edit" && document.querySelector("#form-problems").hidden`))

		// Another team's namespace is not offered, and its address says why it shows nothing.
		run(t, viewer,
			chromedp.Navigate(srv.URL+"/ui/#/ns/ops/"),
			waitJS(`document.querySelector("main").textContent.includes("may not read ops")`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 0`))

		var n int
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operator_actions WHERE token_name = 'billing-watch'`).Scan(&n))
		assert.Zero(t, n, "the viewer's console sent no action to be refused")
		for _, s := range net.statuses("/v1/") {
			assert.NotEqual(t, int64(http.StatusForbidden), s, "the viewer's console asked for something it may not read")
		}

		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, viewerToken),
			waitJS(jobRows("export", "invoice", "report")), refreshes(1))
		viewport(t, phone, shots, "teams-viewer-overview-390px")
		noSideways(t, phone, "the overview")
		run(t, phone, chromedp.Navigate(srv.URL+"/ui/#/ns/billing/jobs/report"),
			waitJS(refusedWith("#run-now", "viewer of billing")), refreshes(1))
		viewport(t, phone, shots, "teams-viewer-job-390px")
		noSideways(t, phone, "a job's page")
	})

	t.Run("an editor of billing pauses a billing job, and the audit shows it", func(t *testing.T) {
		editor := newTab(t, browser)
		run(t, editor, signIn(srv.URL, editorToken),
			waitJS(`location.hash === "#/ns/billing/"`),
			waitJS(`document.querySelector("#session").textContent.includes("billing-ci · editor of billing")`),
			waitJS(enabledLink("#new-job")+` && document.querySelector("#new-job").getAttribute("aria-disabled") !== "true"`),
			waitJS(refusedWith("#step-down", "Only an admin")),
			chromedp.Click(chromedp.CSS(`tr[data-job="report"] td a`)),
			waitJS(`location.hash === "#/ns/billing/jobs/report"`),
			waitJS(enabled("#run-now")),
			chromedp.SendKeys(chromedp.CSS("#reason"), "month-end freeze"),
			confirmByKeyboard("#pause"),
			waitJS(`document.querySelector('h1 [data-badge="paused"]') !== null`),
			waitJS(enabled("#resume")),
			waitJS(`document.querySelector("#flash").textContent.includes("report is paused")`))
		var job struct{ Paused bool }
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/namespaces/billing/jobs/report", &job))
		assert.True(t, job.Paused)

		row := `[...document.querySelectorAll("table.audit tbody tr")].find((r) => r.textContent.includes("pause"))`
		run(t, editor,
			chromedp.Click(chromedp.CSS(`[data-nav="audit"]`)),
			waitJS(`location.hash === "#/ns/billing/audit"`),
			waitJS(row+` !== undefined`),
			waitJS(row+`.textContent.includes("report") && `+row+`.textContent.includes("billing-ci") && `+row+`.textContent.includes("month-end freeze")`),
			waitJS(row+`.querySelector('a[href="#/ns/billing/jobs/report"]') !== null`),
			// The namespace's audit holds its own rows only.
			waitJS(`![...document.querySelectorAll("table.audit tbody tr")].some((r) => r.textContent.includes("default-report"))`))
		screenshot(t, editor, shots, "teams-editor-audit")
	})

	t.Run("an editor of default may not act on the built-in jobs", func(t *testing.T) {
		tab := newTab(t, browser)
		run(t, tab, signIn(srv.URL, defaultEditor),
			waitJS(`location.hash === "" || location.hash === "#/"`),
			waitJS(`document.querySelector('tr[data-job="plan-change"]') !== null`),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/plan-change"),
			waitJS(refusedWith("#run-now", "built-in")),
			waitJS(refusedWith("#pause", "built-in")),
			chromedp.Navigate(srv.URL+"/ui/#/jobs/default-report"),
			waitJS(`document.querySelector('h1 [data-badge="kind"]') !== null`),
			waitJS(enabled("#run-now")+` && `+enabled("#delete")))
	})

	t.Run("switching namespace shows that namespace's jobs", func(t *testing.T) {
		tab := newTab(t, browser)
		pick := func(ns string) chromedp.Action[chromedp.Void] {
			return js(fmt.Sprintf(`(() => { const s = document.querySelector("#ns-picker"); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})) })()`, ns))
		}
		run(t, tab, signIn(srv.URL, fullToken),
			waitJS(`document.querySelector('tr[data-job="plan-change"]') !== null && document.querySelector('tr[data-job="default-report"]') !== null`),
			waitJS(`[...document.querySelectorAll("#ns-picker option")].map((o) => o.value).join() === "billing,bulk,default,ops"`),
			waitJS(`document.querySelector("#ns-picker").value === "default"`),
			pick("billing"),
			waitJS(`location.hash === "#/ns/billing/"`),
			waitJS(jobRows("export", "invoice", "report")),
			pick("ops"),
			waitJS(`location.hash === "#/ns/ops/"`),
			waitJS(jobRows("backup")),
			chromedp.Click(chromedp.CSS(`tr[data-job="backup"] td a`)),
			waitJS(`location.hash === "#/ns/ops/jobs/backup"`),
			waitJS(`document.querySelector('h1 [data-badge="kind"]') !== null && document.querySelector("#ns-picker").value === "ops"`))
		// The address carries the namespace: a reload, or the link sent to a colleague, opens the same page.
		run(t, tab, chromedp.Reload(),
			waitJS(`document.querySelector("h1").textContent.startsWith("backup")`),
			waitJS(`document.querySelector('h1 [data-badge="kind"]') !== null && document.querySelector("#ns-picker").value === "ops"`),
			waitJS(`document.querySelector('[data-nav="audit"]').getAttribute("href") === "#/ns/ops/audit"`))
		viewport(t, tab, shots, "teams-namespace-job")
		run(t, tab, pick("default"),
			waitJS(`location.hash === "#/"`),
			waitJS(`document.querySelector('tr[data-job="plan-change"]') !== null`))
		// With the arrow keys the choice moves without leaving the page; Enter opens it, and
		// the focus stays on the picker.
		run(t, tab, js(`document.querySelector("#ns-picker").focus()`),
			chromedp.KeyEvent(kb.ArrowUp),
			waitJS(`document.querySelector("#ns-picker").value === "bulk"`),
			settled(),
			waitJS(`location.hash === "#/" && document.querySelector('tr[data-job="plan-change"]') !== null`),
			chromedp.KeyEvent(kb.ArrowUp),
			waitJS(`document.querySelector("#ns-picker").value === "billing"`),
			chromedp.KeyEvent(kb.Enter),
			waitJS(`location.hash === "#/ns/billing/"`),
			waitJS(jobRows("export", "invoice", "report")),
			focusedOn("#ns-picker"))
	})

	t.Run("the job list pages through 250 jobs", func(t *testing.T) {
		tab := newTab(t, browser)
		net := watch(t, tab)
		names := `[...document.querySelectorAll("tr[data-job]")].map((r) => r.dataset.job)`
		first, last := names+`[0]`, names+`.at(-1)`
		run(t, tab, signIn(srv.URL, fullToken),
			chromedp.Navigate(srv.URL+"/ui/#/ns/bulk/"),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 100 && `+first+` === "job-001" && `+last+` === "job-100"`),
			waitJS(`document.querySelector("#jobs-count").textContent.includes("more on the next page")`),
			waitJS(enabled("#jobs-next")+` && document.querySelector("#jobs-prev").hidden`),
			refreshes(1))
		viewport(t, tab, shots, "teams-paging-top")
		run(t, tab, js(`document.querySelector("#jobs-next").scrollIntoView({block: "center"})`))
		viewport(t, tab, shots, "teams-paging-pager")
		run(t, tab,
			chromedp.Click(chromedp.CSS("#jobs-next")),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 100 && `+first+` === "job-101" && `+last+` === "job-200"`),
			waitJS(`document.querySelector("#jobs-count").textContent.includes("101–200")`),
			// After a move the focus is on the count, at the top of the new page.
			focusedOn("#jobs-count"),
			chromedp.Click(chromedp.CSS("#jobs-prev")),
			waitJS(first+` === "job-001" && document.querySelector("#jobs-prev").hidden`),
			chromedp.Click(chromedp.CSS("#jobs-next")),
			waitJS(first+` === "job-101"`),
			chromedp.Click(chromedp.CSS("#jobs-next")),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 50 && `+first+` === "job-201" && `+last+` === "job-250"`),
			waitJS(`document.querySelector("#jobs-next").hidden && !document.querySelector("#jobs-count").textContent.includes("more on the next page")`),
			chromedp.Click(chromedp.CSS("#jobs-first")),
			waitJS(first+` === "job-001" && document.querySelector("#jobs-prev").hidden`),
			// The filter asks the server, which looks at every job, and starts on the first
			// page of what matches.
			chromedp.SendKeys(chromedp.CSS("#job-filter"), "job-24"),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 10 && `+first+` === "job-240"`),
			waitJS(`document.querySelector("#jobs-count").textContent.includes("10 of 250 jobs match the filters")`),
			js(`document.querySelector("#job-filter").value = ""; document.querySelector("#job-filter").dispatchEvent(new Event("input"))`),
			waitJS(`document.querySelectorAll("tr[data-job]").length === 100 && `+first+` === "job-001"`))
		var lists []string
		for _, u := range net.answered("/v1/namespaces/bulk/jobs") {
			if !strings.Contains(u, "/jobs/") {
				lists = append(lists, u)
			}
		}
		require.NotEmpty(t, lists)
		for _, u := range lists {
			assert.Regexp(t, `[?&]limit=\d+`, u, "the overview read the whole list")
		}
	})
}

// idleJob is a runtime job that never runs: disabled, so it calls nothing from this machine.
func idleJob(name string) string {
	return fmt.Sprintf(`{"name": %q, "schedule": "0 2 * * *", "enabled": false, "http": {"url": "https://example.com/hook"}}`, name)
}

// jobRows is true when the job list shows exactly these jobs, in this order.
func jobRows(names ...string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("tr[data-job]")].map((r) => r.dataset.job).join() === %q`, strings.Join(names, ","))
}

// refusedWith is true when the control sel is shown, unavailable (aria-disabled), and says
// why in its tooltip and in a visible description that holds words.
func refusedWith(sel, words string) string {
	return fmt.Sprintf(`(() => { const c = document.querySelector(%q);
		if (!c || c.getAttribute("aria-disabled") !== "true" || c.getClientRects().length === 0 || !c.title.includes(%q)) return false;
		const note = document.getElementById(c.getAttribute("aria-describedby") || "");
		return !!note && note.getClientRects().length > 0 && note.textContent.includes(%q) })()`, sel, words, words)
}

// noSideways fails when the page is wider than the screen.
func noSideways(t *testing.T, tab context.Context, what string) {
	t.Helper()
	overflow, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	require.NoError(t, err)
	assert.False(t, overflow, "%s scrolls sideways at 390 px", what)
}

// call sends a request with token and decodes its JSON answer, if any.
func call(t *testing.T, base, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}
