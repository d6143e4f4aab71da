package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// runCLIWithStdin runs a client command with stdin (apply -f -).
func runCLIWithStdin(t *testing.T, environ []string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd, ok := findClientCommand(args[0])
	require.True(t, ok, args[0])
	var out, errOut bytes.Buffer
	code = runClientWith(context.Background(), cmd, args[1:], environ, stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Every problem of a file comes back at once, each with the job's index and name, and
// nothing is sent: the URL here would refuse the connection (exit 3) if anything were.
func TestApplyReportsEveryProblemOfTheFileAtOnce(t *testing.T) {
	t.Parallel()
	file := `
jobs:
- name: daily-report
  schedule: "0 2 * * *"
  time_zon: Europe/Paris
  http: {url: "https://example.com/hook", urll: x}
- schedule: "0 3 * * *"
  http: {url: "https://example.com/hook"}
- name: daily-report
  schedule: "0 4 * * *"
  http: {url: "https://example.com/hook"}
- name: retries
  schedule: "0 5 * * *"
  retry: {max_attempts: three}
  http: {url: "https://example.com/hook"}
- name: timeout
  schedule: "0 6 * * *"
  timeout: 30
  http: {url: "https://example.com/hook"}
- just a string
`
	code, out, stderr := runCLIWithStdin(t, []string{"SCHEDULER_URL=http://127.0.0.1:1"}, strings.NewReader(file), "apply", "-f", "-")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, `scheduler: stdin: 7 problem(s); nothing was sent to the server:
  jobs[0] (daily-report): unknown key "http.urll": did you mean "url"?
  jobs[0] (daily-report): unknown key "time_zon": did you mean "time_zone"?
  jobs[1]: name is required (e.g. name: daily-report)
  jobs[2] (daily-report): jobs[0] has this name too; a name defines one job
  jobs[3] (retries): retry.max_attempts: want a whole number, not a string
  jobs[4] (timeout): timeout: want a string (quote it), not a number
  jobs[5]: want a mapping of a job's keys (name, schedule, http or sql, ...)
`, stderr)
}

func TestApplyRefusesFilesOfTheWrongShape(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                                    `empty: a file holds "jobs:"`,
		"other: 1\n":                          `no jobs: a file holds "jobs:"`,
		"- name: a\n":                         `a file holds "jobs:"`,
		"job:\n- name: a\n":                   `unknown key "job" at the top`,
		"jobs: []\n":                          "jobs: the list is empty",
		"jobs: {name: a}\n":                   "jobs: want a list of job definitions",
		"jobs:\n- name: a\n  name: b\n":       `not valid YAML: line 3: key "name" is written twice in one mapping (first at line 2)`,
		"jobs:\n- name: a\n schedule: x: y\n": "not valid YAML: line 2: ",
	}
	for file, want := range cases {
		_, problems := parseJobs([]byte(file), namespace.Default)
		require.NotEmpty(t, problems, "%q", file)
		assert.Contains(t, strings.Join(problems, "\n"), want, "%q", file)
	}

	code, _, stderr := runCLI(t, nil, "apply")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-f FILE is required")
	code, _, stderr = runCLI(t, nil, "apply", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no such file or directory")
	code, _, _ = runCLI(t, nil, "get", "x", "-o", "table")
	assert.Equal(t, exitUsage, code)
}

// A good file on stdin is decoded as the API's JSON would be, then sent (here to a server
// that is not there: exit 3, nothing printed on stdout).
func TestApplyReadsAFileFromStdin(t *testing.T) {
	t.Parallel()
	file := `jobs:
- name: daily-report
  schedule: 0 2 * * *
  time_zone: Europe/Paris
  enabled: false
  labels: {team: billing}
  retry: {max_attempts: 2}
  http:
    url: https://example.com/hook
    headers: {Content-Type: application/json}
    body: '{}'
    success: [200, 204]
`
	defs, err := readJobs("-", strings.NewReader(file), namespace.Default)
	require.NoError(t, err)
	want, err := runtimejob.Decode([]byte(`{"name": "daily-report", "schedule": "0 2 * * *", "time_zone": "Europe/Paris",
		"enabled": false, "labels": {"team": "billing"}, "retry": {"max_attempts": 2},
		"http": {"url": "https://example.com/hook", "headers": {"Content-Type": "application/json"}, "body": "{}", "success": [200, 204]}}`))
	require.NoError(t, err)
	assert.Equal(t, []runtimejob.Definition{want}, defs)

	code, out, stderr := runCLIWithStdin(t, []string{"SCHEDULER_URL=http://127.0.0.1:1"}, strings.NewReader(file), "apply", "-f", "-")
	assert.Equal(t, exitRefused, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "Server unreachable")
}

// A dry run's diff: one line per changed field, strings quoted, absent values "(none)".
func TestApplyDryRunDiffRendering(t *testing.T) {
	t.Parallel()
	from := json.RawMessage(`{"name":"daily-report","schedule":"0 2 * * *","labels":{"team":"billing"},"timeout":"1m",
		"retry":{"max_attempts":3},"http":{"method":"POST","url":"https://example.com/a","success":[200]}}`)
	to := json.RawMessage(`{"name":"daily-report","schedule":"0 3 * * *","labels":{"owner":"ana","team":"billing"},"timeout":"1m",
		"retry":{"max_attempts":3},"http":{"method":"POST","url":"https://example.com/a","success":[200,204]}}`)
	fields, err := diffDefinitions(from, to)
	require.NoError(t, err)
	unchanged, err := diffDefinitions(from, from)
	require.NoError(t, err)
	assert.Empty(t, unchanged)

	var out, errOut bytes.Buffer
	x := &cli{stdout: &out, stderr: &errOut}
	changes := []change{
		{Name: "daily-report", Action: actionUpdate, Fields: fields},
		{Name: "new-job", Action: actionCreate},
		{Name: "same", Action: actionUnchanged},
		{Name: "old-job", Action: actionDelete},
		{Name: "broken", Action: actionFailed, Errors: []string{"http.url: url host 127.0.0.1 is a loopback address"}},
	}
	for _, c := range changes {
		x.printChange(c, true)
	}
	fmt.Fprintln(&out, planSummary(changes))
	assert.Equal(t, `~ daily-report: schedule "0 2 * * *" → "0 3 * * *"
~ daily-report: labels.owner (none) → "ana"
~ daily-report: http.success [200] → [200, 204]
+ new-job (would be created)
- old-job (would be deleted, --prune)
1 to create, 1 to update, 1 unchanged, 1 to delete, 1 failed
`, out.String())
	assert.Equal(t, "broken: http.url: url host 127.0.0.1 is a loopback address\n", errOut.String())

	// A field the new definition drops comes last, to (none).
	fields, err = diffDefinitions(to, json.RawMessage(`{"name":"daily-report","schedule":"0 3 * * *"}`))
	require.NoError(t, err)
	assert.Equal(t, fieldChange{Field: "labels.owner", From: "ana"}, fields[0])
	assert.Len(t, fields, 7)
}

// get's YAML is a file that apply reads back to the same definition, name first, with the
// strings YAML 1.1 would misread quoted.
func TestGetYAMLIsApplyInput(t *testing.T) {
	t.Parallel()
	def := json.RawMessage(`{"name":"daily-report","schedule":"0 2 * * *","description":"line one\nline two",
		"labels":{"on":"yes","version":"1.10"},"enabled":false,"timeout":"1m","catchup":"1h","overlap":"skip",
		"retry":{"max_attempts":3,"initial_backoff":"1s","max_backoff":"1m"},
		"http":{"method":"POST","url":"https://example.com/hook","headers":{"Content-Type":"application/json"},
		"body":"{}","timeout":"30s","auth":{"bearer_secret":"BILLING_TOKEN"},"success":[200,204]}}`)
	out, err := definitionsYAML(def)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), "jobs:\n- name: daily-report\n  schedule: 0 2 * * *\n"), "%s", out)
	defs, problems := parseJobs(out, namespace.Default)
	require.Empty(t, problems, "%s", out)
	want, err := runtimejob.Decode(def)
	require.NoError(t, err)
	assert.Equal(t, []runtimejob.Definition{want}, defs, "%s", out)
}

