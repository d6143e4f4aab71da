package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Executor is the store's one calling style (modelled on River's riverdriver.Executor): named
// queries that read the same whether they run on the pool (*DB, one pooled connection per
// query) or inside a fenced transaction (*Tx). Callers never build SQL and never choose
// between a pool, a transaction and a connection.
//
// The leader's writes that are only correct under the fence (claiming a slot, finishing a
// run, picking a queued run, abandoning an older epoch's runs) are not here: they are
// methods of *Tx only, so the type says they need Fenced.
type Executor interface {
	// Now is the database clock. Every time comparison that decides a claim, a lease or a
	// catch-up uses it, never a replica's clock.
	Now(ctx context.Context) (time.Time, error)

	// job_runs (runs.go)
	Run(ctx context.Context, id int64) (*Run, error)
	ListRuns(ctx context.Context, f RunFilter) ([]*Run, error)
	QueueManualRun(ctx context.Context, job string, reason *string, params []byte) (run *Run, created bool, err error)
	QueueSlotRun(ctx context.Context, job string, scheduledAt time.Time, trigger string, reason *string, params []byte) (run *Run, created bool, err error)
	CancelRun(ctx context.Context, id int64) (*Run, CancelOutcome, error)
	CancelRequested(ctx context.Context, partition int, epoch int64) ([]int64, error)
	RunningRuns(ctx context.Context, partition int, epoch int64) ([]int64, error)

	SlotRuns(ctx context.Context, job string, since, until time.Time) ([]*Run, error)
	FirstSlot(ctx context.Context, job string) (time.Time, error)
	RecordedSlots(ctx context.Context, jobs []string, from, to time.Time) (map[string]map[time.Time]bool, error)
	RanRuns(ctx context.Context, jobs []string) (map[string]RanRuns, error)

	// job_settings, with each job's latest runs (settings.go)
	JobStates(ctx context.Context, jobs []string) (now time.Time, paused map[string]bool, last map[string]*Run, err error)
	JobHistories(ctx context.Context, jobs []string) ([]JobHistory, error)
	SetPaused(ctx context.Context, job string, paused bool) error

	// job_definitions (definitions.go) and run_attempts (attempts.go)
	CreateDefinition(ctx context.Context, name, kind string, def json.RawMessage, maxJobs int) (StoredDefinition, error)
	ReplaceDefinition(ctx context.Context, name, kind string, def json.RawMessage, ifVersion int64) (before, after StoredDefinition, err error)
	DeleteDefinition(ctx context.Context, name string, ifVersion int64) (StoredDefinition, error)
	Definition(ctx context.Context, name string) (StoredDefinition, error)
	Definitions(ctx context.Context) ([]StoredDefinition, error)
	PartitionDefinitions(ctx context.Context, partition int) ([]StoredDefinition, error)
	DefinitionVersions(ctx context.Context, partition int) (map[string]int64, error)
	Attempts(ctx context.Context, runID int64) ([]Attempt, error)
	CallKeySource(ctx context.Context, runID int64) (CallKeySource, error)
	Deployment(ctx context.Context) (uuid.UUID, error)
	ConsecutiveFailures(ctx context.Context, job string, n int) (bool, error)
	AfterGraph(ctx context.Context, ns string, lock bool) (map[string][]string, error)
	Children(ctx context.Context, key string, lock bool) ([]string, error)
	RunLinks(ctx context.Context, id int64) (parents, caused []int64, err error)

	// scheduler_namespaces (namespaces.go) and scheduler_tokens (tokens.go)
	PutNamespace(ctx context.Context, n Namespace) (Namespace, bool, error)
	Namespace(ctx context.Context, name string) (Namespace, error)
	Namespaces(ctx context.Context, names []string) ([]Namespace, map[string]NamespaceCounts, error)
	CreateToken(ctx context.Context, t Token, hash []byte) (Token, error)
	Tokens(ctx context.Context) ([]Token, error)
	RevokeToken(ctx context.Context, id string) (Token, error)
	ActiveToken(ctx context.Context, hash []byte) (t Token, ok bool, err error)
	NamespaceCallLimits(ctx context.Context) (map[string]int, error)
	BindSQLLogins(ctx context.Context, ns string, logins []string) (map[string]string, error)
	SQLLogins(ctx context.Context) (map[string]string, error)

	// scheduler_secrets (secrets.go): sealed values, which only the leader's call and a key
	// rotation read
	PutSecret(ctx context.Context, s SealedSecret) (Secret, bool, error)
	Secret(ctx context.Context, ns, name string) (Secret, error)
	Secrets(ctx context.Context, ns string) ([]Secret, error)
	SealedSecrets(ctx context.Context, ns string, names []string) ([]SealedSecret, error)
	DeleteSecret(ctx context.Context, ns, name string) (Secret, error)
	SecretsToReseal(ctx context.Context, keyID, afterNamespace, afterName string, limit int) ([]SealedSecret, error)
	ResealSecret(ctx context.Context, s SealedSecret, keyID string, sealed []byte) (bool, error)
	SecretKeyIDs(ctx context.Context) (map[string]int, error)

	// scheduler_oidc_keys (oidc_keys.go): the targets' token signing keys, sealed
	LockOIDCKeys(ctx context.Context) error
	OIDCKeys(ctx context.Context, withRetired bool) ([]OIDCKey, error)
	InsertOIDCKey(ctx context.Context, k OIDCKey, at time.Time) error
	PromoteOIDCKey(ctx context.Context, kid string, at time.Time) error
	RetireOIDCKeys(ctx context.Context, before, at time.Time) ([]string, error)
	ResealOIDCKey(ctx context.Context, kid, oldKeyID, keyID string, sealed []byte) (bool, error)

	// scheduler_backfills (backfills.go)
	CreateBackfill(ctx context.Context, b Backfill) (Backfill, error)
	Backfill(ctx context.Context, id int64) (Backfill, error)
	RunningBackfills(ctx context.Context) ([]Backfill, error)
	AdvanceBackfill(ctx context.Context, id int64, next int, runID *int64) (ok bool, err error)
	EndBackfill(ctx context.Context, id int64, state string) (Backfill, error)

	// scheduler_leader (leader.go)
	Leader(ctx context.Context) (LeaderRow, error)

	// scheduler_leader and scheduler_partitions as seen by any replica (partitions_view.go)
	PartitionHoldings(ctx context.Context, lease time.Duration) ([]PartitionHolding, error)
	PartitionJobs(ctx context.Context) (map[int]int64, error)

	// scheduler_instances (instances.go)
	Instances(ctx context.Context) ([]Instance, error)
	HeartbeatInstance(ctx context.Context, in Instance) (dbClock time.Time, err error)
	DeleteInstance(ctx context.Context, instanceID string) error
	DeleteStaleInstances(ctx context.Context, olderThan time.Duration) (int64, error)

	// idempotency_keys (idempotency.go)
	CompleteIdempotencyKey(ctx context.Context, key, scope string, status int, body []byte) error

	// operator_actions and step-down requests (operator.go)
	RecordAction(ctx context.Context, a Action) error
	Actions(ctx context.Context, f ActionFilter) ([]Action, error)
	RequestStepDown(ctx context.Context, req ControlRequest) (l LeaderRow, ok bool, err error)
	RequestDrain(ctx context.Context, instanceID string, req ControlRequest) (ok bool, err error)

	// scheduler_notifications and their deliveries (notifications.go)
	RecordNotifications(ctx context.Context, events []NotificationEvent) (int64, error)
	RecoveredRuns(ctx context.Context, ids []int64) ([]int64, error)
	Waiting(ctx context.Context, job string) ([]WaitingNotification, error)
	Deliveries(ctx context.Context, job string, limit int) ([]Delivery, error)
	DueDeliveries(ctx context.Context, limit int, busy []string) ([]Delivery, error)

	// pg_locks and scheduler_locks (locks.go)
	Locks(ctx context.Context) ([]Lock, error)

	// schema_migrations (migrate.go)
	AppliedVersion(ctx context.Context) (version uint, dirty bool, err error)
}

