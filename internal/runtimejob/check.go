package runtimejob

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// Defaults of the fields a definition leaves out.
const (
	TimeoutDefault         = time.Minute
	AttemptTimeoutDefault  = 30 * time.Second
	MethodDefault          = http.MethodPost
	MaxAttemptsDefault     = 3
	InitialBackoffDefault  = time.Second
	MaxBackoffDefault      = time.Minute
	onceCatchupDefault     = time.Hour // a one-time job has no period to default to
	maxTimeout             = 24 * time.Hour
	maxWindow              = 366 * 24 * time.Hour
	maxJitter              = time.Hour
	maxAttempts            = 10
	maxPauseAfterFailures  = 1000
	maxBackoff             = time.Hour
	minBackoff             = 100 * time.Millisecond
	maxSchedule            = 256
	maxDescription         = 1000
	maxLabels              = 32
	maxLabelValue          = 256
	maxURL                 = 2048
	maxHeaders             = 32
	maxHeaderName          = 128
	maxHeaderValue         = 4096
	MaxBody                = 64 << 10
	MaxStatements          = 64 << 10
	maxSuccessStatuses     = 16
	secretEnvPrefix        = "SCHEDULER_SECRET_"
	secretNameWant         = "upper-case letters, digits and _, starting with a letter, at most 63 (e.g. BILLING_TOKEN)"
	headerReservedMessage  = "is set by the scheduler on every call and cannot be overridden"
	durationWant           = `a duration such as "30s", "5m" or "1h30m"`
	sqlTargetMessage       = "required: the name of an operator's SQL target (SCHEDULER_SQL_TARGET_<NAME>), e.g. APP"
	notBothTargetsMessage  = `a job has exactly one target: "http", "sql", "nats" or "river"`
	builtinNameMessageTmpl = "%q is a built-in job's name; choose another"
)

var (
	labelRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`)
	secretRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,62}$`)
	methods  = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	// ReservedHeaders are set by the caller on every attempt (internal/targets); a definition
	// cannot forge the key a receiver deduplicates by, or the signature it verifies.
	ReservedHeaders = []string{"idempotency-key", "webhook-id", "webhook-timestamp", "webhook-signature",
		"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "trailer", "user-agent"}
)

// SecretEnv is the environment variable that holds the named secret's value.
func SecretEnv(name string) string { return secretEnvPrefix + name }

// Env is what a check needs to know about the scheduler it runs on.
type Env struct {
	// IsBuiltin reports a built-in job's name, which a runtime job cannot take.
	IsBuiltin func(name string) bool
	// Secret looks up the named secret of namespace ns (secrets.go): whether the namespace
	// has it, and the hosts it may be sent to (nil: any host, an operator's secret). Nil
	// checks no secret: a stored definition, whose secrets are resolved when it runs.
	Secret func(ns, name string) (allowedHosts []string, ok bool)
	// CheckURL is the outbound guard's check of a target URL (scheme, host, allowed address).
	CheckURL func(raw string) error
	// CheckNATSURL is the same guard's check of a NATS server URL (targets.Guard.CheckNATSURL).
	CheckNATSURL func(raw string) error
	// SQLTarget reports why a SQL job may not name target (unknown, or refused), or nil.
	// Nil checks no target: a stored definition, whose target is checked when it runs.
	SQLTarget func(target string) error
	// TokenSigning says why this scheduler cannot sign the OIDC tokens an http.auth.oidc
	// asks for (no SCHEDULER_SECRET_KEY), or nil. Nil checks nothing: a stored definition,
	// whose runs fail with the reason instead.
	TokenSigning func() error
	// MinInterval is the namespace's least interval between slots (0: any).
	MinInterval time.Duration
	// Now is the time a one-time schedule must lie after.
	Now time.Time
}

// FieldError is one wrong field: its path in the definition ("http.headers.X-Token") and
// what is wrong with it, in words that say what to write instead.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Errors are every wrong field of a definition.
type Errors []FieldError

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid job definition: " + strings.Join(parts, "; ")
}

