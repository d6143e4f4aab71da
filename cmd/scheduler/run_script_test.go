package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// Ctrl-C stops `make run`, the way a person does it: the terminal sends SIGINT to the
// foreground process group, and within a few seconds nothing of the group is left — make,
// scripts/run.sh, the replica, the demo receiver and the sed that prefixes their lines.
// Started by a script or a CI runner (the background job of a non-interactive shell),
// make and everything under it begin with SIGINT ignored, which a shell cannot trap: the
// replicas stopped, but run.sh, the receiver and its sed stayed (issue 28, 8).
func TestMakeRunStopsOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts make run")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	for _, tc := range []struct {
		name string
		argv func(args ...string) []string
	}{
		{"from a terminal", func(args ...string) []string { return append([]string{"make"}, args...) }},
		{"from a script", func(args ...string) []string {
			return append([]string{"bash", "-c", `make "$@" & wait`, "bash"}, args...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctrlCStopsMakeRun(t, tc.argv("run", "REPLICAS=1", "HTTP_PORT="+freePort(t), "RECEIVER_PORT="+freePort(t)))
		})
	}
}

func ctrlCStopsMakeRun(t *testing.T, argv []string) {
	pgid, _ := startMakeRun(t, argv)
	require.NotEmpty(t, group(pgid), "make run's processes are in its group")

	require.NoError(t, syscall.Kill(-pgid, syscall.SIGINT), "Ctrl-C")
	deadline := time.Now().Add(10 * time.Second)
	for left := group(pgid); len(left) > 0; left = group(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after Ctrl-C these processes of make run are still there:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(50 * time.Millisecond) // no event tells a grandchild's exit; polled with a deadline
	}
}

// startMakeRun starts make run (argv) on a database of its own, in a process group of its
// own, and returns once it serves: the group's id and its output's lines from then on. The
// cleanup kills whatever of the group is left.
func startMakeRun(t *testing.T, argv []string, env ...string) (int, <-chan string) {
	root := testdb.RepoRoot()
	url := testdb.New(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+url, "SCHEDULER_LOG_LEVEL=warn"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group of its own
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		if left := group(pgid); len(left) > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	})

	// Every line is read to the end, so that no process blocks writing its output.
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	var seen []string
	ready := time.After(3 * time.Minute) // a cold build of both binaries
	for serving := false; !serving; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("make run ended before it served:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			serving = strings.Contains(line, "Ctrl-C stops everything.")
		case <-ready:
			t.Fatalf("make run did not serve within 3 minutes:\n%s", strings.Join(seen, "\n"))
		}
	}
	return pgid, lines
}

// group lists the live processes of process group pgid, as "pid command line".
func group(pgid int) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var procs []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 3 || f[0] == "Z" {
			continue // a zombie has exited; its parent just has not reaped it yet
		}
		if pg, err := strconv.Atoi(f[2]); err != nil || pg != pgid {
			continue
		}
		dir := filepath.Dir(path)
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		procs = append(procs, fmt.Sprintf("%s %s", filepath.Base(dir), strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return procs
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestReadmeTeamsFirstJob follows README's "A team's first job" on make run, its commands as
// the page shows them: a new namespace, its token, a secret stored through the API (make run
// keeps a SCHEDULER_SECRET_KEY), a job signed with it that the demo receiver accepts, and the
// failure notification the receiver gets, with no restart. The receiver logs each call it
// refuses with the reason.
func TestReadmeTeamsFirstJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts make run")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	root := testdb.RepoRoot()
	httpPort, receiverPort := freePort(t), freePort(t)
	_, lines := startMakeRun(t, []string{"make", "run", "REPLICAS=1", "HTTP_PORT=" + httpPort, "RECEIVER_PORT=" + receiverPort},
		"SCHEDULER_NOTIFY_INTERVAL=1s")

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## A team's first job\n")
	require.True(t, ok, "README.md has a section \"A team's first job\"")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok)
	block, _, _ = strings.Cut(block, "```")
	jobFile := filepath.Join(t.TempDir(), "teama.yaml")
	script := strings.NewReplacer("127.0.0.1:8099", "127.0.0.1:"+receiverPort, "teama.yaml", jobFile).Replace(block)

	// Run as the page says, but for the ports and the file; no -e: the second trigger
	// fails on purpose.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-u", "-c", script)
	sh.WaitDelay = time.Second // the pipes close even when a child outlives bash
	sh.Dir = root
	sh.Env = append(os.Environ(), "SCHEDULER_URL=http://127.0.0.1:"+httpPort, "SCHEDULER_API_TOKEN=", "SCHEDULER_NAMESPACE=")
	out, _ := sh.CombinedOutput()
	require.NoError(t, ctx.Err(), "README's commands did not end within 2 minutes:\n%s", out)
	require.Contains(t, string(out), "created teama/report", "%s", out)
	require.Contains(t, string(out), "of report succeeded", "%s", out)
	require.Contains(t, string(out), "failed after 3 attempts: status 503", "%s", out)

	// The receiver's lines come through make run's output: the call applied, the failing
	// ones refused with their reason, then the notification of the failure.
	want := []string{"applied /ns/teama/report", "refused POST /ns/teama/fail (503): failing on purpose", `"type":"job.failed"`}
	var seen []string
	deadline := time.After(time.Minute)
	for len(want) > 0 {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "make run ended:\n%s", strings.Join(seen, "\n"))
			seen = append(seen, line)
			if strings.HasPrefix(line, "[receiver]") && strings.Contains(line, want[0]) {
				want = want[1:]
			}
		case <-deadline:
			t.Fatalf("within a minute the receiver did not log %q; make run's output:\n%s\nthe commands':\n%s", want[0], strings.Join(seen, "\n"), out)
		}
	}

	// A call signed with another namespace's secret is refused, and the receiver says why.
	cmd := exec.Command(filepath.Join(root, "bin/receiver"), "secret", "teama")
	cmd.Dir = root // its key is .run/receiver.key
	secret, err := cmd.Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(secret), "whsec_"))
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+receiverPort+"/ns/teamb/x", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("webhook-id", "msg_1")
	req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set("webhook-signature", "v1,"+signature(t, strings.TrimSpace(string(secret)), "msg_1", req.Header.Get("webhook-timestamp"), "{}"))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	for refused := false; !refused; {
		select {
		case line := <-lines:
			refused = strings.Contains(line, "refused POST /ns/teamb/x (401): signature of namespace teamb: no signature matches")
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver did not log the refused call within 10 s")
		}
	}
}

// signature is a Standard Webhooks signature of body with secret ("whsec_<base64>").
func signature(t *testing.T, secret, id, ts, body string) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
