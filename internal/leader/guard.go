package leader

import "github.com/schedulerhq/scheduler/internal/store"

// backendAttrs are a terminated backend's log attributes, then args.
func backendAttrs(b store.Backend, args ...any) []any {
	return append([]any{"pid", b.PID, "user", b.User, "application_name", b.ApplicationName,
		"client_addr", b.ClientAddr}, args...)
}