// checker collects every problem of one definition.
type checker struct {
	env  Env
	errs Errors
}

func (c *checker) fail(field, format string, args ...any) {
	c.errs = append(c.errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// duration parses an optional duration field within [lo, hi]; def when empty.
func (c *checker) duration(field, v string, def, lo, hi time.Duration) time.Duration {
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		c.fail(field, "%q is not %s", v, durationWant)
	case d < lo || d > hi:
		c.fail(field, "%s is out of range: want between %s and %s", v, short(lo), short(hi))
	default:
		return d
	}
	return def
}

// Check validates d, reporting every wrong field at once, and returns the job it defines
// with its defaults filled in.
func Check(d Definition, env Env) (*Checked, Errors) {
	c := &checker{env: env}
	j := &Checked{Def: d}
	def := &j.Def

	switch {
	case !namespace.Valid(d.Name): // a job's name is a DNS label, as a namespace's
		c.fail("name", "%q is not a job name: want 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. daily-report)", d.Name)
	case (d.Namespace == "" || d.Namespace == namespace.Default) && env.IsBuiltin != nil && env.IsBuiltin(d.Name):
		c.fail("name", builtinNameMessageTmpl, d.Name)
	}
	switch {
	case d.Namespace == namespace.Default:
		def.Namespace = ""
	case d.Namespace != "" && !namespace.Valid(d.Namespace):
		c.fail("namespace", "%q is not a namespace: want 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. billing)", d.Namespace)
	}
	c.schedule(j)
	c.after(j)
	c.minInterval(j)
	if utf8.RuneCountInString(d.Description) > maxDescription || !utf8.ValidString(d.Description) || strings.ContainsRune(d.Description, 0) {
		c.fail("description", "at most %d characters of UTF-8 text, without NUL characters", maxDescription)
	}
	c.labels(d.Labels)

	j.Timeout = c.duration("timeout", d.Timeout, TimeoutDefault, time.Second, maxTimeout)
	def.Timeout = short(j.Timeout)
	j.MinGap = c.duration("min_gap", d.MinGap, 0, 0, maxWindow)
	def.MinGap = ""
	if j.MinGap > 0 {
		def.MinGap = short(j.MinGap)
	}
	j.Catchup = c.catchup(j)
	j.Jitter = c.duration("jitter", d.Jitter, 0, 0, maxJitter)
	def.Jitter = ""
	if j.Jitter > 0 {
		def.Jitter = short(j.Jitter)
		if p := c.period(j); p > 0 && j.Jitter >= p {
			c.fail("jitter", "%s is not below the schedule's period (%s): calls would drift into the next slot", d.Jitter, short(p))
		}
	}
	c.overlap(&d, def)
	if d.PauseAfterFailures < 0 || d.PauseAfterFailures > maxPauseAfterFailures {
		c.fail("pause_after_failures", "%d is out of range: want 0 (never pause) to %d", d.PauseAfterFailures, maxPauseAfterFailures)
	}

	ns := namespace.Of(def.Key())
	hasSecret := func(name string) bool {
		if env.Secret == nil {
			return true // a stored definition: its secrets are checked when it runs
		}
		_, ok := env.Secret(ns, name)
		return ok
	}
	for _, p := range notify.Check("notify", d.Notify, notify.Checker{CheckURL: env.CheckURL, HasSecret: hasSecret,
		SecretHint: func(name string) string {
			_, how, _ := strings.Cut(SecretMissing(ns, name), ": ")
			return "in namespace " + ns + "; " + how
		}}) {
		c.fail(p.Field, "%s", p.Message)
	}

	switch {
	case countSet(d.HTTP != nil, d.SQL != nil, d.NATS != nil, d.River != nil) != 1:
		c.fail("http", notBothTargetsMessage)
	case d.HTTP != nil:
		c.http(j)
	case d.SQL != nil:
		c.sql(j)
	case d.NATS != nil:
		c.nats(j)
	default:
		c.river(j)
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return j, nil
}

func (c *checker) period(j *Checked) time.Duration {
	if j.Schedule == nil {
		return 0
	}
	return j.Schedule.Period(time.Now())
}

// catchup is the catch-up window: one period by default, as for built-in jobs.
func (c *checker) catchup(j *Checked) time.Duration {
	if j.Def.Catchup != "" {
		d := c.duration("catchup", j.Def.Catchup, 0, 0, maxWindow)
		j.Def.Catchup = short(d)
		return d
	}
	if j.Schedule != nil && j.Schedule.Once() {
		return onceCatchupDefault
	}
	return c.period(j)
}

func (c *checker) labels(labels map[string]string) {
	if len(labels) > maxLabels {
		c.fail("labels", "%d labels; at most %d", len(labels), maxLabels)
		return
	}
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		if !labelRE.MatchString(k) {
			c.fail("labels."+k, "not a label key: want lower-case letters, digits and . _ / -, at most 63 (e.g. team, owner)")
		}
		if len(v) > maxLabelValue || !utf8.ValidString(v) || strings.ContainsAny(v, "\x00\r\n") {
			c.fail("labels."+k, "a label value is one line of at most %d bytes", maxLabelValue)
		}
	}
}

func (c *checker) sql(j *Checked) {
	s := j.Def.SQL
	c.sqlTarget("sql.target", s.Target)
	switch {
	case strings.TrimSpace(s.Statements) == "":
		c.fail("sql.statements", "required: the statements to run, e.g. REFRESH MATERIALIZED VIEW daily_totals")
	case len(s.Statements) > MaxStatements:
		c.fail("sql.statements", "%d bytes; at most %d (64 KiB)", len(s.Statements), MaxStatements)
	case !utf8.ValidString(s.Statements) || strings.ContainsRune(s.Statements, 0):
		c.fail("sql.statements", "must be UTF-8 text without NUL characters")
	default:
		if err := targets.TransactionControlError(s.Statements); err != nil {
			c.fail("sql.statements", "%s", err.Error())
		}
	}
	if j.Def.Retry != nil {
		c.fail("retry", "applies to http and nats jobs only: a SQL job's statements commit once per slot, with its marker")
	}
}

// sqlTarget checks the SQL target a sql or river job names: declared, and its namespace's.
func (c *checker) sqlTarget(field, target string) {
	if c.env.SQLTarget == nil {
		return
	}
	switch err := c.env.SQLTarget(target); {
	case target == "":
		c.fail(field, sqlTargetMessage)
	case err != nil:
		c.fail(field, "%s", err.Error())
	}
}

// short writes a duration without trailing zero units ("1h", not "1h0m0s").
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// overlap checks the overlap policy and its max_concurrent, which only "allow" has and
// needs: the bound of the job's runs at once, which the database enforces (migration 0021).
func (c *checker) overlap(d, def *Definition) {
	switch d.Overlap {
	case "":
		def.Overlap = OverlapSkip
	case OverlapSkip, OverlapQueueOne, OverlapReplace, OverlapAllow:
	default:
		c.fail("overlap", "%q is not an overlap policy: want %q, %q, %q or %q",
			d.Overlap, OverlapSkip, OverlapQueueOne, OverlapReplace, OverlapAllow)
	}
	switch {
	case d.Overlap == OverlapAllow && d.MaxConcurrent == 0:
		c.fail("max_concurrent", "required with overlap %q: how many runs of the job may run at once, 1 to %d", OverlapAllow, MaxConcurrentCap)
	case d.Overlap == OverlapAllow && (d.MaxConcurrent < 1 || d.MaxConcurrent > MaxConcurrentCap):
		c.fail("max_concurrent", "%d is out of range: want 1 to %d", d.MaxConcurrent, MaxConcurrentCap)
	case d.Overlap != OverlapAllow && d.MaxConcurrent != 0:
		c.fail("max_concurrent", "only with overlap %q; overlap %q runs one run at a time", OverlapAllow, def.Overlap)
	}
}
