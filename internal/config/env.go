package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Error is one invalid variable. Its message names the variable, the bad
// value and what a valid value looks like, on one line, so that an operator
// can fix the deployment from the log alone.
type Error struct {
	Var   string
	Value string // "" when the variable is not set
	Want  string // what a valid value looks like, e.g. "one of json, text"
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s is not set: want %s", e.Var, e.Want)
	}
	// %q keeps the message on one line whatever the value holds.
	return fmt.Sprintf("%s=%q is not valid: want %s", e.Var, e.Value, e.Want)
}

// Env is the process environment as a map. Its typed getters record an
// Error and return the default instead of failing at the first bad value, so
// that a user sees every bad variable at once from Err.
//
// A variable set to the empty string (or only spaces) counts as not set:
// "FOO=" in a compose or env file usually means "use the default".
type Env struct {
	vars map[string]string
	errs []error
}

// NewEnv makes an Env from "NAME=value" entries, as os.Environ returns them.
func NewEnv(environ []string) *Env {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if _, seen := vars[name]; ok && !seen { // the first wins, as in os.Getenv
			vars[name] = value
		}
	}
	return &Env{vars: vars}
}

func (e *Env) lookup(name string) (string, bool) {
	v := strings.TrimSpace(e.vars[name])
	return v, v != ""
}

// String returns the variable's value, or def if it is not set.
func (e *Env) String(name, def string) string {
	if v, ok := e.lookup(name); ok {
		return v
	}
	return def
}

// Duration parses the variable as a Go duration ("30s", "5m", "1h30m", or a
// bare "0"), or returns def if it is not set.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.Fail(name, v, `a Go duration such as "30s", "5m" or "1h30m"`)
		return def
	}
	return d
}

// Int parses the variable as a decimal integer, or returns def if it is not set.
func (e *Env) Int(name string, def int) int {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.Fail(name, v, "a whole number such as 10")
		return def
	}
	return n
}

// Bool parses true/false/1/0/yes/no (any case), or returns def if the
// variable is not set.
func (e *Env) Bool(name string, def bool) bool {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes":
		return true
	case "false", "0", "no":
		return false
	}
	e.Fail(name, v, "one of true, false, 1, 0, yes, no")
	return def
}

// Fail records that variable name has a bad value; value "" means it is not set.
func (e *Env) Fail(name, value, want string) {
	e.errs = append(e.errs, &Error{Var: name, Value: value, Want: want})
}

// Err returns every recorded error joined (one per line), or nil if none.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// Names returns the names of the set variables that start with prefix, sorted.
func (e *Env) Names(prefix string) []string {
	var names []string
	for name := range e.vars {
		if _, ok := e.lookup(name); ok && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
