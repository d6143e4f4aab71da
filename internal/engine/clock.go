package engine

import (
	"sync/atomic"
	"time"
)

// clock is the time the leader's services decide by, one for all of them (River's
// baseservice.Archetype.Time). In production it is never set: the statements that decide by
// time get a nil now and use the database's clock (store.DB.NowOr), so there is one clock.
// A test sets it, and Go's and SQL's time move together.
type clock struct{ stub atomic.Pointer[time.Time] }

// nowOrNil is the now the store's statements take: nil but in tests.
func (c *clock) nowOrNil() *time.Time { return c.stub.Load() }

// now is the time the services' Go code decides by: the stub in tests, else time.Now.
func (c *clock) now() time.Time {
	if p := c.stub.Load(); p != nil {
		return *p
	}
	return time.Now()
}
