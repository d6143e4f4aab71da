package testsignal

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// fakeT records a failure instead of ending the test, so Await's failures can be checked.
type fakeT struct{ failed string }

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(f) // Fatalf does not return
}

func await(s *Signal[int], timeout time.Duration) (v int, failure string) {
	ft := &fakeT{}
	defer func() {
		if r := recover(); r != nil {
			failure = ft.failed
		}
	}()
	return s.Await(ft, timeout, "the event"), ""
}

func TestAwaitReturnsEventsInOrder(t *testing.T) {
	var s Signal[int]
	s.Init()
	s.Send(1)
	s.Send(2)
	v, failure := await(&s, time.Second)
	assert.Equal(t, 1, v)
	assert.Empty(t, failure)
	v, _ = await(&s, time.Second)
	assert.Equal(t, 2, v)
	_, failure = await(&s, 10*time.Millisecond)
	assert.Contains(t, failure, "timed out")
}

// An event sent while the signal is full is lost: the test waiting for it is told so at
// once, instead of timing out (or passing on an older event) without knowing why.
func TestAwaitFailsOnceAnEventWasDropped(t *testing.T) {
	var s Signal[int]
	s.Init()
	for i := range capacity + 1 {
		s.Send(i)
	}
	_, failure := await(&s, time.Minute)
	assert.Contains(t, failure, "1 events were dropped")
}

func TestSendWithoutInitDoesNothing(t *testing.T) {
	var s Signal[int]
	s.Send(1)
	assert.Nil(t, s.C())
}
