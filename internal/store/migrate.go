package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/schedulerhq/scheduler/migrations"
)

// migrateLockTimeout bounds the wait for another replica's migration. golang-migrate holds a
// PostgreSQL advisory lock while it migrates, so replicas starting together apply each
// migration once; the wait must outlast the slowest migration.
const migrateLockTimeout = 2 * time.Minute

// Migrator applies the embedded migrations.
type Migrator struct {
	m *migrate.Migrate
}

// NewMigrator connects to databaseURL for migrations. Close it when done.
func NewMigrator(databaseURL string) (*Migrator, error) {
	conf, err := parseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	sqlDB := stdlib.OpenDB(*conf)
	driver, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connect for migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("prepare migrations: %w", err)
	}
	m.LockTimeout = migrateLockTimeout
	return &Migrator{m: m}, nil
}

// Up applies every pending migration; nothing to do is success.
func (mg *Migrator) Up() error {
	if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Down reverts steps migrations, or all of them when steps <= 0.
func (mg *Migrator) Down(steps int) error {
	var err error
	if steps <= 0 {
		err = mg.m.Down()
	} else {
		err = mg.m.Steps(-steps)
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Version returns the applied version (0 when none) and whether a failed migration left the
// schema dirty.
func (mg *Migrator) Version() (version uint, dirty bool, err error) {
	version, dirty, err = mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return version, dirty, err
}

// Close releases the migration connection.
func (mg *Migrator) Close() error {
	srcErr, dbErr := mg.m.Close()
	return errors.Join(srcErr, dbErr)
}

// SchemaVersion is the version this binary's embedded migrations end at: a replica is ready
// only when the database is at exactly this version.
func SchemaVersion() uint {
	var latest uint
	entries, _ := fs.ReadDir(migrations.FS, ".")
	for _, e := range entries {
		head, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(head, 10, 32); err == nil && uint(v) > latest {
			latest = uint(v)
		}
	}
	return latest
}

// AppliedVersion reads the schema version golang-migrate recorded (0 when none).
func (q queries) AppliedVersion(ctx context.Context) (version uint, dirty bool, err error) {
	var v int64
	err = q.q.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &dirty)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uint(v), dirty, nil
}
