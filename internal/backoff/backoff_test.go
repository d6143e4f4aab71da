package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// Retry retries op after each failure with growing delays, told to onRetry first, until op
// succeeds; ErrAgain retries at once without a delay or a count; Stop and onRetry's error
// end it with their error; a context that ends ends it.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	var delays []time.Duration
	calls := 0
	err := backoff.Retry(ctx, time.Millisecond, 4*time.Millisecond, func() error {
		calls++
		switch calls {
		case 1, 2, 4:
			return errors.New("down")
		case 3:
			return backoff.ErrAgain
		}
		return nil
	}, func(err error, d time.Duration) error {
		assert.EqualError(t, err, "down")
		delays = append(delays, d)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 5, calls)
	require.Len(t, delays, 3, "ErrAgain costs no delay")
	for i, step := range []time.Duration{1, 2, 4} {
		assert.GreaterOrEqual(t, delays[i], step*time.Millisecond/2)
		assert.LessOrEqual(t, delays[i], step*time.Millisecond)
	}

	gone := errors.New("the term ended")
	calls = 0
	err = backoff.Retry(ctx, time.Millisecond, time.Millisecond, func() error {
		calls++
		return backoff.Stop(gone)
	}, func(error, time.Duration) error { t.Fatal("Stop must not be retried"); return nil })
	assert.Same(t, gone, err)
	assert.Equal(t, 1, calls)

	late := errors.New("past its period")
	err = backoff.Retry(ctx, time.Millisecond, time.Millisecond, func() error { return errors.New("down") },
		func(error, time.Duration) error { return late })
	assert.Same(t, late, err)

	ended, cancel := context.WithCancel(ctx)
	err = backoff.Retry(ended, time.Hour, time.Hour, func() error { return errors.New("down") },
		func(error, time.Duration) error { cancel(); return nil })
	assert.ErrorIs(t, err, context.Canceled, "the delay ends with the context")
}
