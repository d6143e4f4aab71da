package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// BenchmarkCreateDefinition measures one create among 10 000 runtime jobs, as `scheduler
// apply` of a big file or the scale bench makes them one after the other: its checks of
// SCHEDULER_MAX_JOBS and of the namespace's quota must not grow with every job defined.
func BenchmarkCreateDefinition(b *testing.B) {
	const existing = 10_000
	db, _ := testdb.Open(b, store.Options{})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO job_definitions (name, kind, definition)
		SELECT format('job-%s', i), 'http', jsonb_build_object('name', format('job-%s', i))
		FROM generate_series(1, $1) AS i`, existing)
	require.NoError(b, err)
	_, err = db.Pool.Exec(ctx, `ANALYZE job_definitions`)
	require.NoError(b, err)
	def := json.RawMessage(`{"name": "x"}`)
	b.ResetTimer()
	for i := range b.N {
		_, err := db.CreateDefinition(ctx, fmt.Sprintf("new-%d", i), "http", def, 1_000_000)
		require.NoError(b, err)
	}
}
