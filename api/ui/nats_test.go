package ui_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// A NATS job is made with the form as an HTTP job is: its fields appear with its kind, and
// the job's page and the overview name it NATS, with its subject and server.
func TestConsoleNATSJob(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken})
	requireRuntimeRoutes(t, srv.URL)
	tab := newTab(t, browser)
	run(t, tab, signIn(srv.URL, fullToken))

	run(t, tab, newJobForm(srv.URL),
		chromedp.SendKeys(chromedp.CSS("#jf-name"), "orders"),
		chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "*/5 * * * *"),
		js(`const k = document.querySelector("#jf-kind"); k.value = "nats"; k.dispatchEvent(new Event("change"))`),
		waitJS(`!document.querySelector("#jf-nats").hidden && document.querySelector("#jf-http").hidden`),
		chromedp.SendKeys(chromedp.CSS("#jf-nats-url"), "nats://nats.example.com:4222"),
		chromedp.SendKeys(chromedp.CSS("#jf-nats-subject"), "orders.daily"),
		chromedp.SendKeys(chromedp.CSS("#jf-nats-body"), `{"report":"daily"}`),
		// Disabled, so it never connects from this machine.
		chromedp.Click(chromedp.CSS("#jf-enabled")),
		waitJS(`!document.querySelector("#jf-enabled").checked`),
		chromedp.Click(chromedp.CSS("#save")),
		waitJS(`location.hash === "#/jobs/orders"`),
		waitJS(`document.querySelector('h1 [data-badge="kind"]').textContent === "NATS"`),
		waitJS(`document.querySelector("#job-target").textContent === "NATS publish to orders.daily on nats://nats.example.com:4222"`),
		waitJS(`document.querySelector("#job-nats-subject").textContent === "orders.daily"`))

	// Edited, it keeps its kind and fields.
	run(t, tab,
		js(`document.querySelector("#edit").click()`),
		waitJS(`document.querySelector("#jf-kind").value === "nats" && document.querySelector("#jf-nats-subject").value === "orders.daily"`))
}
