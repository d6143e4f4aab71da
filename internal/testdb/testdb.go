// Package testdb gives tests a real PostgreSQL: TEST_DATABASE_URL when set, otherwise a
// throwaway local cluster started for the test binary (scripts/pg.sh, which installs the
// server when missing) and removed at the end. Each test gets its own freshly migrated
// database, cloned from a template, so tests run in parallel without seeing each other.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/migrations"
)

var (
	adminURL     string // a URL on the cluster's "postgres" database
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// Main is the TestMain of every package that uses a database:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		adminURL = u
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "scheduler-testpg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testdb:", err)
		return 1
	}
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testdb:", err)
		return 1
	}
	script := pgScript()
	defer exec.Command(script, "remove", dir).Run()
	if out, err := exec.Command(script, "start", dir, port).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: start PostgreSQL: %v\n%s", err, out)
		return 1
	}
	adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", port)
	return m.Run()
}

// New creates a migrated database for this test, dropped when the test ends, and returns its URL.
// With TESTDB_KEEP_FAILED set, a failed test's database is kept for a look inside.
func New(t testing.TB) string {
	t.Helper()
	if adminURL == "" {
		t.Fatal("testdb: no cluster; call testdb.Main from the package's TestMain")
	}
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate() })
	if templateErr != nil {
		t.Fatalf("testdb: prepare template database: %v", templateErr)
	}
	name := "test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := admin(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, templateName)); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("TESTDB_KEEP_FAILED") != "" {
			t.Logf("testdb: TESTDB_KEEP_FAILED is set: the failed test's database %s is kept", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := admin(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name)); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	u := WithDatabase(adminURL, name)
	// A copy of the template would share its deployment id; every test database is a
	// deployment of its own, as two migrated databases are.
	if err := adminOn(ctx, u, `UPDATE scheduler_identity SET deployment_id = gen_random_uuid()`); err != nil {
		t.Fatalf("testdb: draw the database's deployment id: %v", err)
	}
	// The template may have been migrated on an earlier day than this test runs.
	if err := adminOn(ctx, u, fmt.Sprintf(`SELECT scheduler_add_run_day((now() AT TIME ZONE 'UTC')::date + n)
		FROM generate_series(-1, %d) AS n`, store.DaysAhead)); err != nil {
		t.Fatalf("testdb: add the day partitions of job_runs: %v", err)
	}
	return u
}

