package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Runtime is the configuration of runtime jobs, the jobs users define through the API.
type Runtime struct {
	// HTTPAllow are the CIDRs and host names an HTTP job may call although they are private
	// (SCHEDULER_HTTP_ALLOW); cloud-metadata addresses stay refused.
	HTTPAllow []string
	// SQLRole is the PostgreSQL role SQL jobs run as (SCHEDULER_SQL_ROLE); "" refuses SQL jobs.
	SQLRole string
	// Secrets are the values of SCHEDULER_SECRET_<NAME>, by NAME. Never logged.
	Secrets map[string]string
	// MaxJobs bounds the runtime jobs (SCHEDULER_MAX_JOBS).
	MaxJobs int
	// HTTPConcurrency bounds outbound calls in flight on the leader, all targets together;
	// HTTPHostConcurrency bounds them per target host, HTTPJobConcurrency per job (so one
	// job's slow targets cannot hold the whole bound for their timeout).
	HTTPConcurrency, HTTPHostConcurrency, HTTPJobConcurrency int
}

// Runtime jobs' defaults and bounds.
const (
	MaxJobsDefault             = 10000
	HTTPConcurrencyDefault     = 512
	HTTPHostConcurrencyDefault = 64
	HTTPJobConcurrencyDefault  = 16
	maxJobsLimit               = 1000000
	maxHTTPConcurrency         = 65536
	secretPrefix               = "SCHEDULER_SECRET_"
	// secretKeyVar is reserved for the key that would encrypt secrets stored by the API.
	secretKeyVar = "SCHEDULER_SECRET_KEY"
)

// loadRuntime reads the runtime jobs' settings.
func loadRuntime(env *Env) Runtime {
	r := Runtime{
		SQLRole:             env.String("SCHEDULER_SQL_ROLE", ""),
		MaxJobs:             env.Int("SCHEDULER_MAX_JOBS", MaxJobsDefault),
		HTTPConcurrency:     env.Int("SCHEDULER_HTTP_CONCURRENCY", HTTPConcurrencyDefault),
		HTTPHostConcurrency: env.Int("SCHEDULER_HTTP_HOST_CONCURRENCY", HTTPHostConcurrencyDefault),
		HTTPJobConcurrency:  env.Int("SCHEDULER_HTTP_JOB_CONCURRENCY", HTTPJobConcurrencyDefault),
		Secrets:             map[string]string{},
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
	if r.SQLRole != "" && !sqlIdentifier(r.SQLRole) {
		env.Fail("SCHEDULER_SQL_ROLE", r.SQLRole, "a PostgreSQL role name of lower-case letters, digits and _, such as scheduler_jobs")
	}
	if r.MaxJobs < 1 || r.MaxJobs > maxJobsLimit {
		env.Fail("SCHEDULER_MAX_JOBS", strconv.Itoa(r.MaxJobs), fmt.Sprintf("a whole number from 1 to %d such as 10000", maxJobsLimit))
	}
	for _, name := range []string{"SCHEDULER_HTTP_CONCURRENCY", "SCHEDULER_HTTP_HOST_CONCURRENCY", "SCHEDULER_HTTP_JOB_CONCURRENCY"} {
		if n := env.Int(name, 1); n < 1 || n > maxHTTPConcurrency {
			env.Fail(name, strconv.Itoa(n), fmt.Sprintf("a whole number from 1 to %d", maxHTTPConcurrency))
		}
	}
	for _, name := range env.Names(secretPrefix) {
		if name == secretKeyVar {
			continue
		}
		r.Secrets[strings.TrimPrefix(name, secretPrefix)] = env.String(name, "")
	}
	return r
}

// sqlIdentifier reports a plain, unquoted PostgreSQL identifier.
func sqlIdentifier(s string) bool {
	if s == "" || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}
