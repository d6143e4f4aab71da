package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// Teams through the command line, against a whole replica: namespaces, apply across them,
// a team's token that works in its namespace only, and its revocation.
func TestTeamsCommands(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken, Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}}})
	proxy, proxyURL := startCountingProxy(t, srv.URL, jobListPage)
	admin := []string{"SCHEDULER_URL=" + proxyURL, "SCHEDULER_API_TOKEN=" + cliToken}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, admin, args...)
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
	// names lists a namespace's job names, as jobs -o json reads them with env.
	names := func(env []string, ns string) []string {
		t.Helper()
		code, out, stderr := runCLI(t, env, "jobs", "-n", ns, "-o", "json")
		require.Equal(t, exitOK, code, stderr)
		var list struct {
			Jobs []struct{ Name, Namespace string }
		}
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		var n []string
		for _, j := range list.Jobs {
			assert.Equal(t, ns, j.Namespace)
			n = append(n, j.Name)
		}
		return n
	}

	t.Run("namespace create, set, list", func(t *testing.T) {
		code, out, stderr := cli("namespace", "create", "billing", "--max-jobs", "10")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "namespace billing created: max jobs 10, max concurrent calls no bound, min interval no bound\n"+
			"give a team access with: scheduler token create --name billing-team --role editor -n billing\n", out)
		code, _, stderr = cli("namespace", "create", "billing")
		assert.Equal(t, exitFailure, code)
		assert.Equal(t, "scheduler: namespace billing exists already; scheduler namespace set billing changes its quotas\n", stderr)

		// set changes the quotas it names and keeps the others; 0 removes a bound.
		code, out, _ = cli("namespace", "set", "billing", "--min-interval", "1m", "--max-concurrent-calls", "4")
		require.Equal(t, exitOK, code)
		assert.Equal(t, "namespace billing set: max jobs 10, max concurrent calls 4, min interval 1m\n", out)
		code, out, _ = cli("namespace", "set", "billing", "--max-jobs", "0", "--reason", "grown")
		require.Equal(t, exitOK, code)
		assert.Equal(t, "namespace billing set: max jobs no bound, max concurrent calls 4, min interval 1m\n", out)
		// The outbound surface: only what a flag names is sent, "" empties it.
		code, out, stderr = cli("namespace", "set", "billing", "--http-allow", "127.0.0.1", "-o", "json")
		require.Equal(t, exitOK, code, stderr)
		assert.Contains(t, out, `"http_allow": [`+"\n"+`    "127.0.0.1"`)
		assert.Contains(t, out, `"sql_targets": []`)
		code, _, stderr = cli("namespace", "set", "billing", "--http-allow", "10.0.0.0/8")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr, "an operator must allow it there first")
		code, out, _ = cli("namespace", "set", "billing", "--http-allow", "", "-o", "json")
		require.Equal(t, exitOK, code)
		assert.Contains(t, out, `"http_allow": []`)
		code, _, stderr = cli("namespace", "set", "nope", "--max-jobs", "1")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "there is no namespace nope; scheduler namespace create nope makes it")
		code, _, _ = cli("namespace", "create", "Not_A_Name")
		assert.Equal(t, exitUsage, code)

		code, _, stderr = cli("namespace", "create", "payroll")
		require.Equal(t, exitOK, code, stderr)
		code, out, _ = cli("namespace", "list")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^NAME +JOBS +SECRETS +MAX JOBS +MAX CONCURRENT CALLS +MIN INTERVAL$`, out)
		assert.Regexp(t, `(?m)^billing +0 +0 +- +4 +1m$`, out)
		assert.Regexp(t, `(?m)^payroll +0 +0 +- +- +-$`, out)
	})

	const jobs = `jobs:
- name: invoice-sync
  namespace: billing
  schedule: "0 0 1 1 *"
  http: {url: "https://example.com/invoices"}
- name: payslips
  namespace: payroll
  schedule: "0 0 2 1 *"
  http: {url: "https://example.com/payslips"}
- name: dunning
  schedule: "0 0 3 1 *"
  http: {url: "https://example.com/dunning"}
