package outbound

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// maxEntries bounds each outbound field of a namespace.
const maxEntries = 100

var envSecretRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,62}$`)

// Binding is what an admin's PUT /v1/namespaces/{ns} sets of the namespace's surface, checked
// and in normal form; a nil field is left as it is.
type Binding struct {
	SQLTargets, HTTPAllow, EnvSecrets *[]string
	// Logins are the logins of SQLTargets ("user@host:port/database"), which the namespace
	// binds (store.BindSQLLogins).
	Logins []string
}

// Problem is one wrong entry: its field ("sql_targets[1]") and what to do.
type Problem struct{ Field, Detail string }

// CheckBinding checks a PUT's outbound fields for namespace ns against what the operator
// declared, reporting every wrong entry at once. Whether another namespace holds a login is
// the database's to say, under its lock (store.BindSQLLogins).
func (p *Policy) CheckBinding(ns string, sqlTargets, httpAllow, envSecrets *[]string) (Binding, []Problem) {
	var b Binding
	var problems []Problem
	fail := func(field string, i int, format string, args ...any) {
		problems = append(problems, Problem{Field: fmt.Sprintf("%s[%d]", field, i), Detail: fmt.Sprintf(format, args...)})
	}
	tooMany := func(field string, list *[]string) bool {
		if list != nil && len(*list) > maxEntries {
			problems = append(problems, Problem{Field: field, Detail: fmt.Sprintf("%d entries; at most %d", len(*list), maxEntries)})
			return true
		}
		return false
	}
	if list := sqlTargets; list != nil && !tooMany("sql_targets", list) {
		names := []string{}
		for i, name := range *list {
			upper := strings.ToUpper(name)
			login, ok := p.targets.LoginOf(upper)
			if !ok {
				fail("sql_targets", i, "%s", p.undeclared(name))
				continue
			}
			names = append(names, upper)
			b.Logins = append(b.Logins, login)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		b.SQLTargets = &names
	}
	if list := httpAllow; list != nil && !tooMany("http_allow", list) {
		var inside []string
		for i, entry := range *list {
			if _, err := p.guard.Narrow(ns, []string{entry}); err != nil {
				fail("http_allow", i, "%s", err.Error())
				continue
			}
			inside = append(inside, entry)
		}
		if g, err := p.guard.Narrow(ns, inside); err == nil {
			entries := g.Entries()
			b.HTTPAllow = &entries
		}
	}
	if list := envSecrets; list != nil && !tooMany("env_secrets", list) {
		names := []string{}
		for i, name := range *list {
			v := p.env[name]
			switch {
			case !envSecretRE.MatchString(name):
				fail("env_secrets", i, "%q is not a secret name: want upper-case letters, digits and _, starting with a letter (the NAME of SCHEDULER_SECRET_<NAME>)", name)
			case v == "":
				fail("env_secrets", i, "SCHEDULER_SECRET_%s is not set on this scheduler: an operator sets it on every replica first", name)
			case p.targets.IsPassword(v):
				fail("env_secrets", i, "SCHEDULER_SECRET_%s holds a SQL target's password, which no namespace may be granted", name)
			default:
				names = append(names, name)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		b.EnvSecrets = &names
	}
	return b, problems
}

// undeclared says that name is no declared target, and which are (for an admin).
func (p *Policy) undeclared(name string) string {
	declared := p.targets.Names()
	if len(declared) == 0 {
		return fmt.Sprintf("%q: no SQL target is declared on this scheduler; an operator declares one with SCHEDULER_SQL_TARGET_<NAME>=postgres://<the jobs' login>@host/db", name)
	}
	return fmt.Sprintf("%q is not a declared SQL target; declared: %s", name, strings.Join(declared, ", "))
}

// LoginOf is the login of declared target name (targets.SQLTargets.LoginOf).
func (p *Policy) LoginOf(name string) (string, bool) { return p.targets.LoginOf(name) }
