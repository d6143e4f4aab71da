package ui_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// A job whose call authenticates with an OIDC token is made with the form, shown in words,
// and keeps its auth when edited: the form knows the third kind of authentication, so a
// save does not drop it.
func TestConsoleOIDCJob(t *testing.T) {
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	key, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, Runtime: config.Runtime{SecretBox: seal.New(key)}})
	tab := newTab(t, browser)
	run(t, tab, signIn(srv.URL, fullToken))

	setAuth := js(`const s = document.querySelector("#jf-http-auth"); s.value = "oidc"; s.dispatchEvent(new Event("change"))`)
	run(t, tab, newJobForm(srv.URL),
		chromedp.SendKeys(chromedp.CSS("#jf-name"), "oidc-job"),
		chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "*/5 * * * *"),
		chromedp.SendKeys(chromedp.CSS("#jf-http-url"), "https://example.com/hook"),
		chromedp.Click(chromedp.CSS("#jf-enabled")), // never calls example.com from here
		setAuth,
		waitJS(`!document.querySelector('[data-field="http.auth.oidc.audience"]').hidden`),
		waitJS(`document.querySelector('[data-field="http.auth.bearer_secret"]').hidden`),
		chromedp.SendKeys(chromedp.CSS("#jf-http-auth-oidc-audience"), "billing"),
		chromedp.Click(chromedp.CSS("#save")),
		waitJS(`location.hash === "#/jobs/oidc-job"`),
		waitJS(`document.querySelector("#definition").textContent.includes("OIDC token signed by the scheduler for audience billing")`))

	audience := func() string {
		var job struct {
			Definition struct {
				HTTP struct {
					Auth struct {
						OIDC struct{ Audience string } `json:"oidc"`
					}
				}
			}
		}
		require.Equal(t, http.StatusOK, get(t, srv.URL, "/v1/jobs/oidc-job", &job))
		return job.Definition.HTTP.Auth.OIDC.Audience
	}
	assert.Equal(t, "billing", audience())

	run(t, tab,
		chromedp.Navigate(srv.URL+"/ui/#/jobs/oidc-job"),
		waitJS(enabledLink("#edit")),
		chromedp.Click(chromedp.CSS("#edit")),
		waitJS(`document.querySelector("#jf-http-auth").value === "oidc" && document.querySelector("#jf-http-auth-oidc-audience").value === "billing"`),
		js(`document.querySelector("#jf-schedule").value = ""`),
		chromedp.SendKeys(chromedp.CSS("#jf-schedule"), "0 * * * *"),
		chromedp.Click(chromedp.CSS("#save")),
		waitJS(`document.querySelector("#flash").textContent.includes("Saved oidc-job (version 2)")`))
	assert.Equal(t, "billing", audience(), "the edit kept the OIDC auth")
}
