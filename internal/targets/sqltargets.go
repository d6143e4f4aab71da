package targets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
)

// SQLTargets are the declared targets by upper-case NAME; nil or empty refuses SQL jobs.
type SQLTargets struct {
	byName map[string]*SQLTarget
}

// NewSQLTargets collects targets.
func NewSQLTargets(targets ...*SQLTarget) *SQLTargets {
	ts := &SQLTargets{byName: map[string]*SQLTarget{}}
	for _, t := range targets {
		ts.byName[t.Name()] = t
	}
	return ts
}

// Lookup finds the target a definition names, case-insensitively; the error says which
// targets exist. (A target whose login could reach the scheduler stops the replica at start;
// one granted more later fails each run with the reason.)
func (ts *SQLTargets) Lookup(name string) (*SQLTarget, error) {
	if ts == nil || len(ts.byName) == 0 {
		return nil, errors.New("no SQL target is declared on this scheduler: an operator declares one with SCHEDULER_SQL_TARGET_<NAME>=postgres://<the jobs' login>@host/db")
	}
	t, ok := ts.byName[strings.ToUpper(name)]
	if !ok {
		return nil, fmt.Errorf("%q is not a declared SQL target; declared: %s", name, strings.Join(ts.names(), ", "))
	}
	return t, nil
}

// Check reports whether a definition may name target (definition.Env.SQLTarget).
func (ts *SQLTargets) Check(target string) error {
	_, err := ts.Lookup(target)
	return err
}

// CheckAll checks every target at start (SQLTarget.Check): a login that could reach the
// scheduler is an error for the caller to stop on; a target that cannot be reached is only
// logged, since its database may come up later, and its runs check it again.
func (ts *SQLTargets) CheckAll(ctx context.Context, log *slog.Logger) error {
	if ts == nil {
		return nil
	}
	var refused []error
	for _, name := range ts.names() {
		err := ts.byName[name].Check(ctx)
		switch {
		case err == nil:
			log.Info("SQL target ready", "target", name, "login", ts.byName[name].Login())
		case errors.Is(err, ErrTargetRefused):
			refused = append(refused, err)
		default:
			log.Warn("SQL target not checked at start; its runs check it", "target", name, "error", err)
		}
	}
	return errors.Join(refused...)
}

// LoginOf returns the login target name connects as, with the server and database it
// reaches ("user@host:port/database", the host as its URL writes it, lower-case): what one
// namespace alone may bind. ok is false for a target not declared. (Two spellings of one
// server, a name and its address, are two logins here: an operator declares each login once.)
func (ts *SQLTargets) LoginOf(name string) (login string, ok bool) {
	t, err := ts.Lookup(name)
	if err != nil {
		return "", false
	}
	c := t.conf.Conn
	return fmt.Sprintf("%s@%s/%s", c.User, net.JoinHostPort(strings.ToLower(c.Host), strconv.Itoa(int(c.Port))), c.Database), true
}

// Names are the declared targets' names, sorted.
func (ts *SQLTargets) Names() []string {
	if ts == nil {
		return nil
	}
	return ts.names()
}

// IsPassword reports whether v is the password of a declared target: an environment secret
// with that value is a target's, which no definition may name.
func (ts *SQLTargets) IsPassword(v string) bool {
	if ts == nil || v == "" {
		return false
	}
	for _, t := range ts.byName {
		if t.conf.Conn.Password == v {
			return true
		}
	}
	return false
}

func (ts *SQLTargets) names() []string {
	names := make([]string, 0, len(ts.byName))
	for n := range ts.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
