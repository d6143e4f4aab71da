package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
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

func (l *netLog) errorLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errors...)
}

// refreshes waits until the page has refreshed its data n more times (app.js counts them
// in main's data-refreshes).
func refreshes(n int) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		now, err := chromedp.Evaluate[int](`Number(document.querySelector("main").dataset.refreshes || 0)`)(ctx, tgt)
		if err != nil {
			return err
		}
		_, err = waitJS(fmt.Sprintf(`Number(document.querySelector("main").dataset.refreshes || 0) >= %d`, now+n))(ctx, tgt)
		return err
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

// slowAPI delays every answer of the API (URLs under base+"/v1/") by latency, as a slow
// network or a busy replica does, so the page paints before its data arrives: the moment a
// layout shift can happen. (Lighthouse's throttled phone sees the same.)
func slowAPI(base string, latency float64) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tgt, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
			MatchedNetworkConditions: []*network.Conditions{{URLPattern: base + "/v1/*", Latency: latency, DownloadThroughput: -1, UploadThroughput: -1}}})
		return err
	})
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
	ctx, cancel := context.WithTimeout(tab, 2*stepTimeout)
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
