package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
)

// A dry run of an HTTP job calls nothing and records what it would have called on the run;
// a trigger's body and headers reach the target of a real run, beside the job's own.
func TestDryRunRecordsWhatItWouldDoAndInputsReachTheTarget(t *testing.T) {
	db, url := newDB(t)
	var calls atomic.Int64
	var gotBody, gotHeader atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		gotBody.Store(string(b[:n]))
		gotHeader.Store(r.Header.Get("X-Report-Day") + "|" + r.Header.Get("X-Team"))
	}))
	t.Cleanup(srv.Close)
	createDefinition(t, db, `{"name": "hook", "schedule": "0 0 1 1 *", "http": {"url": "`+srv.URL+`", "method": "POST",
		"body": "{\"day\": \"today\"}", "headers": {"X-Team": "billing"}}}`)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32")})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	run, _, err := db.QueueManualRun(context.Background(), "hook", nil, []byte(`{"dry_run": true}`))
	require.NoError(t, err)
	awaitStatus(t, db, run.ID, store.StatusSucceeded)
	assert.Zero(t, calls.Load(), "a dry run calls nothing")
	attempts, err := db.Attempts(context.Background(), run.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Contains(t, *attempts[0].Body, "dry run: would call POST "+srv.URL)

	run, _, err = db.QueueManualRun(context.Background(), "hook", nil, []byte(`{"body": "{\"day\": \"2026-11-24\"}", "headers": {"X-Report-Day": "24"}}`))
	require.NoError(t, err)
	awaitStatus(t, db, run.ID, store.StatusSucceeded)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, waitTimeout, 10*time.Millisecond)
	assert.Equal(t, `{"day": "2026-11-24"}`, gotBody.Load())
	assert.Equal(t, "24|billing", gotHeader.Load())
}
