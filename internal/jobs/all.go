package jobs

// Builtin returns the registry of the jobs a replica runs, in DESIGN.md's order.
func Builtin() *Registry {
	return NewRegistry(
		NewRoundsCreate(),
		NewRoundsOpen(),
		NewRoundsClose(),
	)
}
