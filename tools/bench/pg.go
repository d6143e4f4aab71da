package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/store"
)

// bench holds one run's connection to the cluster, its sizes and its report. Every database
// it creates is named bench_<run>_<name> and dropped by close.
type bench struct {
	adminURL string
	admin    *pgxpool.Pool
	run      string
	sz       sizes
	quick    bool
	inPlace  bool // measure the api sections on their runs data set itself (runsDB)
	log      *slog.Logger
	report   *report
	created  []string
	base     string              // the migrated database the others are copied from
	runs     map[string]runsData // job_runs data sets built, by template name
}

func newBench(ctx context.Context, adminURL string, sz sizes, quick bool, log *slog.Logger) (*bench, error) {
	admin, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	return &bench{adminURL: adminURL, admin: admin, run: hex.EncodeToString(suffix[:]), sz: sz, quick: quick,
		log: log, report: &report{quick: quick, sz: sz}, runs: map[string]runsData{}}, nil
}

// close drops every database this run created.
func (b *bench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := len(b.created) - 1; i >= 0; i-- {
		if _, err := b.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{b.created[i]}.Sanitize()+` WITH (FORCE)`); err != nil {
			b.log.Warn("drop database", "name", b.created[i], "error", err)
		}
	}
	b.admin.Close()
}

func (b *bench) dbName(name string) string { return "bench_" + b.run + "_" + name }

// url returns the URL of database name on the bench's cluster.
func (b *bench) url(name string) string {
	u, err := url.Parse(b.adminURL)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

// createDB creates database name, empty or as a copy of template, and returns its full name.
func (b *bench) createDB(ctx context.Context, name, template string) (string, error) {
	full := b.dbName(name)
	q := `CREATE DATABASE ` + pgx.Identifier{full}.Sanitize()
	if template != "" {
		// FILE_COPY copies the files as they are: much faster than WAL_LOG for big data sets.
		q += ` TEMPLATE ` + pgx.Identifier{template}.Sanitize() + ` STRATEGY FILE_COPY`
	}
	if _, err := b.admin.Exec(ctx, q); err != nil {
		return "", fmt.Errorf("create database %s: %w", full, err)
	}
	b.created = append(b.created, full)
	return full, nil
}

// runsDB is the database a section measures a runs data set on: a copy of its template, or
// with -in-place the template itself, which no later section then reuses (a copy of 100 M
// rows would double the disk the run needs).
func (b *bench) runsDB(ctx context.Context, name string, d runsData) (string, error) {
	if !b.inPlace {
		return b.createDB(ctx, name, d.template)
	}
	for k, v := range b.runs {
		if v.template == d.template {
			delete(b.runs, k)
		}
	}
	return d.template, nil
}

func (b *bench) dropDB(ctx context.Context, full string) {
	if _, err := b.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{full}.Sanitize()+` WITH (FORCE)`); err != nil {
		b.log.Warn("drop database", "name", full, "error", err)
	}
}

// migratedDB creates a database with every migration applied, the day partitions of
// job_runs the leader would have (addRunDays) and the leader row at epoch 1,
// so job bodies called with a fenced Env for epoch 1 commit without an elected leader. The
// migrations run once per bench run, into a base database the others are copied from.
func (b *bench) migratedDB(ctx context.Context, name string) (string, error) {
	if b.base == "" {
		base, err := b.createDB(ctx, "base", "")
		if err != nil {
			return "", err
		}
		if err := migrateUp(ctx, b.url(base)); err != nil {
			return "", err
		}
		if err := addRunDays(ctx, b.url(base)); err != nil {
			return "", err
		}
		b.base = base
	}
	full, err := b.createDB(ctx, name, b.base)
	if err != nil {
		return "", err
	}
	return full, addRunDays(ctx, b.url(full))
}

// addRunDays adds the day partitions of job_runs the leader would have, from yesterday to
// store.DaysAhead days ahead: a bench run may outlast the day its base was migrated on.
func addRunDays(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT scheduler_add_run_day((now() AT TIME ZONE 'UTC')::date + n)
		FROM generate_series(-1, $1::int) AS n`, store.DaysAhead)
	if err != nil {
		return fmt.Errorf("add the day partitions of job_runs: %w", err)
	}
	return nil
}

func migrateUp(ctx context.Context, url string) error {
	m, err := store.NewMigrator(url)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	return err
}

// finishTemplate vacuums, freezes and analyzes a template database, so every copy starts
// with the same statistics and visibility map and no measurement pays for hint bits.
func (b *bench) finishTemplate(ctx context.Context, full string) error {
	conn, err := pgx.Connect(ctx, b.url(full))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `VACUUM (FREEZE, ANALYZE)`)
	return err
}

// copyDB copies template into a fresh database and opens a pool on it for the benchmark's
// own SQL.
func (b *bench) copyDB(ctx context.Context, template, name string) (*pgxpool.Pool, string, error) {
	full, err := b.createDB(ctx, name, template)
	if err != nil {
		return nil, "", err
	}
	conf, err := pgxpool.ParseConfig(b.url(full))
	if err != nil {
		return nil, "", err
	}
	conf.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return nil, "", err
	}
	return pool, full, nil
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}
