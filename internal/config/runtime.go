package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/schedulerhq/scheduler/internal/secrets/seal"
)

// Runtime is the configuration of runtime jobs, the jobs users define through the API.
type Runtime struct {
	// HTTPAllow are the CIDRs and host names an HTTP job may call although they are private
	// (SCHEDULER_HTTP_ALLOW); cloud-metadata addresses stay refused.
	HTTPAllow []string
	// SQLTargets are the databases SQL jobs may run in (SCHEDULER_SQL_TARGET_<NAME>), by
	// NAME; none refuses SQL jobs.
	SQLTargets map[string]SQLTarget
	// SQLConnections bounds each SQL target's runs at once (SCHEDULER_SQL_CONNECTIONS).
	SQLConnections int
	// Secrets are the values of SCHEDULER_SECRET_<NAME>, by NAME: the operator's secrets,
	// which a namespace's jobs may use once an admin grants them (internal/outbound). Never
	// logged.
	Secrets map[string]string
	// SecretBox seals and opens the secrets stored through the API (SCHEDULER_SECRET_KEY,
	// SCHEDULER_SECRET_KEY_PREVIOUS); without a key it seals nothing.
	SecretBox *seal.Box
	// MaxJobs bounds the runtime jobs (SCHEDULER_MAX_JOBS).
	MaxJobs int
	// OIDCKeyRotation is how long a key signs the targets' OIDC tokens before the next one
	// takes over (SCHEDULER_OIDC_KEY_ROTATION; internal/idp).
	OIDCKeyRotation time.Duration
	// HTTPConcurrency bounds outbound calls in flight on the leader, all targets together;
	// HTTPHostConcurrency bounds them per target host, HTTPJobConcurrency per job (so one
	// job's slow targets cannot hold the whole bound for their timeout).
	HTTPConcurrency, HTTPHostConcurrency, HTTPJobConcurrency int
	// RunConcurrency bounds the run bodies a replica runs at once, every partition it leads
	// together (SCHEDULER_RUN_CONCURRENCY); one namespace holds at most half of them.
	RunConcurrency int
}

// SQLTarget is one SCHEDULER_SQL_TARGET_<NAME>.
type SQLTarget struct {
	// URL is the connection string with its password: from the URL itself, or from the
	// secret its password_secret parameter names. Never logged.
	URL string
}

// Runtime jobs' defaults and bounds.
const (
	MaxJobsDefault             = 10000
	HTTPConcurrencyDefault     = 512
	HTTPHostConcurrencyDefault = 64
	HTTPJobConcurrencyDefault  = 16
	SQLConnectionsDefault      = 4
	RunConcurrencyDefault      = 1024
	// OIDCKeyRotationDefault is SCHEDULER_OIDC_KEY_ROTATION's default; the bounds keep a
	// rotation longer than a next key's pre-publication and a token's life (minutes).
	OIDCKeyRotationDefault = 30 * 24 * time.Hour
	minOIDCKeyRotation     = time.Hour
	maxOIDCKeyRotation     = 365 * 24 * time.Hour
	maxJobsLimit           = 1000000
	maxHTTPConcurrency     = 65536
	maxSQLConnections      = 100
	maxRunConcurrency      = 1 << 20
	secretPrefix           = "SCHEDULER_SECRET_"
	sqlTargetPrefix        = "SCHEDULER_SQL_TARGET_"
	// passwordSecretParam names, in a target's URL, the secret that holds its password.
	passwordSecretParam = "password_secret"
)

