package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A backfill's body is checked in full before any slot is read: every wrong field in one
// 422, but a reason the audit log cannot hold (400) or a body that is not the schema's (400)
// first.
func TestBackfillRefusesWhatItCannotRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	cases := []struct {
		name, body string
		status     int
		slug       string
		fields     []string
	}{
		{"no window", `{}`, http.StatusUnprocessableEntity, "invalid-request", []string{"since", "until"}},
		{"no body", ``, http.StatusUnprocessableEntity, "invalid-request", []string{"since", "until"}},
		{"since after until", fmt.Sprintf(`{"since": %q, "until": %q}`, at(-time.Hour), at(-2*time.Hour)),
			http.StatusUnprocessableEntity, "invalid-request", []string{"since"}},
		{"until ahead", fmt.Sprintf(`{"since": %q, "until": %q, "only": "some"}`, at(-time.Hour), at(time.Hour)),
			http.StatusUnprocessableEntity, "invalid-request", []string{"until", "only"}},
		{"reason first", `{"reason": "a\u0000b"}`, http.StatusBadRequest, "invalid-request", []string{"reason"}},
		{"since not a time", `{"since": ""}`, http.StatusBadRequest, "invalid-json", nil},
		{"unknown member", `{"from": "x"}`, http.StatusBadRequest, "invalid-json", []string{"from"}},
	}
	for _, tc := range cases {
		res := a.do("POST", "/v1/jobs/plan-change/backfill", tc.body, nil)
		require.Equal(t, tc.status, res.Status, "%s: %s", tc.name, res.Body)
		assert.Equal(t, tc.slug, res.problemType(t), tc.name)
		var fields []string
		errs, _ := res.JSON(t)["errors"].([]any)
		for _, e := range errs {
			fields = append(fields, e.(map[string]any)["field"].(string))
		}
		assert.Equal(t, tc.fields, fields, tc.name)
	}
	assert.Zero(t, a.count(`SELECT count(*) FROM scheduler_backfills`))

	// A dry run makes none, and answers the slots that would run.
	res := a.do("POST", "/v1/jobs/plan-change/backfill", fmt.Sprintf(`{"since": %q, "until": %q, "only": "all", "dry_run": true}`,
		at(-48*time.Hour), at(-time.Minute)), nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	m := res.JSON(t)
	assert.Nil(t, m["id"])
	assert.Equal(t, true, m["dry_run"])
	assert.IsType(t, []any{}, m["slots"])
	assert.Zero(t, a.count(`SELECT count(*) FROM scheduler_backfills`))
}
