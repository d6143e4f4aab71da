package testdb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Cluster is a PostgreSQL server of a test's own, for tests that restart it or change how it
// listens: never the shared cluster of TEST_DATABASE_URL, which other tests (and other
// packages' test binaries) are using. It is removed when the test ends.
type Cluster struct {
	dir, port string
}

// ClusterOptions shape an own cluster.
type ClusterOptions struct {
	// Listen adds addresses to listen on besides 127.0.0.1 (a veth's host side).
	Listen []string
	// Trust adds client networks (CIDR) allowed to connect, e.g. a veth pair's /30.
	Trust []string
	// Conf adds postgresql.conf lines, e.g. "track_commit_timestamp = on".
	Conf []string
	// HBA puts pg_hba.conf lines before the trust of local clients, which they then
	// override, e.g. "host all jobs 127.0.0.1/32 scram-sha-256".
	HBA []string
}

// NewCluster initialises and starts a cluster with scripts/pg.sh (about a second).
func NewCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{}
	// The port is free when picked but another process may take it before the server
	// binds it: a few attempts, each on a fresh directory and port.
	for attempt := 1; ; attempt++ {
		// Not t.TempDir: the server runs as postgres when the tests run as root, and must
		// be able to reach its directory.
		dir, err := os.MkdirTemp("", "scheduler-owncluster-")
		if err != nil {
			t.Fatalf("testdb: %v", err)
		}
		port, err := freePort()
		if err != nil {
			t.Fatalf("testdb: %v", err)
		}
		t.Cleanup(func() { _ = exec.Command(pgScript(), "remove", dir).Run() })
		out, err := exec.Command(pgScript(), "start", dir, port).CombinedOutput()
		if err == nil {
			c.dir, c.port = dir, port
			break
		}
		if attempt == 3 {
			t.Fatalf("testdb: pg.sh start: %v\n%s", err, out)
		}
	}
	dir := c.dir
	if len(opts.Listen) > 0 || len(opts.Trust) > 0 || len(opts.Conf) > 0 || len(opts.HBA) > 0 {
		conf := append([]string{fmt.Sprintf("listen_addresses = '%s'", strings.Join(append([]string{"127.0.0.1"}, opts.Listen...), ","))}, opts.Conf...)
		appendFile(t, filepath.Join(dir, "postgresql.conf"), conf)
		if len(opts.HBA) > 0 {
			path := filepath.Join(dir, "pg_hba.conf")
			old, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("testdb: %v", err)
			}
			if err := os.WriteFile(path, append([]byte(strings.Join(opts.HBA, "\n")+"\n"), old...), 0); err != nil {
				t.Fatalf("testdb: %v", err)
			}
		}
		var hba []string
		for _, n := range opts.Trust {
			hba = append(hba, "host all all "+n+" trust")
		}
		appendFile(t, filepath.Join(dir, "pg_hba.conf"), hba)
		c.Restart(t, "fast")
	}
	return c
}

// Restart restarts the server with pg_ctl's shutdown mode: "fast" ends every session
// cleanly, "immediate" crashes the server, which then recovers from its WAL.
func (c *Cluster) Restart(t testing.TB, mode string) {
	t.Helper()
	c.pg(t, "restart", c.dir, mode)
}

// Port is the server's port.
func (c *Cluster) Port() string { return c.port }

// NewDatabase creates and migrates a database on the cluster and returns its URL on host
// (127.0.0.1 when empty).
func (c *Cluster) NewDatabase(t testing.TB, host string) string {
	t.Helper()
	if host == "" {
		host = "127.0.0.1"
	}
	name := "test_" + randomHex(8)
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", c.port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminOn(ctx, admin, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	mg, err := store.NewMigrator(WithDatabase(admin, name))
	if err != nil {
		t.Fatalf("testdb: migrate: %v", err)
	}
	defer mg.Close()
	if err := mg.Up(); err != nil {
		t.Fatalf("testdb: migrate: %v", err)
	}
	return fmt.Sprintf("postgres://postgres@%s:%s/%s?sslmode=disable", host, c.port, name)
}

func (c *Cluster) pg(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(pgScript(), args...).CombinedOutput(); err != nil {
		t.Fatalf("testdb: pg.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func pgScript() string { return filepath.Join(RepoRoot(), "scripts", "pg.sh") }

func appendFile(t testing.TB, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatalf("testdb: %v", err)
	}
}
