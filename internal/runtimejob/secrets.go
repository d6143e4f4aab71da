package runtimejob

import (
	"context"
	"fmt"

	"github.com/schedulerhq/scheduler/internal/namespace"
)

// A definition names its secrets; their values live elsewhere, by namespace: an operator's
// secret from the environment (SCHEDULER_SECRET_<NAME>, to any host) that an admin granted
// the namespace first, else one stored through the API in the namespace, bound to the hosts
// its allowed_hosts list. internal/secrets resolves
// them; the check and the runner ask it through Env.Secret and Runtime.Secrets.

// SecretValue is a secret resolved for one call.
type SecretValue struct {
	Value string
	// AllowedHosts are the hosts ("host" or "host:port") the value may be sent to; nil for
	// an operator's secret, which may go to any host.
	AllowedHosts []string
}

// SecretSource resolves the secrets a job of namespace ns names, when it runs: the values
// current at that moment, so a secret stored or replaced since the job was loaded is the one
// sent. A secret the namespace lacks is an error that says how to set it (SecretMissing).
type SecretSource interface {
	Resolve(ctx context.Context, ns string, names []string) (map[string]SecretValue, error)
}

// SecretMissing says that namespace ns has no secret name, and how to set one: the same
// words when a definition is checked and when a run fails for it.
func SecretMissing(ns, name string) string {
	put := fmt.Sprintf("PUT /v1/namespaces/%s/secrets/%s", ns, name)
	if ns == namespace.Default {
		return fmt.Sprintf("secret %s is not set in namespace %s: store it with %s, or an operator sets %s on every replica and an admin grants it with PUT /v1/namespaces/%s {\"env_secrets\": [\"%s\"]}",
			name, ns, put, SecretEnv(name), ns, name)
	}
	return fmt.Sprintf("secret %s is not set in namespace %s: store it with %s (the replicas' SCHEDULER_SECRET_* variables are the operator's: an admin grants one with PUT /v1/namespaces/%s {\"env_secrets\": [\"%s\"]})",
		name, ns, put, ns, name)
}

// SecretHostRefused says that a secret may not be sent to the job's host.
func SecretHostRefused(ns, name, hostPort string, allowed string) string {
	return fmt.Sprintf("secret %s of namespace %s may be sent only to %s, and http.url's host is %s: call one of those, or add the host to the secret's allowed_hosts (PUT /v1/namespaces/%s/secrets/%s)",
		name, ns, allowed, hostPort, ns, name)
}