// Atomically runs fn in one plain transaction (not fenced: any replica's API may call it),
// handing it the Executor on that transaction: an operator's action and its audit row
// (RecordAction) commit together or not at all. fn's error rolls back and is returned as is.
func (db *DB) Atomically(ctx context.Context, fn func(ex Executor) error) error {
	return pgx.BeginFunc(ctx, db.pool, func(ptx pgx.Tx) error { return fn(queries{ptx}) })
}

// Both handles satisfy Executor.
var (
	_ Executor = (*DB)(nil)
	_ Executor = (*Tx)(nil)
	_ Executor = queries{}
)

// dbtx is what a named query runs on: the pool, or a transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queries implements Executor on a dbtx; *DB and *Tx embed it.
type queries struct{ q dbtx }

func (q queries) Now(ctx context.Context) (time.Time, error) { return q.NowOr(ctx, nil) }

// NowOr returns now when set, else the database's clock. The statements that decide by time
// take such a now (River's NowOrNil): nil in production, so every decision is on the one
// clock, the database's; a test sets it to move Go's and SQL's time together (nowSQL).
func (q queries) NowOr(ctx context.Context, now *time.Time) (time.Time, error) {
	var at time.Time
	err := q.q.QueryRow(ctx, `SELECT `+nowSQL(1), now).Scan(&at)
	return at, err
}

// nowSQL is the time of a statement whose n-th argument is a now that is nil in production
// (the claim statements, constants, spell it out).
func nowSQL(n int) string { return fmt.Sprintf("coalesce($%d::timestamptz, now())", n) }

// Tx is a fenced transaction (see Fenced). It is a pgx.Tx, for the job body's own SQL, and
// an Executor, and it carries the leader's fenced writes.
type Tx struct {
	pgx.Tx
	queries
	// epoch is the term the transaction is fenced by: the leader's writes (ClaimSlot,
	// RecordMissed, PickQueued, AbandonRuns) stamp it, so callers never say it twice.
	epoch int64
	// partition is the partition of that term (store.Fence): the runs those writes insert
	// carry it, and the leader's reads across jobs (the queue, the rescue, the callback
	// watch) see only its runs, so that one partition's term never takes another's.
	partition int
}

func newTx(tx pgx.Tx, f Fence) *Tx {
	return &Tx{Tx: tx, queries: queries{tx}, epoch: f.Epoch, partition: f.Partition}
}
