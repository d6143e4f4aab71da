package engine

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/notify/deliver"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// marker is in every secret value of these tests: no text the scheduler records or logs may
// hold it, in whichever encoding a value that holds it travels (all of them keep letters).
const marker = "SeCrEtPaRt"

// leaks lists the encodings of v that text holds: v itself, JSON- and Go-escaped, URL-encoded,
// hex, and base64 (std and URL alphabets) standing alone or after each prefix (as in
// "Bearer <v>" or "user:<v>"), by the characters that only v's bytes determine.
func leaks(text, v string, prefixes ...string) []string {
	j, _ := json.Marshal(v)
	forms := map[string]string{"raw": v, "json": string(j[1 : len(j)-1]), "quote": strconv.Quote(v)[1 : len(strconv.Quote(v))-1],
		"ascii": strconv.QuoteToASCII(v)[1 : len(strconv.QuoteToASCII(v))-1], "query": url.QueryEscape(v), "path": url.PathEscape(v),
		"hex": hex.EncodeToString([]byte(v)), "HEX": strings.ToUpper(hex.EncodeToString([]byte(v)))}
	for _, p := range append(prefixes, "") {
		for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding} {
			s := enc.EncodeToString([]byte(p + v))
			start, end := (8*len(p)+5)/6, 8*(len(p)+len(v))/6
			forms[fmt.Sprintf("base64 %s after %q", name, p)] = s[start:end]
		}
	}
	var found []string
	for name, f := range forms {
		if strings.Contains(text, f) {
			found = append(found, name)
		}
	}
	if strings.Contains(text, marker) {
		found = append(found, "the marker")
	}
	return found
}

