package main

import (
	"bufio"
	"fmt"
	"net"
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
	root := testdb.RepoRoot()
	url := testdb.New(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "SCHEDULER_LOG_LEVEL=warn")
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