// The commands against a whole replica: create, re-apply (unchanged), diff, update, prune,
// get's round trip, delete.
func TestApplyGetDeleteAgainstAReplica(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken, ReadToken: cliReadToken})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, env, args...)
	}
	dir := t.TempDir()
	// file writes a version of the one file of jobs, dir/NAME/jobs.yaml: every version has
	// the same name, so apply gives their jobs the same owner (--prune deletes its own).
	file := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, strings.TrimSuffix(name, ".yaml"), "jobs.yaml")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	// versions are every runtime job's version, as GET /v1/jobs lists them.
	versions := func() map[string]float64 {
		t.Helper()
		code, out, stderr := cli("jobs", "-o", "json")
		require.Equal(t, exitOK, code, stderr)
		var list struct {
			Jobs []map[string]any `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		v := map[string]float64{}
		for _, j := range list.Jobs {
			if j["kind"] != client.KindBuiltin {
				v[j["name"].(string)], _ = j["version"].(float64)
			}
		}
		return v
	}
	const job = `
- name: %s
  schedule: "%s"
  description: a runtime job of the CLI's tests
  labels: {team: billing}
  http:
    url: https://example.com/hook
    headers: {Content-Type: application/json}
    body: '{"report": "daily"}'
    success: [200, 204]
`
	// jobs writes a file of jobs from names and schedules.
	jobs := func(nameSchedule ...string) string {
		s := "jobs:"
		for i := 0; i < len(nameSchedule); i += 2 {
			s += fmt.Sprintf(job, nameSchedule[i], nameSchedule[i+1])
		}
		return s
	}
	v1 := file("v1.yaml", jobs("daily-report", "0 0 1 1 *", "weekly-sync", "0 0 2 1 *"))

	code, out, stderr := cli("apply", "-f", v1, "--reason", "first import ✓")
	require.Equal(t, exitOK, code, "%s%s", out, stderr)
	assert.Equal(t, []string{"first import ✓", "first import ✓"}, auditReasons(t, srv, "create"))
	assert.Regexp(t, `^created daily-report \(version \d+\)\ncreated weekly-sync \(version \d+\)\n$`, out)
	before := versions()
	require.Len(t, before, 2)

	t.Run("apply again: all unchanged, versions kept", func(t *testing.T) {
		code, out, stderr := cli("apply", "-f", v1)
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "unchanged daily-report\nunchanged weekly-sync\n", out)
		assert.Equal(t, before, versions())

		code, out, _ = cli("apply", "-f", v1, "-o", "json")
		require.Equal(t, exitOK, code)
		var res struct {
			DryRun bool     `json:"dry_run"`
			Jobs   []change `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		assert.Equal(t, []change{{Name: "daily-report", Namespace: "default", Action: actionUnchanged, Version: int64(before["daily-report"])},
			{Name: "weekly-sync", Namespace: "default", Action: actionUnchanged, Version: int64(before["weekly-sync"])}}, res.Jobs)
	})

	v2 := file("v2.yaml", jobs("daily-report", "0 0 3 1 *", "weekly-sync", "0 0 2 1 *", "new-job", "0 0 4 1 *"))
	t.Run("--dry-run shows the diff and changes nothing", func(t *testing.T) {
		code, out, stderr := cli("apply", "-f", v2, "--dry-run")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, `~ daily-report: schedule "0 0 1 1 *" → "0 0 3 1 *"
+ new-job (would be created)
1 to create, 1 to update, 1 unchanged, 0 to delete
`, out)
		assert.Equal(t, before, versions())
	})

	t.Run("an edited file updates", func(t *testing.T) {
		code, out, stderr := cli("apply", "-f", v2)
		require.Equal(t, exitOK, code, stderr)
		assert.Regexp(t, `^updated daily-report \(version \d+\)\nunchanged weekly-sync\ncreated new-job \(version \d+\)\n$`, out)
		after := versions()
		assert.Greater(t, after["daily-report"], before["daily-report"])
		assert.Equal(t, before["weekly-sync"], after["weekly-sync"])
	})

	t.Run("a stale If-Match is refused (412), not overwritten", func(t *testing.T) {
		defs, err := readJobs(v2, nil, namespace.Default)
		require.NoError(t, err)
		x := clientCLI(srv.URL)
		_, err = x.writeJob(context.Background(), namespace.Default, defs[0], int64(before["daily-report"]), false)
		var de *client.Problem
		require.ErrorAs(t, err, &de)
		assert.Equal(t, http.StatusPreconditionFailed, de.Status)
		assert.Equal(t, []string{`the job changed on the server since apply read it (the current version is "` +
			fmt.Sprint(versions()["daily-report"]) + `"); run apply again`}, problemLines(err))
	})

	v3 := file("v3.yaml", jobs("daily-report", "0 0 3 1 *", "new-job", "0 0 4 1 *"))
	t.Run("--prune deletes only the runtime job missing from the file", func(t *testing.T) {
		code, out, stderr := cli("apply", "-f", v3, "--prune", "--dry-run")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "- weekly-sync (would be deleted, --prune)\n0 to create, 0 to update, 2 unchanged, 1 to delete\n", out)
		assert.Len(t, versions(), 3)

		code, out, stderr = cli("apply", "-f", v3, "--prune")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "unchanged daily-report\nunchanged new-job\ndeleted weekly-sync\n", out)
		assert.Equal(t, []string{"daily-report", "new-job"}, sortedNames(versions()))
		code, _, _ = cli("job", "plan-change")
		assert.Equal(t, exitOK, code, "built-in jobs are never pruned")
	})

	t.Run("get's YAML applies back unchanged", func(t *testing.T) {
		code, out, stderr := cli("get", "daily-report")
		require.Equal(t, exitOK, code, stderr)
		assert.True(t, strings.HasPrefix(out, "jobs:\n- name: daily-report\n"), out)
		code, applied, stderr := runCLIWithStdin(t, env, strings.NewReader(out), "apply", "-f", "-")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "unchanged daily-report\n", applied)
		code, applied, stderr = cli("apply", "-f", file("got.yaml", out))
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "unchanged daily-report\n", applied)

		code, out, _ = cli("get", "daily-report", "-o", "json")
		require.Equal(t, exitOK, code)
		var def map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &def))
		assert.Equal(t, "0 0 3 1 *", def["schedule"])

		code, _, stderr = cli("get", "nope")
		assert.Equal(t, exitUsage, code, "as job NAME: the names there are follow")
		assert.Contains(t, stderr, `No such job: no job named "nope"`)

		code, out, stderr = cli("get", "plan-change")
		assert.Equal(t, exitFailure, code)
		assert.Empty(t, out)
		assert.Equal(t, "scheduler: plan-change is a built-in job; it has no definition to get (see scheduler job plan-change)\n", stderr)
	})

	t.Run("the server's validation errors, every field, per job; the others still apply", func(t *testing.T) {
		bad := file("bad.yaml", `jobs:
- name: bad-job
  schedule: "0 0 1 1 *"
  timeout: soon
  http: {url: "http://127.0.0.1/hook"}
- name: plan-change
  schedule: "0 0 1 1 *"
  http: {url: "https://example.com/hook"}
- name: good-job
  schedule: "0 0 1 1 *"
  http: {url: "https://example.com/hook"}
`)
		code, out, stderr := cli("apply", "-f", bad)
		assert.Equal(t, exitFailure, code)
		assert.Regexp(t, `^created good-job \(version \d+\)\n$`, out)
		assert.Regexp(t, `(?m)^bad-job: timeout: .*soon`, stderr)
		assert.Regexp(t, `(?m)^bad-job: http\.url: .*127\.0\.0\.1`, stderr)
		assert.Regexp(t, `(?m)^plan-change: .+`, stderr)
		assert.Contains(t, stderr, "scheduler: 2 of 3 job(s) failed\n")
	})

	t.Run("delete", func(t *testing.T) {
		code, out, stderr := cli("delete", "new-job", "--reason", "50% done, then dropped")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "deleted new-job\n", out)
		assert.Equal(t, "50% done, then dropped", auditReasons(t, srv, "delete")[0])
		code, out, stderr = cli("delete", "new-job")
		assert.Equal(t, exitFailure, code)
		assert.Empty(t, out)
		assert.Regexp(t, `^scheduler: .*new-job.*\n$`, stderr)
		code, _, stderr = cli("delete", "plan-change")
		assert.Equal(t, exitFailure, code)
		assert.NotEmpty(t, stderr)
	})

	t.Run("refused: read-only token", func(t *testing.T) {
		read := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliReadToken}
		code, _, stderr := runCLI(t, read, "apply", "-f", v3)
		assert.Equal(t, exitRefused, code)
		assert.Contains(t, stderr, "This token may only read")
		code, _, _ = runCLI(t, read, "delete", "daily-report")
		assert.Equal(t, exitRefused, code)
	})
}

// auditReasons are the reasons of the audit rows of action, newest first.
func auditReasons(t *testing.T, srv *replicatest.Server, action string) []string {
	t.Helper()
	rows, err := srv.DB.Pool.Query(context.Background(),
		`SELECT coalesce(reason, '') FROM operator_actions WHERE action = $1 ORDER BY id DESC`, action)
	require.NoError(t, err)
	reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return reasons
}

func sortedNames(m map[string]float64) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// clientCLI is a command line talking to the server at base, for a call made outside a
// command.
func clientCLI(base string) *cli { return &cli{c: client.New(base, client.WithToken(cliToken))} }