// The attack: a Slack url_secret whose value holds a quote, a backslash or a control
// character. Its delivery fails (the URL does not parse, or the receiver redirects to it),
// and the error recorded for the namespace's viewers and the log lines hold no form of it.
func TestAttackSlackSecretNeverShowsInNotificationErrors(t *testing.T) {
	t.Parallel()
	db, dbURL := newDB(t)
	target := failing(t)
	// A receiver that sends the caller back where it came from: the error names the
	// location, URL-encoded.
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+r.Host+r.URL.String(), http.StatusFound)
	}))
	t.Cleanup(back.Close)
	values := map[string]string{
		"SLACK_CONTROL":  back.URL + "/services/T0/B0/" + marker + "\"q\\b\n\x01end",
		"SLACK_REDIRECT": back.URL + "/services/T0/B0/" + marker + "\"q\\b<&>+ é",
	}
	var logs syncBuffer
	n := startNode(t, dbURL, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond,
		log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		notifications: func(db *store.DB) *deliver.Service {
			g, err := targets.NewGuard([]string{"127.0.0.1/32"})
			require.NoError(t, err)
			return deliver.New(deliver.Config{DB: db, Caller: targets.NewCaller(targets.Config{Guard: g}),
				Interval: time.Second, AttemptTimeout: time.Second, PublicURL: "https://scheduler.example.com",
				Secret: func(_ context.Context, _, name string) (string, []string, error) {
					return values[name], nil, nil
				}})
		}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for name := range values {
		job := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		createDefinition(t, db, `{"name": "`+job+`", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "`+target.URL+`"},
			"notify": [{"on": ["failed"], "slack": {"url_secret": "`+name+`"}}]}`)
		awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
		awaitStatus(t, db, queueRun(t, db, job), store.StatusFailed)
	}
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries WHERE last_error IS NOT NULL`) == len(values)
	}, waitTimeout, 20*time.Millisecond, "each delivery fails")

	rows, err := db.Pool.Query(context.Background(), `SELECT job, last_error FROM scheduler_notification_deliveries`)
	require.NoError(t, err)
	errs := map[string]string{}
	for rows.Next() {
		var job, lastError string
		require.NoError(t, rows.Scan(&job, &lastError))
		errs[job] = lastError
	}
	require.NoError(t, rows.Err())
	for name, v := range values {
		job := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		assert.Empty(t, leaks(errs[job], v), "%s's error: %s", job, errs[job])
		assert.Empty(t, leaks(logs.String(), v), "the log holds %s's value", name)
	}
	assert.Equal(t, "secret SLACK_CONTROL does not hold a Slack incoming webhook's URL (https://hooks.slack.com/services/...): "+
		"store the URL Slack gave for the webhook as its value", errs["slack-control"], "a URL that does not parse is not quoted")
	assert.Contains(t, errs["slack-redirect"], "redirect to [secret] not followed", "the error still says where the secret stood")
	assert.Contains(t, logs.String(), "sending a notification failed", "the log was captured")
}

// The attack: a target echoes what it receives — headers and body, JSON-escaped,
// URL-encoded, base64 and hex — and redirects to a URL holding the secret. The run's
// attempts (body and error), its error and the log show [secret] in its place, never a form
// of the value.
func TestAttackEchoingTargetShowsOnlySecretMarkers(t *testing.T) {
	t.Parallel()
	db, dbURL := newDB(t)
	token := marker + `-tok"en\with/slash<&>+ é`
	key := marker + `-key'"\\`
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		auth, xkey := r.Header.Get("Authorization"), r.Header.Get("X-Key")
		js, _ := json.Marshal(map[string]any{"headers": r.Header, "body": string(body)})
		w.Header().Set("Location", "/login?next="+url.QueryEscape(auth)+"&key="+url.QueryEscape(xkey))
		w.WriteHeader(http.StatusFound)
		fmt.Fprintf(w, "%s\nquery %s path %s\nb64 %s url64 %s raw64 %s\nhex %x quoted %q basic %s\n", js,
			url.QueryEscape(auth), url.PathEscape(xkey),
			base64.StdEncoding.EncodeToString([]byte(auth)), base64.URLEncoding.EncodeToString([]byte(xkey)),
			base64.RawStdEncoding.EncodeToString([]byte("user:"+xkey)), xkey, auth,
			base64.StdEncoding.EncodeToString([]byte("api:"+xkey)))
	}))
	t.Cleanup(echo.Close)
	var logs syncBuffer
	rt := runtimeFor(t, "127.0.0.1/32")
	rt.Secrets = secrets.New(map[string]string{"TOKEN": token, "KEY": key}, nil, db.DB)
	n := startNode(t, dbURL, "a", nodeOptions{runtime: rt,
		log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, def := range []string{
		`{"name": "bearer", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "` + echo.URL + `/echo",
			"method": "POST", "body": "hello", "auth": {"bearer_secret": "TOKEN"}, "headers": {"X-Key": "none"}}}`,
		`{"name": "header", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "` + echo.URL + `/echo",
			"auth": {"header": "X-Key", "header_secret": "KEY"}}}`,
		`{"name": "signed", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "` + echo.URL + `/echo",
			"auth": {"header": "X-Key", "header_secret": "KEY"}, "signing_secret": "TOKEN"}}`,
	} {
		createDefinition(t, db, def)
		awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
	}
	for _, job := range []string{"bearer", "header", "signed"} {
		r := awaitFinished(t, db, queueRun(t, db, job))
		require.Equal(t, store.StatusFailed, r.Status, "a redirect is not followed")
		require.NotNil(t, r.Error)
		attempts, err := db.Attempts(context.Background(), r.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		a := attempts[0]
		require.NotNil(t, a.Body)
		require.NotNil(t, a.Error)
		for _, text := range []string{*r.Error, *a.Body, *a.Error} {
			assert.Empty(t, leaks(text, token, "Bearer "), "%s: %s", job, text)
			assert.Empty(t, leaks(text, key, "user:", "api:"), "%s: %s", job, text)
		}
		assert.Contains(t, *a.Body, "[secret]", "%s: the body says where the secret stood", job)
		assert.Contains(t, *a.Error, "[secret]", "%s: the error says where the secret stood", job)
	}
	assert.Empty(t, leaks(logs.String(), token, "Bearer "))
	assert.Empty(t, leaks(logs.String(), key, "user:", "api:"))
	assert.Contains(t, logs.String(), "call attempt", "the log was captured")
}
