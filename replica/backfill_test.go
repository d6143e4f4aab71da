package replica_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const token = "backfill-test-token"

// call is what a receiver saw of one call.
type call struct{ key, slot string }

type receiver struct {
	mu    sync.Mutex
	calls []call
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.calls = append(rc.calls, call{r.Header.Get("Idempotency-Key"), r.Header.Get("X-Scheduler-Scheduled-At")})
}

func (rc *receiver) seen() []call {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]call(nil), rc.calls...)
}

func do(t *testing.T, srv *replicatest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var m map[string]any
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	}
	return res.StatusCode, m
}

// Three missed slots of an hourly job are backfilled: each runs once, in order, under its
// own slot time and the key its scheduled call would have carried, which a re-run of the
// slot carries too; a second identical backfill runs nothing.
func TestBackfillRunsMissedSlotsOnceUnderTheirKeys(t *testing.T) {
	rc := &receiver{}
	target := httptest.NewServer(rc)
	t.Cleanup(target.Close)
	srv := replicatest.Start(t, replicatest.Options{Token: token, Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}}})
	status, body := do(t, srv, "POST", "/v1/jobs", `{"name": "hourly", "schedule": "0 * * * *", "catchup": "0s", "http": {"url": "`+target.URL+`"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)

	// The cluster was down for the last three slots: catch-up 0 recorded them missed.
	hour := time.Now().UTC().Truncate(time.Hour)
	slots := []time.Time{hour.Add(-3 * time.Hour), hour.Add(-2 * time.Hour), hour.Add(-time.Hour)}
	ctx := context.Background()
	_, err := srv.DB.Pool.Exec(ctx, `UPDATE job_definitions SET created_at = $1 WHERE name = 'hourly'`, hour.Add(-4*time.Hour))
	require.NoError(t, err)
	for _, s := range slots {
		storetest.Run(ctx, t, srv.DB.Pool, storetest.RunOpts{Job: "hourly", Status: store.StatusMissed, ScheduledAt: s,
			FinishedAt: time.Now(), Reason: "the cluster was down"})
	}
	window := fmt.Sprintf(`{"since": %q, "until": %q, "only": "missed"}`,
		hour.Add(-3*time.Hour-30*time.Minute).Format(time.RFC3339), hour.Add(-30*time.Minute).Format(time.RFC3339))

	status, body = do(t, srv, "POST", "/v1/jobs/hourly/backfill", strings.Replace(window, "}", `, "dry_run": true}`, 1))
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Len(t, body["slots"], 3, "a dry run lists the missed slots")
	assert.Empty(t, rc.seen(), "and calls nothing")

	status, body = do(t, srv, "POST", "/v1/jobs/hourly/backfill", window)
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	id := fmt.Sprintf("%.0f", body["id"])
	require.Eventually(t, func() bool {
		_, b := do(t, srv, "GET", "/v1/backfills/"+id, "")
		return b["state"] == "done"
	}, 30*time.Second, 50*time.Millisecond, "the backfill ends")
	calls := rc.seen()
	require.Len(t, calls, 3, "each missed slot is called once")
	for i, s := range slots {
		assert.Equal(t, s.Format(time.RFC3339), calls[i].slot, "in order, under the slot's own time")
	}

	// A re-run of the middle slot carries the key its backfill run carried.
	var missedID int64
	require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE job = 'hourly' AND scheduled_at = $1 AND status = 'missed'`, slots[1]).Scan(&missedID))
	status, body = do(t, srv, "POST", fmt.Sprintf("/v1/runs/%d/rerun", missedID), "")
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	assert.Equal(t, "rerun", body["trigger"])
	require.Eventually(t, func() bool { return len(rc.seen()) == 4 }, 30*time.Second, 20*time.Millisecond, "the re-run calls")
	assert.Equal(t, calls[1], rc.seen()[3], "the re-run carries the slot's key and time")
	for _, c := range calls {
		assert.NotEmpty(t, c.key)
	}
	assert.NotEqual(t, calls[0].key, calls[1].key, "each slot has its own key")

	// Nothing is left to backfill.
	status, body = do(t, srv, "POST", "/v1/jobs/hourly/backfill", window)
	assert.Equal(t, http.StatusOK, status, "%v", body)
	assert.Nil(t, body["id"])
	assert.Empty(t, body["slots"])
	require.Eventually(t, func() bool {
		status, body = do(t, srv, "GET", "/v1/jobs/hourly/slots?since="+hour.Add(-3*time.Hour-30*time.Minute).Format(time.RFC3339)+
			"&until="+hour.Add(-30*time.Minute).Format(time.RFC3339), "")
		return status == http.StatusOK && body["counts"].(map[string]any)["succeeded"] == float64(3)
	}, 30*time.Second, 20*time.Millisecond, "the slots view shows the three slots succeeded: %v", body)
}
