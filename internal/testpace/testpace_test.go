package testpace

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPaceFollowsTestPace(t *testing.T) {
	t.Setenv("TEST_PACE", "")
	idle := Pace()
	require.GreaterOrEqual(t, idle, 1.0)
	t.Setenv("TEST_PACE", "3")
	assert.GreaterOrEqual(t, Pace(), min(3*idle, MaxPace)*0.5, "TEST_PACE multiplies the measured pace")
	t.Setenv("TEST_PACE", "1000")
	assert.Equal(t, MaxPace, Pace(), "capped")
	assert.Equal(t, time.Duration(MaxPace)*time.Second, Scaled(time.Second))
}

func TestContextEndsWhenItsDeadlinePasses(t *testing.T) {
	t.Setenv("TEST_PACE", "")
	ctx, cancel := Context(t.Context(), 50*time.Millisecond)
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(Scaled(50*time.Millisecond) + 5*time.Second):
		t.Fatal("the paced context did not end")
	}
	assert.True(t, errors.Is(context.Cause(ctx), ErrPassed), "cause: %v", context.Cause(ctx))

	ctx, cancel = Context(t.Context(), time.Hour)
	cancel()
	assert.True(t, errors.Is(context.Cause(ctx), context.Canceled))
}
