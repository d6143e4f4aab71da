package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

func (a *testAPI) partitions() client.Partitions {
	a.t.Helper()
	res := a.do("GET", "/v1/partitions", "", nil)
	require.Equal(a.t, http.StatusOK, res.Status, "%s", res.Body)
	var p client.Partitions
	require.NoError(a.t, json.Unmarshal(res.Body, &p))
	return p
}

// A cluster no replica has made yet reads as one partition, the coordinator's, with the
// built-in jobs and nobody holding it.
func TestPartitionsOfAClusterNotMadeYet(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	p := a.partitions()
	assert.Equal(t, 1, p.Count)
	require.Len(t, p.Partitions, 1)
	assert.Equal(t, client.Partition{Partition: 0, Jobs: int64(len(testJobs(t))), Coordinator: true}, p.Partitions[0])
	assert.Empty(t, p.Replicas)
	assert.NotNil(t, p.Replicas, "an empty list, not null")

	// The route is for callers with a token, as every /v1 route.
	res := a.do("GET", "/v1/partitions", "", header{"Authorization": ""})
	assert.Equal(t, http.StatusUnauthorized, res.Status)
}

// Each partition's holder is the replica that renews it now: a replica that stopped renewing
// (dead, or paused past the lease) still has its name in the row, and holds nothing. Each
// replica's count includes partition 0 when it is the coordinator.
func TestPartitionsSayWhoLeadsWhat(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	ctx := t.Context()
	a.exec(`INSERT INTO scheduler_cluster (partitions) VALUES (4)`)
	a.exec(`UPDATE scheduler_leader SET epoch = 2, instance_id = $1, term_id = gen_random_uuid(), since = now(), renewed_at = now()`, testInstance)
	a.exec(`INSERT INTO scheduler_partitions (partition_id, epoch, term_id, holder, since, renewed_at, handovers)
		VALUES (1, 3, gen_random_uuid(), 'r2', now(), now(), 1),
		       (2, 9, gen_random_uuid(), 'r3', now() - interval '1 hour', now() - interval '1 minute', 5),
		       (3, 1, gen_random_uuid(), $1, now(), now(), 1)`, testInstance)
	a.exec(`INSERT INTO scheduler_instances (instance_id, host, version, http_addr, started_at, last_seen_at, is_leader)
		VALUES ($1, 'h1', 'v1', '', now() - interval '2 minutes', now(), true), ('r3', 'h3', 'v1', '', now() - interval '1 minute', now(), false)`, testInstance)
	for name, partition := range map[string]int{"a": 1, "b": 1, "c": 2} {
		storetest.Definition(ctx, t, a.db.Pool, storetest.DefinitionOpts{Name: name})
		a.exec(`UPDATE job_definitions SET partition_id = $1 WHERE name = $2`, partition, name)
	}
	holder, err := a.db.OpenLockSession(ctx)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, holder.Lock(ctx))

	p := a.partitions()
	assert.Equal(t, 4, p.Count)
	require.Len(t, p.Partitions, 4)
	type seen struct {
		holder, last string
		epoch        int64
		jobs         int64
		handovers    int64
		coordinator  bool
	}
	var got []seen
	for _, q := range p.Partitions {
		s := seen{epoch: q.Epoch, jobs: q.Jobs, handovers: q.Handovers, coordinator: q.Coordinator}
		if q.Holder != nil {
			s.holder = *q.Holder
		}
		if q.LastHolder != nil {
			s.last = *q.LastHolder
		}
		require.NotNil(t, q.TermID)
		require.NotNil(t, q.Since)
		require.NotNil(t, q.RenewedAt)
		got = append(got, s)
	}
	assert.Equal(t, []seen{
		{holder: testInstance, last: testInstance, epoch: 2, jobs: int64(len(testJobs(t))), coordinator: true},
		{holder: "r2", last: "r2", epoch: 3, jobs: 2, handovers: 1},
		{last: "r3", epoch: 9, jobs: 1, handovers: 5},
		{holder: testInstance, last: testInstance, epoch: 1, handovers: 1},
	}, got)
	// The registered replicas in the order they started, then r2, which holds a partition
	// though its registration is gone.
	assert.Equal(t, []client.PartitionReplica{
		{InstanceID: testInstance, Partitions: 2, Coordinator: true, IsSelf: true},
		{InstanceID: "r3", Partitions: 0},
		{InstanceID: "r2", Partitions: 1},
	}, p.Replicas)
}
