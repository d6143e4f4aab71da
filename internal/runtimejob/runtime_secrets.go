package runtimejob

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/secrets/allowedhosts"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// callSecrets resolves the secrets an HTTP job's call uses, at the moment it runs, and
// checks, before anything is sent, that the job's host is one every stored secret allows: the
// bearer or header secret, which the target receives, and the signing secret, whose HMACs
// the target could present elsewhere as the scheduler's. A definition stored before the
// secret was narrowed, or a row written by hand, is refused here with its reason. It returns
// the values by name and the hosts each stored secret allows, which the caller checks again
// on every connection.
func (j *httpRunner) callSecrets(ctx context.Context) (map[string]string, []targets.AllowedHosts, error) {
	def := j.def.Def
	names := def.CallSecrets() // a notification's secrets are its delivery's (internal/notify)
	if len(names) == 0 {
		return nil, nil, nil
	}
	ns := namespace.Of(def.Key())
	if j.rt.Secrets == nil {
		return nil, nil, errors.New(SecretMissing(ns, names[0]))
	}
	values, err := j.rt.Secrets.Resolve(ctx, ns, names)
	if err != nil {
		return nil, nil, err
	}
	host, port, err := allowedhosts.FromURL(def.HTTP.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("not attempted: the URL does not parse: %w", err)
	}
	plain := make(map[string]string, len(names))
	var allowed []targets.AllowedHosts
	for _, name := range names {
		v, ok := values[name]
		if !ok || v.Value == "" {
			return nil, nil, errors.New(SecretMissing(ns, name))
		}
		if _, seen := plain[name]; seen {
			continue
		}
		plain[name] = v.Value
		if v.AllowedHosts == nil {
			continue // an operator's secret: any host
		}
		if !allowedhosts.Match(v.AllowedHosts, host, port) {
			return nil, nil, fmt.Errorf("not attempted, nothing was sent: %s",
				SecretHostRefused(ns, name, net.JoinHostPort(host, port), allowedhosts.Describe(v.AllowedHosts)))
		}
		allowed = append(allowed, targets.AllowedHosts{Secret: name, Hosts: v.AllowedHosts})
	}
	return plain, allowed, nil
}
