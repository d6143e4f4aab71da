package ui_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// Who leads what in the console (#/partitions), at 1366 and 390 px, for any token: the
// replicas with their counts and the coordinator, the grid of partitions with each one's
// holder, and a partition whose holder stopped renewing it shown as held by nobody, until
// another replica takes it over (the page follows without a reload). The replica under test
// leads partition 0; two more replicas are rows that a loop renews the way their
// heartbeats would, and a third stopped renewing a minute ago.
func TestConsolePartitions(t *testing.T) {
	browser := startBrowser(t)
	srv := replicatest.Start(t, replicatest.Options{Token: fullToken, ReadToken: readToken})
	shots := screenshotDir(t)
	axe := axeSource(t)
	ctx := t.Context()
	// The attack: an instance id is any printable ASCII an operator (or whoever sets the
	// variable) gives, markup included. The page must show it as text, never run it.
	const hostile = `r<img src=x onerror="window.pwned=1">`
	for _, name := range []string{"invoices", "exports", "reports"} {
		status, out := call(t, srv.URL, fullToken, "POST", "/v1/jobs", idleJob(name))
		require.Less(t, status, 300, "%v", out)
	}
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO scheduler_cluster (partitions) VALUES (16)`, nil},
		// 1-4 the replica under test's, 5-9 replica-b's, 10-14 replica-c's, 15 replica-gone's.
		{`INSERT INTO scheduler_partitions (partition_id, epoch, term_id, holder, since, renewed_at, handovers)
		  SELECT g, 1 + g % 3, gen_random_uuid(),
		         CASE WHEN g <= 4 THEN $1 WHEN g <= 9 THEN 'replica-b' WHEN g <= 14 THEN 'replica-c' ELSE 'replica-gone' END,
		         now() - interval '20 minutes', CASE WHEN g = 15 THEN now() - interval '1 minute' ELSE now() END, g % 3
		  FROM generate_series(1, 15) AS g`, []any{srv.InstanceID}},
		{`INSERT INTO scheduler_instances (instance_id, host, version, http_addr, started_at, last_seen_at, is_leader)
		  VALUES ('replica-b', 'b', 'dev', '', now() - interval '1 hour', now(), false),
		         ('replica-c', 'c', 'dev', '', now() - interval '1 hour', now(), false),
		         ($1, 'd', 'dev', '', now() - interval '1 hour', now(), false)`, []any{hostile}},
		{`UPDATE job_definitions SET partition_id = CASE name WHEN 'invoices' THEN 5 WHEN 'exports' THEN 5 ELSE 15 END`, nil},
	} {
		_, err := srv.DB.Pool.Exec(ctx, step.sql, step.args...)
		require.NoError(t, err, step.sql)
	}
	// The other replicas' heartbeats: every live holder renews its partitions and its row.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	var renewing sync.WaitGroup
	renewing.Add(1)
	go func() {
		defer renewing.Done()
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = srv.DB.Pool.Exec(renewCtx, `UPDATE scheduler_partitions SET renewed_at = now() WHERE holder <> 'replica-gone'`)
			_, _ = srv.DB.Pool.Exec(renewCtx, `UPDATE scheduler_instances SET last_seen_at = now() WHERE instance_id IN ('replica-b', 'replica-c', $1)`, hostile)
			select {
			case <-renewCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { stopRenewing(); renewing.Wait() })

	replicaRow := func(id string, partitions int, coordinator bool) string {
		return fmt.Sprintf(`(() => { const r = document.querySelector('#partition-replicas tr[data-key=%q]'); if (!r) return false;
			const c = [...r.querySelectorAll("td")].map((d) => d.textContent.trim());
			return c[2] === %q && r.querySelector(".badge.leader") !== null === %t })()`, id, fmt.Sprint(partitions), coordinator)
	}
	cell := func(p int) string {
		return fmt.Sprintf(`document.querySelector('#partition-grid li[data-key="%d"]')`, p)
	}

	t.Run("a viewer sees who leads what, and a partition nobody renews", func(t *testing.T) {
		tab := newTab(t, browser)
		run(t, tab, chromedp.EmulateViewport(1366, 900), signIn(srv.URL, readToken),
			chromedp.Click(chromedp.CSS(`[data-nav="partitions"]`)),
			waitJS(`location.hash === "#/partitions" && document.title === "Partitions · scheduler"`),
			waitJS(`document.querySelector("#partitions-intro").textContent.startsWith("16 partitions.")`),
			waitJS(replicaRow(srv.InstanceID, 5, true)), waitJS(replicaRow("replica-b", 5, false)), waitJS(replicaRow("replica-c", 5, false)),
			waitJS(`document.querySelectorAll("#partition-grid li").length === 16`),
			waitJS(cell(0)+`.classList.contains("coord") && `+cell(0)+`.getAttribute("aria-label").includes("held by `+srv.InstanceID+`")`),
			waitJS(cell(5)+`.getAttribute("aria-label") === "partition 5: held by replica-b, 2 jobs"`),
			// replica-gone stopped renewing a minute ago: held by nobody, its jobs named.
			waitJS(cell(15)+`.classList.contains("unheld") && `+cell(15)+`.getAttribute("aria-label") === "partition 15: no holder, last replica-gone, 1 job"`),
			waitJS(`document.querySelector("#partitions-unheld").textContent.startsWith("1 partition has no holder")`),
			waitJS(`document.querySelector('#partition-list tr[data-key="15"]').textContent.includes("none (was replica-gone)")`),
			// The hostile id holds nothing, and is text.
			waitJS(fmt.Sprintf(`[...document.querySelectorAll("#partition-replicas tr")].some((r) => r.dataset.key === %s &&
				r.querySelector("td").textContent === %s && r.querySelectorAll("td")[2].textContent === "0")`, jsString(hostile), jsString(hostile))),
			waitJS(`window.pwned === undefined && document.querySelector("main img") === null`),
			setReload())
		screenshot(t, tab, shots, "partitions-1366")
		axeClean(t, tab, axe, "partitions")

		// replica-c takes partition 15 over: the page follows, without a reload.
		_, err := srv.DB.Pool.Exec(ctx, `UPDATE scheduler_partitions SET holder = 'replica-c', epoch = epoch + 1,
			since = now(), renewed_at = now(), handovers = handovers + 1 WHERE partition_id = 15`)
		require.NoError(t, err)
		run(t, tab, waitJS(cell(15)+`.getAttribute("aria-label") === "partition 15: held by replica-c, 1 job"`),
			waitJS(`document.querySelector("#partitions-unheld").textContent === ""`),
			waitJS(replicaRow("replica-c", 6, false)), noReload())
	})

	t.Run("at 390 px the replicas and the partitions fit the screen", func(t *testing.T) {
		phone := newTab(t, browser)
		run(t, phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), signIn(srv.URL, fullToken),
			js(`location.hash = "#/partitions"`), waitJS(replicaRow("replica-b", 5, false)),
			waitJS(`document.querySelectorAll("#partition-grid li").length === 16`))
		// The terms, a card each, are folded on a phone; a tap opens them.
		run(t, phone, waitJS(`!document.querySelector("#partition-terms").open`),
			chromedp.Click(chromedp.CSS(`#partition-terms > summary`)),
			waitJS(`document.querySelector('#partition-list tr[data-key="15"]').getClientRects().length > 0`))
		viewport(t, phone, shots, "partitions-390-screen")
		screenshot(t, phone, shots, "partitions-390")
		noCardPastTheScreen(t, phone, "#partition-replicas table", "the replicas")
		noCardPastTheScreen(t, phone, "#partition-list table", "the partitions' terms")
		axeClean(t, phone, axe, "partitions at 390 px")
	})
}
