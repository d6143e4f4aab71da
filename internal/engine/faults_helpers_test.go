package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// blackhole makes the proxy drop every byte both ways while keeping every connection open
// (toxiproxy's timeout toxic with timeout 0): the silent partition, where neither end sees a
// reset and each must notice the silence itself. heal removes it.
func blackhole(t *testing.T, p *toxiproxy.Proxy) (heal func()) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		_, err := p.Toxics.AddToxicJson(strings.NewReader(
			`{"name": "blackhole-` + stream + `", "type": "timeout", "stream": "` + stream + `", "attributes": {"timeout": 0}}`))
		require.NoError(t, err)
	}
	return func() {
		for _, stream := range []string{"upstream", "downstream"} {
			_ = p.Toxics.RemoveToxic(context.Background(), "blackhole-"+stream)
		}
	}
}

// Statements whose connection a faultTracer can reset, named by the step of a run they
// belong to. Each is a fragment of the statement's SQL.
const (
	// faultClaim is the first statement of a batch of slot claims (store.ClaimSlots).
	faultClaim = "AS c (job, trigger, slot, version, min_gap, max_runs, ahead)"
	// faultJobTx is the test jobs' write inside their fenced transaction.
	faultJobTx = "INSERT INTO test_calls"
	// faultAbandon is the rescuer's read of the runs an earlier term left running, which it
	// ends (store.Tx.AbandonRuns).
	faultAbandon = "lost track of it; a recovery run re-runs the job"
	// faultCatchUp is the catch-up's first statement (store.Tx.FirstSlots).
	faultCatchUp = "(SELECT min(scheduled_at) FROM job_runs r WHERE r.job = j.job"
	// faultFinish records a run's end.
	faultFinish = "SET status = f.status, finished_at = greatest("
)

// faultTracer injects transient statement errors through store.Options.Tracer: the next n
// statements containing a fragment fail because their connection is reset just before
// they are sent, as on a network fault or a server restart. The pool drops the connection
// and the caller sees the error a real fault gives.
type faultTracer struct {
	mu      sync.Mutex
	pending map[string]int
	hit     chan string // the fragment of each injected fault
}

func newFaultTracer() *faultTracer {
	return &faultTracer{pending: map[string]int{}, hit: make(chan string, 1000)}
}

// fail arms n faults on statements containing fragment.
func (f *faultTracer) fail(fragment string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[fragment] += n
}

func (f *faultTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	f.mu.Lock()
	var fragment string
	for frag, n := range f.pending {
		if n > 0 && strings.Contains(data.SQL, frag) {
			f.pending[frag] = n - 1
			fragment = frag
			break
		}
	}
	f.mu.Unlock()
	if fragment != "" {
		_ = conn.PgConn().Conn().Close()
		select {
		case f.hit <- fragment:
		default:
		}
	}
	return ctx
}

func (f *faultTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
