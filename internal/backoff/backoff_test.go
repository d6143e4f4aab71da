package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/backoff"
)

func TestDelaysDoubleWithJitterUpToMax(t *testing.T) {
	b := backoff.New(100*time.Millisecond, time.Second)
	for i, step := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		step *= time.Millisecond
		d := b.Next()
		assert.GreaterOrEqual(t, d, step/2, "attempt %d", i)
		assert.LessOrEqual(t, d, step, "attempt %d", i)
	}
	for range 100 {
		assert.LessOrEqual(t, b.Next(), time.Second, "capped however long it fails")
	}
	b.Reset()
	assert.LessOrEqual(t, b.Next(), 100*time.Millisecond, "a success starts over")
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	assert.False(t, backoff.Sleep(ctx, time.Hour))
	assert.Less(t, time.Since(start), time.Second)
	assert.True(t, backoff.Sleep(context.Background(), time.Millisecond))
}