// AddRunDays adds the day partitions of job_runs for the UTC days from from to to, for a
// test that needs days in place whatever runs it records (storetest adds the days of the
// runs it makes).
func AddRunDays(t testing.TB, pool *pgxpool.Pool, from, to time.Time) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		SELECT scheduler_add_run_day(d::date)
		FROM generate_series(($1::timestamptz AT TIME ZONE 'UTC')::date, ($2::timestamptz AT TIME ZONE 'UTC')::date,
		                     interval '1 day') AS d`, from, to)
	if err != nil {
		t.Fatalf("testdb: add the day partitions of job_runs from %s to %s: %v", from, to, err)
	}
}

// Empty creates an empty (unmigrated) database for this test, for migration tests.
func Empty(t testing.TB) string {
	t.Helper()
	if adminURL == "" {
		t.Fatal("testdb: no cluster; call testdb.Main from the package's TestMain")
	}
	name := "test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := admin(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = admin(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name))
	})
	return WithDatabase(adminURL, name)
}

// DB is a test database: the store handle the code under test uses, and a plain pool of
// its own for the test's setup and assertions in raw SQL, which the store does not offer.
type DB struct {
	*store.DB
	Pool *pgxpool.Pool
}

// Open opens a store.DB on a new test database, closed when the test ends, and returns it
// with the database's URL.
func Open(t testing.TB, opts store.Options) (*DB, string) {
	t.Helper()
	u := New(t)
	return Connect(t, u, opts), u
}

// Connect opens a store.DB on the existing database at u (another replica's own pool),
// closed when the test ends.
func Connect(t testing.TB, u string, opts store.Options) *DB {
	t.Helper()
	if opts.InstanceID == "" {
		opts.InstanceID = "test"
	}
	if opts.LeaseTimeout == 0 {
		opts.LeaseTimeout = config.LeaseTimeoutDefault
	}
	db, err := store.Open(context.Background(), u, opts)
	if err != nil {
		t.Fatalf("testdb: open: %v", err)
	}
	t.Cleanup(db.Close)
	return &DB{DB: db, Pool: Pool(t, u)}
}

// Pool opens a plain pool on the database at u, for a test's own SQL, closed when the test
// ends.
func Pool(t testing.TB, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("testdb: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// WithDatabase returns u with its database name replaced.
func WithDatabase(u, name string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		panic(fmt.Sprintf("testdb: TEST_DATABASE_URL must be a URL: %v", err))
	}
	parsed.Path = "/" + name
	return parsed.String()
}

// RepoRoot finds the product module's root from the working directory: the directory whose
// go.mod declares github.com/schedulerhq/scheduler. The first go.mod above would not do: the
// tools module's tests (tools/, its own go.mod) run below it and need its scripts and commands.
func RepoRoot() string {
	dir, _ := os.Getwd()
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == "github.com/schedulerhq/scheduler" {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("testdb: the go.mod of github.com/schedulerhq/scheduler not found above the working directory")
		}
		dir = parent
	}
}

// modulePath is the path a go.mod's module line declares.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	return ""
}

// ensureTemplate migrates a template database once per schema (its name carries a hash of
// the migrations), under an advisory lock so that parallel test binaries share it.
func ensureTemplate() (string, error) {
	name := "scheduler_tmpl_" + migrationsHash()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('scheduler-testdb-template', 0))`); err != nil {
		return "", err
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// Built under a temporary name and renamed when complete, so a crash mid-way never
	// leaves a half-migrated template behind under the real name.
	building := name + "_building"
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+building+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+building); err != nil {
		return "", err
	}
	mg, err := store.NewMigrator(WithDatabase(adminURL, building))
	if err != nil {
		return "", err
	}
	upErr := mg.Up()
	closeErr := mg.Close()
	if upErr != nil || closeErr != nil {
		return "", fmt.Errorf("migrate template: %w", errors.Join(upErr, closeErr))
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, building, name)); err != nil {
		return "", err
	}
	return name, nil
}

func admin(ctx context.Context, sql string) error { return adminOn(ctx, adminURL, sql) }

func adminOn(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func migrationsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return strings.SplitN(u, "@", 2)[0]
}

// Login creates a login of the test's own on the cluster of the database at u (roles are
// cluster-wide, so its name is drawn), dropped with what it owns when the test ends, and
// returns its name and u with it as the user: another team's job connecting to a database,
// a SQL target's login. Each grant is run on the database at u as the administrator, with
// %s replaced by the role's quoted name ("GRANT SELECT ON effects TO %s"); without grants
// the role has only what PUBLIC has (it can connect, NOTIFY and take advisory locks).
func Login(t testing.TB, u string, grants ...string) (role, roleURL string) {
	t.Helper()
	name := "test_role_" + randomHex(6)
	quoted := pgx.Identifier{name}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := admin(ctx, `CREATE ROLE `+quoted+` LOGIN`); err != nil {
		t.Fatalf("testdb: create role: %v", err)
	}
	// Registered after the database's own cleanup, so it runs first: the role's privileges
	// in the database are dropped before the role, and the database after both.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = admin(ctx, fmt.Sprintf(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '%s'`, name))
		if err := adminOn(ctx, u, `DROP OWNED BY `+quoted); err != nil {
			t.Errorf("testdb: drop what role %s owns: %v", name, err)
		}
		if err := admin(ctx, `DROP ROLE `+quoted); err != nil {
			t.Errorf("testdb: drop role %s: %v", name, err)
		}
	})
	for _, g := range grants {
		if err := adminOn(ctx, u, fmt.Sprintf(g, quoted)); err != nil {
			t.Fatalf("testdb: %s: %v", fmt.Sprintf(g, quoted), err)
		}
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	parsed.User = url.User(name)
	return name, parsed.String()
}

// LoginURL is Login's URL alone.
func LoginURL(t testing.TB, u string, grants ...string) string {
	t.Helper()
	_, roleURL := Login(t, u, grants...)
	return roleURL
}
