package client

import "time"

// Leader is GET /v1/leader's answer: who leads, under which term, since when. The term is
// the epoch with its term_id: after a failover that lost commits an epoch number can come
// back, the term id cannot.
type Leader struct {
	InstanceID string    `json:"instance_id"`
	Epoch      int64     `json:"epoch"`
	TermID     string    `json:"term_id"`
	Since      time.Time `json:"since"`
	IsSelf     bool      `json:"is_self"`
}

// Instance is one replica as GET /v1/instances lists it.
type Instance struct {
	InstanceID string    `json:"instance_id"`
	Host       string    `json:"host"`
	Version    string    `json:"version"`
	HTTPAddr   string    `json:"http_addr"`
	StartedAt  time.Time `json:"started_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	IsLeader   bool      `json:"is_leader"`
	IsSelf     bool      `json:"is_self"`
}

// Instances is GET /v1/instances's answer.
type Instances struct {
	Instances []Instance `json:"instances"`
}

// Notification is one message to one destination (openapi.yaml's Notification).
type Notification struct {
	ID          int64      `json:"id"`
	Event       string     `json:"event"`
	Type        string     `json:"type"`
	Kind        string     `json:"kind"`
	Destination string     `json:"destination"`
	WebhookID   string     `json:"webhook_id"`
	Runs        []int64    `json:"runs"`
	Count       int        `json:"count"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	StatusCode  *int       `json:"status_code"`
	Error       *string    `json:"error"`
	CreatedAt   time.Time  `json:"created_at"`
	SentAt      *time.Time `json:"sent_at"`
	// NextAttemptAt is when a pending message is tried next; null once sent or failed.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
}

// Partitions is GET /v1/partitions's answer: who leads what. Runtime jobs hash by key onto
// Count partitions; partition 0 is the coordinator's (GET /v1/leader), which also runs the
// built-in jobs.
type Partitions struct {
	Count      int                `json:"count"`
	Partitions []Partition        `json:"partitions"`
	Replicas   []PartitionReplica `json:"replicas"`
}

// Partition is one partition and its term. Holder is null while nobody holds it: never
// elected, or its last holder stopped renewing it for longer than the lease (dead or
// paused); LastHolder, Epoch, TermID and Since are then the last term's.
type Partition struct {
	Partition  int        `json:"partition"`
	Holder     *string    `json:"holder"`
	LastHolder *string    `json:"last_holder"`
	Epoch      int64      `json:"epoch"`
	TermID     *string    `json:"term_id"`
	Since      *time.Time `json:"since"`
	RenewedAt  *time.Time `json:"renewed_at"`
	// Handovers counts the elections that changed the holder (0 for partition 0).
	Handovers int64 `json:"handovers"`
	// Jobs are the runtime jobs hashed onto the partition, and on partition 0 the built-in ones.
	Jobs        int64 `json:"jobs"`
	Coordinator bool  `json:"coordinator"`
}

// PartitionReplica is one replica and how many partitions it holds now (partition 0
// included when it is the coordinator).
type PartitionReplica struct {
	InstanceID  string `json:"instance_id"`
	Partitions  int    `json:"partitions"`
	Coordinator bool   `json:"coordinator"`
	IsSelf      bool   `json:"is_self"`
}
