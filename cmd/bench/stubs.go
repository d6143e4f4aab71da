package main

import "context"

func benchRounds(ctx context.Context, b *bench) error    { return nil }
func benchRetention(ctx context.Context, b *bench) error { return nil }
func benchAPI(ctx context.Context, b *bench) error       { return nil }
func benchHandover(ctx context.Context, b *bench) error  { return nil }
