package jobcontract

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a panic in job code, recovered on the goroutine it happened on and turned
// into an error, so that one bad job fails its run instead of taking the replica down: an
// unrecovered panic on any goroutine ends the process. Every goroutine that runs job code
// recovers through CatchPanic: the engine's around the job body, a walk's appliers and
// read-ahead (Filter, Lock, Apply, Keyset, Scan), the outbox's sends (Sender.Send) and its
// recorder (Hooks). The engine finds it with errors.As through any wrapping, records the run
// failed with the start of Stack, and logs the whole stack with the run's id.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack, from debug.Stack
}

func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// CatchPanic runs f and returns its error or, if f panics, the panic as a *PanicError.
func CatchPanic(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}
