package main

import "context"

func benchHandover(ctx context.Context, b *bench) error {
	b.report.note("hand-over, schedule delay and idle replica RSS: not measured yet (they need the run engine in `scheduler serve`)")
	return nil
}