// loadRuntime reads the runtime jobs' settings.
func loadRuntime(env *Env) Runtime {
	r := Runtime{
		MaxJobs:             env.Int("SCHEDULER_MAX_JOBS", MaxJobsDefault),
		HTTPConcurrency:     env.Int("SCHEDULER_HTTP_CONCURRENCY", HTTPConcurrencyDefault),
		HTTPHostConcurrency: env.Int("SCHEDULER_HTTP_HOST_CONCURRENCY", HTTPHostConcurrencyDefault),
		HTTPJobConcurrency:  env.Int("SCHEDULER_HTTP_JOB_CONCURRENCY", HTTPJobConcurrencyDefault),
		SQLConnections:      env.Int("SCHEDULER_SQL_CONNECTIONS", SQLConnectionsDefault),
		RunConcurrency:      env.Int("SCHEDULER_RUN_CONCURRENCY", RunConcurrencyDefault),
	}
	for _, entry := range strings.Split(env.String("SCHEDULER_HTTP_ALLOW", ""), ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		_, _, cidrErr := net.ParseCIDR(entry)
		if cidrErr != nil && net.ParseIP(entry) == nil && (strings.ContainsAny(entry, ":/ @") || !printableASCII(entry)) {
			env.Fail("SCHEDULER_HTTP_ALLOW", entry, "comma-separated CIDRs, addresses and host names, such as 10.20.0.0/16,::1,receiver.internal")
			continue
		}
		r.HTTPAllow = append(r.HTTPAllow, entry)
	}
	if _, ok := env.lookup("SCHEDULER_SQL_ROLE"); ok {
		env.Fail("SCHEDULER_SQL_ROLE", env.String("SCHEDULER_SQL_ROLE", ""),
			"nothing: SQL jobs now run on targets of their own; declare SCHEDULER_SQL_TARGET_<NAME>=postgres://<job login>@host/db instead (docs/operations.md, \"Moving SQL jobs to targets\")")
	}
	if r.MaxJobs < 1 || r.MaxJobs > maxJobsLimit {
		env.Fail("SCHEDULER_MAX_JOBS", strconv.Itoa(r.MaxJobs), fmt.Sprintf("a whole number from 1 to %d such as 10000", maxJobsLimit))
	}
	for _, name := range []string{"SCHEDULER_HTTP_CONCURRENCY", "SCHEDULER_HTTP_HOST_CONCURRENCY", "SCHEDULER_HTTP_JOB_CONCURRENCY"} {
		if n := env.Int(name, 1); n < 1 || n > maxHTTPConcurrency {
			env.Fail(name, strconv.Itoa(n), fmt.Sprintf("a whole number from 1 to %d", maxHTTPConcurrency))
		}
	}
	if r.RunConcurrency < 1 || r.RunConcurrency > maxRunConcurrency {
		env.Fail("SCHEDULER_RUN_CONCURRENCY", strconv.Itoa(r.RunConcurrency), fmt.Sprintf("a whole number from 1 to %d such as 1024", maxRunConcurrency))
	}
	if r.SQLConnections < 1 || r.SQLConnections > maxSQLConnections {
		env.Fail("SCHEDULER_SQL_CONNECTIONS", strconv.Itoa(r.SQLConnections), fmt.Sprintf("a whole number from 1 to %d such as 4", maxSQLConnections))
	}
	r.OIDCKeyRotation = env.Duration("SCHEDULER_OIDC_KEY_ROTATION", OIDCKeyRotationDefault)
	if r.OIDCKeyRotation < minOIDCKeyRotation || r.OIDCKeyRotation > maxOIDCKeyRotation {
		env.Fail("SCHEDULER_OIDC_KEY_ROTATION", env.String("SCHEDULER_OIDC_KEY_ROTATION", ""), "a duration from 1h to 8760h (a year) such as 720h (30 days)")
	}
	r.Secrets = secrets(env)
	r.SecretBox = LoadSecretBox(env)
	r.SQLTargets = LoadSQLTargets(env)
	return r
}

// secrets reads SCHEDULER_SECRET_<NAME> by NAME.
func secrets(env *Env) map[string]string {
	values := map[string]string{}
	for _, name := range env.Names(secretPrefix) {
		if name == secretKeyVar || name == secretKeyPreviousVar {
			continue
		}
		values[strings.TrimPrefix(name, secretPrefix)] = env.String(name, "")
	}
	return values
}

// LoadSQLTargets reads SCHEDULER_SQL_TARGET_<NAME> by NAME, each password resolved; a
// problem is recorded on env.
func LoadSQLTargets(env *Env) map[string]SQLTarget {
	values := secrets(env)
	targets := map[string]SQLTarget{}
	for _, name := range env.Names(sqlTargetPrefix) {
		target := strings.TrimPrefix(name, sqlTargetPrefix)
		if !targetName(target) {
			env.Fail(name, "", "a target name of upper-case letters, digits and _ after SCHEDULER_SQL_TARGET_, such as SCHEDULER_SQL_TARGET_APP")
			continue
		}
		u, problem := targetURL(env.String(name, ""), values)
		if problem != "" {
			env.Fail(name, redactPassword(env.String(name, "")), "a PostgreSQL URL of the jobs' own login, such as postgres://app_jobs@db.internal/app?password_secret=APP_JOBS_PASSWORD ("+problem+")")
			continue
		}
		targets[target] = SQLTarget{URL: u}
	}
	return targets
}

// targetURL checks a target's connection string and resolves its password_secret.
func targetURL(raw string, secrets map[string]string) (string, string) {
	if problem := checkDatabaseURL(raw); problem != "" {
		return "", problem
	}
	if !strings.Contains(raw, "://") {
		return raw, "" // keyword/value: no password_secret there
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "not a URL"
	}
	q := u.Query()
	secret := q.Get(passwordSecretParam)
	if secret == "" {
		return raw, ""
	}
	value, ok := secrets[secret]
	if !ok || value == "" {
		return "", fmt.Sprintf("%s=%s names a secret that is not set: set %s%s", passwordSecretParam, secret, secretPrefix, secret)
	}
	if _, has := u.User.Password(); has {
		return "", fmt.Sprintf("both a password and %s: give one", passwordSecretParam)
	}
	q.Del(passwordSecretParam)
	u.RawQuery = q.Encode()
	u.User = url.UserPassword(u.User.Username(), value)
	s := u.String()
	if _, err := pgconn.ParseConfig(s); err != nil {
		return "", "unreadable once its password was added"
	}
	return s, ""
}

// targetName reports a target's NAME: upper-case letters, digits and _, at most 63.
func targetName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}
