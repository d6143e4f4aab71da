package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// A due slot whose row never lands (here a trigger drops the inserts of the slots on a
// multiple of 3 seconds) is found by the leader's slot audit: counted, never silently gone;
// a job whose slots all have rows is never counted.
func TestSlotAuditFindsASlotWithoutItsRow(t *testing.T) {
	db, url := newDB(t)
	_, err := db.Pool.Exec(context.Background(), `
		CREATE FUNCTION drop_some_slots() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.job = 'tick' AND extract(epoch FROM NEW.scheduled_at)::bigint % 3 = 0 THEN
				RETURN NULL;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER drop_some_slots BEFORE INSERT ON job_runs FOR EACH ROW EXECUTE FUNCTION drop_some_slots();`)
	require.NoError(t, err)
	m := metrics.New()
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{
		jobConfig(t, "tick", "@every 1s", time.Minute), jobConfig(t, "writer", "@every 1s", time.Minute)}, metrics: m,
		// A grace that a loaded machine's late claims stay within: the writer's rows must not
		// be judged missing before the leader had time to write them.
		slotAudit: time.Second, slotAuditGrace: 4 * time.Second})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	require.Eventually(t, func() bool {
		c := testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_slots_unrecorded_total", map[string]string{"job_name": "tick"})
		return c != nil && c.GetCounter().GetValue() >= 1
	}, waitTimeout, 50*time.Millisecond, "the audit counts the slots without a row")
	assert.Positive(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick'`), "the other slots have their rows")
	// A job whose every slot has its row is never counted: no false alarm.
	c := testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_slots_unrecorded_total", map[string]string{"job_name": "writer"})
	assert.Nil(t, c, "writer's slots all have rows")
}
