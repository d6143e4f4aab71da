package ui_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// A River job is made with the form, shown with its target, args and uniqueness, and keeps
// its river fields when edited: the form knows the third kind, so a save does not drop it.
func TestConsoleRiverJob(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, Runtime: config.Runtime{
		SQLTargets: map[string]config.SQLTarget{"APP": {URL: "postgres://app_jobs:pw@127.0.0.1:1/app"}}}})
	tab := newTab(t, browser)
	run(t, tab, signIn(srv.URL, fullToken))

	run(t, tab, newJobForm(srv.URL),
		chromedp.SendKeys(chromedp.CSS("#jf-name"), "invoices"),
		chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "0 6 * * *"),
		chromedp.Click(chromedp.CSS("#jf-enabled")), // never runs from here
		js(`const k = document.querySelector("#jf-kind"); k.value = "river"; k.dispatchEvent(new Event("change"))`),
		waitJS(`!document.querySelector("#jf-river").hidden && document.querySelector("#jf-http").hidden`),
		chromedp.SendKeys(chromedp.CSS("#jf-river-target"), "APP"),
		chromedp.SendKeys(chromedp.CSS("#jf-river-kind"), "send_invoices"),
		chromedp.SendKeys(chromedp.CSS("#jf-river-queue"), "billing"),
		chromedp.SendKeys(chromedp.CSS("#jf-river-args"), `{"region": "eu"}`),
		chromedp.Click(chromedp.CSS("#jf-river-unique")),
		chromedp.Click(chromedp.CSS("#save")),
		waitJS(`location.hash === "#/jobs/invoices"`),
		waitJS(`document.querySelector("#job-target").textContent === "River send_invoices on APP (queue billing)"`),
		waitJS(`document.querySelector("#job-river-args").textContent.includes('"region": "eu"')`))

	river := func() map[string]any {
		var job struct {
			Kind       string `json:"kind"`
			Definition struct {
				River map[string]any `json:"river"`
			} `json:"definition"`
		}
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/invoices", &job))
		assert.Equal(t, "river", job.Kind)
		return job.Definition.River
	}
	want := map[string]any{"target": "APP", "kind": "send_invoices", "queue": "billing",
		"args": map[string]any{"region": "eu"}, "unique": true}
	assert.Equal(t, want, river())

	run(t, tab,
		chromedp.Navigate(srv.URL+"/ui/#/jobs/invoices"),
		waitJS(enabledLink("#edit")),
		chromedp.Click(chromedp.CSS("#edit")),
		waitJS(`document.querySelector("#jf-kind").value === "river" && document.querySelector("#jf-river-kind").value === "send_invoices"
			&& document.querySelector("#jf-river-unique").checked`),
		js(`document.querySelector("#jf-schedule").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "0 7 * * *"),
		chromedp.Click(chromedp.CSS("#save")),
		waitJS(`document.querySelector("#flash").textContent.includes("Saved invoices (version 2)")`))
	assert.Equal(t, want, river(), "the edit kept the river fields")

	// Args that are not JSON are refused on their field, nothing saved.
	run(t, tab,
		chromedp.Click(chromedp.CSS("#edit")),
		waitJS(`document.querySelector("#jf-river-args").value.includes("region")`),
		js(`document.querySelector("#jf-river-args").value = "{not json"`),
		chromedp.Click(chromedp.CSS("#save")),
		waitJS(`!document.querySelector("#jf-river-args-error").hidden`))
	b, _ := json.Marshal(river())
	assert.JSONEq(t, `{"target": "APP", "kind": "send_invoices", "queue": "billing", "args": {"region": "eu"}, "unique": true}`, string(b))
}
