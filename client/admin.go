package client

import (
	"encoding/json"
	"time"
)

// Namespace is a team's namespace. A quota left out (nil) is unbounded.
type Namespace struct {
	Name               string  `json:"name"`
	MaxJobs            *int    `json:"max_jobs"`
	MaxConcurrentCalls *int    `json:"max_concurrent_calls"`
	MinInterval        *string `json:"min_interval"`
	// The outbound surface; null is "never set" (namespace default only: what it had
	// before, docs/operations.md).
	SQLTargets *[]string `json:"sql_targets"`
	HTTPAllow  *[]string `json:"http_allow"`
	EnvSecrets *[]string `json:"env_secrets"`
	Jobs       int       `json:"jobs"`
	Secrets    int       `json:"secrets"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Namespaces is GET /v1/namespaces's answer: those the caller may read.
type Namespaces struct {
	Namespaces []Namespace `json:"namespaces"`
}

// Token is an API token made through the API; Token (its value) is set only in the answer
// that made it.
type Token struct {
	ID        string     `json:"id"`
	Token     string     `json:"token,omitempty"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Namespace *string    `json:"namespace"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// Tokens is GET /v1/tokens's answer.
type Tokens struct {
	Tokens []Token `json:"tokens"`
}

// Grant is a role in a namespace.
type Grant struct {
	Namespace string `json:"namespace"`
	Role      string `json:"role"`
}

// Whoami is who the caller is and what it may do (GET /v1/whoami).
type Whoami struct {
	Admin     bool    `json:"admin"`
	Grants    []Grant `json:"grants"`
	Kind      string  `json:"kind"`
	TokenID   string  `json:"token_id"`
	TokenName string  `json:"token_name"`
}

// Secret is a namespace's secret: never its value.
type Secret struct {
	Namespace    string    `json:"namespace"`
	Name         string    `json:"name"`
	Version      int64     `json:"version"`
	AllowedHosts []string  `json:"allowed_hosts"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Secrets is GET …/secrets's answer.
type Secrets struct {
	Secrets []Secret `json:"secrets"`
}

// Backfill is a backfill of a job's past slots.
type Backfill struct {
	ID        int64       `json:"id"`
	Job       string      `json:"job"`
	Namespace string      `json:"namespace"`
	Since     time.Time   `json:"since"`
	Until     time.Time   `json:"until"`
	Only      string      `json:"only"`
	Slots     []time.Time `json:"slots"`
	// Done counts the slots queued so far; RunID is the last one's run.
	Done      int       `json:"done"`
	RunID     *int64    `json:"run_id"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// DryRun marks the answer of a dry run: no backfill (ID 0), the slots that would run.
	DryRun bool `json:"dry_run,omitempty"`
}

// Action is one operator action as GET /v1/audit shows it.
type Action struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Action     string    `json:"action"`
	Job        *string   `json:"job"`
	RunID      *int64    `json:"run_id"`
	Namespace  *string   `json:"namespace"`
	TokenKind  string    `json:"token_kind"`
	TokenID    *string   `json:"token_id"`
	TokenName  *string   `json:"token_name"`
	Reason     *string   `json:"reason"`
	RequestID  string    `json:"request_id"`
	RemoteAddr string    `json:"remote_addr"`
	// Detail is a definition change's {"before": ..., "after": ...} (definitions, or null),
	// absent on the actions that have none.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// ActionPage is a page of GET /v1/audit, newest first: NextCursor, when not nil, continues it.
type ActionPage struct {
	Actions    []Action `json:"actions"`
	NextCursor *string  `json:"next_cursor"`
}

// Lock is a lock of the database as GET /v1/locks shows it: an advisory lock (with its
// key), or one of the scheduler's row locks (no key).
type Lock struct {
	Kind            string     `json:"kind"`
	PID             int32      `json:"pid"`
	ApplicationName string     `json:"application_name"`
	InstanceID      *string    `json:"instance_id"`
	Granted         bool       `json:"granted"`
	Mode            string     `json:"mode"`
	Key             *string    `json:"key"`
	ClassID         *uint32    `json:"classid"`
	ObjID           *uint32    `json:"objid"`
	ObjSubID        *int16     `json:"objsubid"`
	Since           *time.Time `json:"since"`
	AgeMS           *int64     `json:"age_ms"`
	Name            *string    `json:"name"`
	Meaning         *string    `json:"meaning"`
}

// Locks is GET /v1/locks's answer.
type Locks struct {
	Locks []Lock `json:"locks"`
}

// StepDown is the leader asked to step down (POST /v1/leader/step-down).
type StepDown struct {
	InstanceID string    `json:"instance_id"`
	Epoch      int64     `json:"epoch"`
	Since      time.Time `json:"since"`
}

// Drain is the replica asked to give up its partitions (POST /v1/instances/{id}/drain).
type Drain struct {
	InstanceID string `json:"instance_id"`
}
