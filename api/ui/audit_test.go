package ui_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// auditRow is the newest audit row of job's action, as GET /v1/audit lists it.
func auditRow(t *testing.T, base, query string) map[string]any {
	t.Helper()
	var page struct {
		Actions []map[string]any `json:"actions"`
	}
	require.Equal(t, 200, get(t, base, "/v1/audit?"+query+"&limit=1", &page))
	require.NotEmpty(t, page.Actions, "no audit row for %s", query)
	return page.Actions[0]
}

// noCardPastTheScreen fails when a card of the stacked table sel is wider than the screen:
// it would scroll inside its table, cut off, while the page itself does not.
func noCardPastTheScreen(t *testing.T, tab context.Context, sel, what string) {
	t.Helper()
	widest, err := chromedp.Run(tab, chromedp.Evaluate[float64](fmt.Sprintf(
		`Math.max(0, ...[...document.querySelectorAll(%q)].map((tr) => tr.getBoundingClientRect().right - window.innerWidth))`, sel+" tbody tr")))
	require.NoError(t, err)
	assert.LessOrEqual(t, widest, 1.0, "%s: a card reaches %.0f px past the 390 px screen", what, widest)
	noSideways(t, tab, what)
}

// A deleted job, its history and its audit trail in the console, each action with its
// reason, at 390 and 1366 px, by keyboard, and clean for axe-core. Against the console
// before issue 34's fixes every step here failed: the form and the step-down asked no
// reason, the deleted job's page showed live buttons on placeholders and polled its 404,
// the audit page had no filters and no diff, and its cards were wider than a phone.
func TestConsoleDeletedJobAndAudit(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken})
	shots := screenshotDir(t)
	axe := axeSource(t)
	requireRuntimeRoutes(t, srv.URL)
	const job = "old-export"
	code, _ := call(t, srv.URL, fullToken, "POST", "/v1/jobs", `{"name": "old-export", "schedule": "0 2 * * *", "enabled": false,
		"description": "first owner", "http": {"url": "https://billing.internal/export"}}`)
	require.Equal(t, 201, code)
	runID := seedAttempts(t, srv, job)

	tab := newTab(t, browser)
	run(t, tab, chromedp.EmulateViewport(1366, 900), signIn(srv.URL, fullToken))

	t.Run("an edit keeps the reason typed in the form", func(t *testing.T) {
		run(t, tab, js(`location.hash = "#/jobs/old-export/edit"`),
			waitJS(enabled("#save")+` && document.querySelector("#jf-description").value === "first owner"`),
			js(`document.querySelector("#jf-description").value = ""`),
			chromedp.SendKeys(chromedp.CSS("#jf-description"), "second owner"),
			chromedp.SendKeys(chromedp.CSS("#jf-reason"), "handed over ✓"))
		axeClean(t, tab, axe, "the job form with its reason")
		run(t, tab, js(`document.querySelector("#save").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`location.hash === "#/jobs/old-export" && document.querySelector("#flash").textContent.includes("Saved")`))
		row := auditRow(t, srv.URL, "job="+job+"&action=update")
		assert.Equal(t, "handed over ✓", row["reason"])
	})

	t.Run("a delete asks why in its confirmation and keeps it", func(t *testing.T) {
		run(t, tab, waitJS(enabled("#delete")+` && !document.querySelector("#delete").hidden`),
			js(`document.querySelector("#delete").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`document.querySelector("#confirm").open && document.activeElement === document.querySelector("#confirm-reason")`))
		viewport(t, tab, shots, "deleted-confirm-1366px")
		axeClean(t, tab, axe, "the delete's confirmation with its reason")
		// Enter in the reason confirms (the form's first button is Cancel).
		run(t, tab, chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "moved to cron, 50% done"), chromedp.KeyEvent("\r"),
			waitJS(`!document.querySelector("#confirm").open && document.querySelector("#flash").textContent.includes("Deleted")`))
		row := auditRow(t, srv.URL, "job="+job+"&action=delete")
		assert.Equal(t, "moved to cron, 50% done", row["reason"])
	})

	t.Run("the deleted job's page says when, by whom and why, keeps its history and stops asking", func(t *testing.T) {
		run(t, tab, js(`location.hash = "#/jobs/old-export"`),
			waitJS(`document.querySelector("#deleted-reason").textContent === "moved to cron, 50% done"`),
			waitJS(fmt.Sprintf(`document.querySelector('tr[data-run="%d"]')`, runID)),
			waitJS(`document.querySelector('[data-badge="deleted"]') && document.querySelector("#deleted-by").textContent.includes("full")
				&& document.querySelector("#last-definition").textContent.includes("second owner")`))
		run(t, tab, waitJS(`document.querySelector("#run-now").getClientRects().length === 0 && document.querySelector("#delete").getClientRects().length === 0`),
			waitJS(`!isLive(page) && !document.querySelector("#flash").textContent`))
		screenshot(t, tab, shots, "deleted-job-1366px")
		axeClean(t, tab, axe, "a deleted job's page")
	})

	t.Run("its audit trail: filtered, each change readable, by keyboard", func(t *testing.T) {
		run(t, tab, js(`document.querySelector("#job-audit").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`document.querySelector("#af-job").value === "old-export" && document.querySelectorAll("tr[data-action]").length === 3`),
			waitJS(`document.querySelector('tr[data-action="update"] ul.diff del').textContent.includes("first owner")
				&& document.querySelector('tr[data-action="update"] ul.diff ins').textContent.includes("second owner")
				&& document.querySelector('tr[data-action="update"] td[data-label="Reason"]').textContent === "handed over ✓"`))
		// The delete's definition opens and closes from its button, which keeps the focus.
		run(t, tab, js(`document.querySelector('tr[data-action="delete"] button[data-expand]').focus()`), chromedp.KeyEvent("\r"),
			waitJS(`document.querySelector('tr[data-action="delete"] ul.diff').textContent.includes("second owner") && document.activeElement.getAttribute("aria-expanded") === "true"`),
			refreshes(1), focusedOn(`tr[data-action="delete"] button[data-expand]`))
		screenshot(t, tab, shots, "audit-1366px")
		axeClean(t, tab, axe, "the audit page with a change shown")

		run(t, tab, js(`const s = document.querySelector("#af-action"); s.value = "delete"; s.dispatchEvent(new Event("change"))`),
			waitJS(`document.querySelectorAll("tr[data-action]").length === 1 && location.hash === "#/audit?job=old-export&action=delete"`))
		// Wrong filters are each marked, all at once.
		run(t, tab, js(`document.querySelector("#af-job").value = "Not a name";
			document.querySelector("#af-since").value = "2026-01-02T00:00:00"; document.querySelector("#af-until").value = "2026-01-01T00:00:00"`),
			js(`document.querySelector("#af-apply").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`document.querySelectorAll("#audit-problems li").length === 2 && document.querySelector("#af-job").getAttribute("aria-invalid") === "true"
				&& document.querySelector("#af-since").getAttribute("aria-invalid") === "true"`))
		axeClean(t, tab, axe, "the audit page with wrong filters")
		run(t, tab, js(`document.querySelector("#af-clear").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`!document.querySelector("#audit-problems li") && document.querySelectorAll("tr[data-action]").length >= 3`))
	})

	t.Run("a step-down asks why and keeps it", func(t *testing.T) {
		run(t, tab, js(`location.hash = "#/"`), waitJS(enabled("#step-down")),
			js(`document.querySelector("#step-down").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`document.querySelector("#confirm").open && document.querySelector("#confirm-reason").getClientRects().length > 0`),
			chromedp.SendKeys(chromedp.CSS("#confirm-reason"), "drain for the upgrade"),
			js(`document.querySelector("#confirm-ok").focus()`), chromedp.KeyEvent("\r"),
			waitJS(`document.querySelector("#flash").textContent.includes("to step down")`))
		assert.Equal(t, "drain for the upgrade", auditRow(t, srv.URL, "action=step-down")["reason"])
	})

	t.Run("at 390 px the audit cards and the deleted job fit the screen", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			js(`location.hash = "#/audit"`), waitJS(`document.querySelectorAll("tr[data-action]").length >= 3`),
			js(`document.querySelector('tr[data-action="update"] button[data-expand], tr[data-action="create"] button[data-expand]').click()`),
			waitJS(`document.querySelector('[id^="detail-"]:not([hidden]) ul.diff')`))
		screenshot(t, phone, shots, "audit-390px")
		noCardPastTheScreen(t, phone, "table.audit", "the audit page")
		axeClean(t, phone, axe, "the audit page at 390 px")
		run(t, phone, js(`location.hash = "#/jobs/`+url.PathEscape(job)+`"`), waitJS(`document.querySelector("#deleted-reason")`),
			waitJS(fmt.Sprintf(`document.querySelector('tr[data-run="%d"]')`, runID)))
		screenshot(t, phone, shots, "deleted-job-390px")
		noCardPastTheScreen(t, phone, "table.history", "the deleted job's page")
	})
}
