package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --prune deletes only what the same owner applied (the scheduler.dev/applied-by label,
// the file's name or --owner), and -l narrows it to the jobs carrying those labels.
func TestPruneIsScopedByOwnerAndSelector(t *testing.T) {
	t.Parallel()
	job := func(name, labels string) string {
		return `{"name":"` + name + `","kind":"http","version":1,"definition":{"name":"` + name +
			`","schedule":"0 2 * * *","http":{"url":"https://example.com/x"},"labels":` + labels + `}}`
	}
	list := `{"jobs":[` + strings.Join([]string{
		job("keep", `{"scheduler.dev/applied-by":"billing.yaml"}`),
		job("old-billing", `{"scheduler.dev/applied-by":"billing.yaml","team":"billing"}`),
		job("old-billing-other-team", `{"scheduler.dev/applied-by":"billing.yaml","team":"payroll"}`),
		job("by-hand", `{"team":"billing"}`),
		job("other-file", `{"scheduler.dev/applied-by":"payroll.yaml","team":"billing"}`),
	}, ",") + `],"next_cursor":null}`
	api, u := startFakeAPI(t, `{"admin":true}`, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs":
			_, _ = w.Write([]byte(list))
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			_, _ = w.Write([]byte(`{"name":"keep","version":2}`))
		}
		return true
	})
	file := filepath.Join(t.TempDir(), "billing.yaml")
	require.NoError(t, os.WriteFile(file, []byte("jobs:\n- name: keep\n  schedule: \"0 2 * * *\"\n  http: {url: \"https://example.com/x\"}\n"), 0o600))
	env := []string{"SCHEDULER_URL=" + u}
	deletes := func() []string {
		var out []string
		for l := range strings.SplitSeq(api.seen(), "\n") {
			if strings.HasPrefix(l, "DELETE ") {
				out = append(out, strings.TrimPrefix(l, "DELETE /v1/jobs/"))
			}
		}
		return out
	}

	code, out, stderr := runCLI(t, env, "apply", "-f", file, "--prune", "-l", "team=billing")
	require.Equal(t, exitOK, code, out+stderr)
	assert.Equal(t, []string{"old-billing"}, deletes(), "the file's own jobs of team billing only")

	api.paths = nil
	code, out, stderr = runCLI(t, env, "apply", "-f", file, "--prune")
	require.Equal(t, exitOK, code, out+stderr)
	assert.ElementsMatch(t, []string{"old-billing", "old-billing-other-team"}, deletes(), "every job billing.yaml applied")

	api.paths = nil
	code, out, stderr = runCLI(t, env, "apply", "-f", file, "--prune", "--owner", "payroll.yaml", "--selector", "team=billing")
	require.Equal(t, exitOK, code, out+stderr)
	assert.Equal(t, []string{"other-file"}, deletes(), "--owner names whose jobs these are")

	api.paths = nil
	code, out, stderr = runCLI(t, env, "apply", "-f", file, "--prune", "--prune-any-owner", "-l", "team")
	require.Equal(t, exitOK, code, out+stderr)
	assert.ElementsMatch(t, []string{"old-billing", "old-billing-other-team", "by-hand", "other-file"}, deletes())

	// apply marks what it writes with its owner.
	assert.Contains(t, api.seen(), "PUT /v1/jobs/keep")
	code, _, stderr = runCLI(t, env, "apply", "-f", file, "--prune", "-l", "team in (a)")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-l")
}

func TestOwnerLabelIsSetOnApply(t *testing.T) {
	t.Parallel()
	defs, problems := parseJobs([]byte("jobs:\n- name: a\n  schedule: \"0 2 * * *\"\n  http: {url: \"https://example.com/x\"}\n"), "default")
	require.Empty(t, problems)
	withOwner(defs, "billing.yaml")
	assert.Equal(t, "billing.yaml", defs[0].Labels[ownerLabel])
}
