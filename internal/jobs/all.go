package jobs

// Builtin returns the registry of the jobs a replica runs.
func Builtin() *Registry {
	return NewRegistry()
}