`
	t.Run("apply puts each job in its namespace, reading each list once", func(t *testing.T) {
		two := file("two.yaml", jobs)
		proxy.take()
		code, out, stderr := cli("apply", "-f", two, "-n", "billing")
		require.Equal(t, exitOK, code, "%s%s", out, stderr)
		assert.Regexp(t, `^created billing/invoice-sync \(version \d+\)\ncreated billing/dunning \(version \d+\)\ncreated payroll/payslips \(version \d+\)\n$`, out)
		assert.Equal(t, []string{"GET /v1/namespaces/billing/jobs", "GET /v1/namespaces/payroll/jobs",
			"POST /v1/namespaces/billing/jobs", "POST /v1/namespaces/billing/jobs", "POST /v1/namespaces/payroll/jobs"}, requestLines(proxy.take()))
		assert.ElementsMatch(t, []string{"invoice-sync", "dunning"}, names(admin, "billing"))
		assert.Equal(t, []string{"payslips"}, names(admin, "payroll"))
		assert.NotContains(t, names(admin, "default"), "dunning")

		// Again: one read per namespace, no write.
		proxy.take()
		code, out, _ = cli("apply", "-f", two, "-n", "billing")
		require.Equal(t, exitOK, code)
		assert.Equal(t, "unchanged billing/invoice-sync\nunchanged billing/dunning\nunchanged payroll/payslips\n", out)
		assert.Equal(t, []string{"GET /v1/namespaces/billing/jobs", "GET /v1/namespaces/payroll/jobs"}, requestLines(proxy.take()))

		// get's YAML names the namespace, so it applies back to it from anywhere.
		code, got, _ := cli("get", "dunning", "-n", "billing")
		require.Equal(t, exitOK, code)
		assert.Contains(t, got, "\n  namespace: billing\n")
		code, out, _ = cli("apply", "-f", file("got.yaml", got))
		require.Equal(t, exitOK, code)
		assert.Equal(t, "unchanged billing/dunning\n", out)
	})

	t.Run("--prune deletes only in the file's namespaces", func(t *testing.T) {
		code, out, stderr := cli("apply", "-f", file("billing.yaml", strings.Join(strings.Split(jobs, "\n")[:5], "\n")+"\n"), "--prune")
		require.Equal(t, exitOK, code, "%s%s", out, stderr)
		assert.Equal(t, "unchanged billing/invoice-sync\ndeleted billing/dunning\n", out)
		assert.Equal(t, []string{"payslips"}, names(admin, "payroll"))
	})

	var tokenID, token string
	t.Run("token create, list; whoami", func(t *testing.T) {
		code, out, stderr := cli("token", "create", "--name", "billing-ci", "--role", "editor", "-n", "billing", "--expires-in", "720h")
		require.Equal(t, exitOK, code, stderr)
		token = strings.TrimSpace(out)
		assert.Regexp(t, `^sch_[A-Za-z0-9_-]{43}$`, token, "stdout holds the value alone")
		m := regexp.MustCompile(`^Created token (tok_[0-9a-f]{16}) \("billing-ci"\): editor of namespace billing, expires \S+ \S+ \(in (29|30)d\)\.\n`).FindStringSubmatch(stderr)
		require.NotNil(t, m, stderr)
		tokenID = m[1]
		assert.Contains(t, stderr, "This is the only time the token is shown")
		assert.Contains(t, stderr, "scheduler token revoke "+tokenID)

		code, out, _ = cli("token", "create", "--name", "ops", "--role", "admin", "-o", "json")
		require.Equal(t, exitOK, code)
		var created map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &created))
		assert.Equal(t, "admin", created["role"])
		assert.Nil(t, created["namespace"])
		assert.NotEmpty(t, created["token"])

		code, out, _ = cli("token", "list")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^ID +NAME +ROLE +NAMESPACE +EXPIRES +REVOKED +CREATED BY$`, out)
		assert.Regexp(t, `(?m)^`+tokenID+` +billing-ci +editor +billing +\S+ \S+ \(in (29|30)d\) +- +SCHEDULER_API_TOKEN$`, out)
		assert.Regexp(t, `(?m)^tok_[0-9a-f]{16} +ops +admin +\(all\) +never +- +SCHEDULER_API_TOKEN$`, out)
		assert.NotContains(t, out, token)

		team := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + token}
		code, out, _ = runCLI(t, team, "whoami")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `^Caller: +token "billing-ci" \(`+tokenID+`\), made with scheduler token create\nAccess: +editor of namespace billing: `, out)
		code, out, _ = cli("whoami")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^Access: +admin of every namespace: `, out)
	})

	t.Run("token create refuses what it cannot mean", func(t *testing.T) {
		for _, args := range [][]string{
			{"--name", "x", "--role", "editor"},                 // no namespace
			{"--name", "x", "--role", "admin", "-n", "billing"}, // an admin's namespace
			{"--name", "x", "--role", "owner", "-n", "billing"},
			{"--role", "viewer", "-n", "billing"},
		} {
			code, _, stderr := runCLI(t, append(admin, "SCHEDULER_NAMESPACE=billing"), append([]string{"token", "create"}, args...)...)
			assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		}
		code, _, stderr := cli("token", "create", "--name", "x", "--role", "viewer", "-n", "nowhere")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, `No such namespace: no namespace named "nowhere"`)
		assert.Contains(t, stderr, "the namespaces this token may read are: billing, default, payroll")
	})

	t.Run("the team's token works in its namespace and is refused elsewhere", func(t *testing.T) {
		team := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + token}
		code, out, stderr := runCLI(t, team, "jobs", "-n", "billing")
		require.Equal(t, exitOK, code, stderr)
		assert.Regexp(t, `^NAMESPACE +NAME +SCHEDULE +PAUSED +LAST STATUS +NEXT RUN\nbilling +invoice-sync +\S.* +no +- +\S+ \S+ \(in \S+\)\n$`, out)
		code, out, _ = runCLI(t, append(team, "SCHEDULER_NAMESPACE=billing"), "pause", "invoice-sync", "--reason", "quarter end")
		require.Equal(t, exitOK, code)
		assert.Equal(t, "invoice-sync in namespace billing paused: no scheduled or catch-up run until resumed (trigger still works)\n", out)
		code, out, _ = runCLI(t, team, "job", "invoice-sync", "-n", "billing")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^Namespace: +billing$`, out)
		assert.Regexp(t, `(?m)^State: +paused$`, out)

		// A token of one namespace implies it: no -n is needed.
		code, out, _ = runCLI(t, team, "jobs")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^billing +invoice-sync `, out)

		for _, args := range [][]string{{"jobs", "-n", "payroll"}, {"jobs", "-n", "default"}, {"trigger", "payslips", "-n", "payroll"}} {
			code, out, stderr := runCLI(t, team, args...)
			assert.Equal(t, exitRefused, code, args)
			assert.Empty(t, out)
			assert.Regexp(t, `^scheduler: This token may not do this: token "billing-ci" \(editor of billing\) may not read this namespace\n$`, stderr)
		}
		code, _, stderr = runCLI(t, team, "token", "create", "--name", "mine", "--role", "admin")
		assert.Equal(t, exitRefused, code)
		assert.Contains(t, stderr, "manage namespaces, tokens or leadership: only an admin may")
		code, _, stderr = runCLI(t, team, "namespace", "set", "billing", "--max-jobs", "100")
		assert.Equal(t, exitRefused, code)
		assert.Contains(t, stderr, "manage namespaces, tokens or leadership: only an admin may")

		code, _, stderr = runCLI(t, team, "trigger", "nope", "-n", "billing")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "scheduler: the jobs in namespace billing are: invoice-sync\n")
	})

	t.Run("token revoke: the token fails at once", func(t *testing.T) {
		code, out, stderr := cli("token", "revoke", tokenID, "--reason", "left the team")
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, "revoked "+tokenID+": every replica refuses it within a second\n", out)
		team := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + token}
		require.Eventually(t, func() bool {
			code, _, stderr := runCLI(t, team, "jobs", "-n", "billing")
			return code == exitRefused && strings.Contains(stderr, "the bearer token is wrong, expired or revoked")
		}, 5*time.Second, 50*time.Millisecond)
		code, out, _ = cli("token", "list")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^`+tokenID+` +billing-ci +editor +billing +\S+ \S+ \(in (29|30)d\) +\S+ \S+ \((now|\d+s ago)\) +SCHEDULER_API_TOKEN$`, out)
		code, _, _ = cli("token", "revoke", "tok_0000000000000000")
		assert.Equal(t, exitUsage, code)
	})

	t.Run("usage: namespaces and groups", func(t *testing.T) {
		code, _, stderr := cli("jobs", "-n", "No_Such")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "-n (or SCHEDULER_NAMESPACE) must name a namespace")
		code, _, stderr = cli("jobs", "--namespace", "nowhere")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, `No such namespace: no namespace named "nowhere"`)
		code, out, _ := cli("jobs", "-n", "payroll")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^payroll +payslips +`, out)

		code, _, stderr = cli("token")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "scheduler token create")
		assert.Contains(t, stderr, "scheduler token revoke ID")
		code, out, _ = cli("namespace", "--help")
		assert.Equal(t, exitOK, code)
		assert.Contains(t, out, "scheduler namespace set NS")
		code, _, stderr = cli("secret", "show")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, `unknown subcommand "show"`)
		code, out, _ = cli("apply", "--help")
		assert.Equal(t, exitOK, code)
		assert.Contains(t, out, "--prune deletes runtime jobs only in the namespaces the file's jobs are in")
	})
}

// requestLines are requests as "METHOD path", in order.
func requestLines(reqs []request) []string {
	lines := make([]string, len(reqs))
	for i, r := range reqs {
		lines[i] = r.String()
	}
	return lines
}
