// Package secrets resolves the secrets runtime jobs name, by the job's namespace. It is the
// one place that decides where a name leads:
//
//   - an operator's secret from the environment (SCHEDULER_SECRET_<NAME>, which may go to
//     any host) that an admin granted the namespace (its env_secrets) first, else one stored
//     through the API in the namespace; namespace default, while its grants were never set,
//     has every operator secret (docs/operations.md);
//   - never an operator's secret whose value is a SQL target's password: the replica leaves
//     those out of the operator's secrets it hands New (outbound.Policy.OperatorSecrets).
//
// A stored secret goes only to the hosts its allowed_hosts list. So a team that may define
// jobs in its namespace can send its own secrets to its own hosts, and nothing else: not the
// operator's secrets, not another team's, not its own to a host it did not list.
//
// Values are read from the database (and opened with internal/secrets/seal) at every call, so
// a secret stored, replaced or re-sealed is the one the next call sends, on every replica,
// without a restart.
package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Store is what a Source reads: the store's secret queries, and the namespace's grants.
type Store interface {
	Namespace(ctx context.Context, name string) (store.Namespace, error)
	SealedSecrets(ctx context.Context, ns string, names []string) ([]store.SealedSecret, error)
	Secrets(ctx context.Context, ns string) ([]store.Secret, error)
}

// Source resolves secrets. It is safe for concurrent use.
type Source struct {
	operator map[string]string
	box      *seal.Box
	db       Store
}

var _ runtimejob.SecretSource = (*Source)(nil)

// New makes a Source of the operator's secrets (config's SCHEDULER_SECRET_<NAME>, by NAME),
// the box that opens stored values, and the database they are stored in.
func New(operator map[string]string, box *seal.Box, db Store) *Source {
	if box == nil {
		box = seal.New(nil)
	}
	return &Source{operator: operator, box: box, db: db}
}

// Box seals the values the API stores, and says whether it can.
func (s *Source) Box() *seal.Box { return s.box }

// IsOperator reports whether namespace ns has the operator's secret name while its grants
// were never set (namespace default), which jobs use before a stored secret of that name.
func (s *Source) IsOperator(ns, name string) bool {
	return ns == namespace.Default && s.operator[name] != ""
}

// granted returns the operator's secrets namespace ns may name, by name: those an admin
// granted it. It reads the namespace only when one of names is an operator's secret.
func (s *Source) granted(ctx context.Context, ns string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range names {
		if s.operator[name] != "" {
			out[name] = s.operator[name]
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	n, err := s.db.Namespace(ctx, ns)
	if errors.Is(err, store.ErrNamespaceNotFound) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the secrets granted to namespace %s: %w", ns, err)
	}
	for name := range out {
		if !n.GrantsEnvSecret(name) {
			delete(out, name)
		}
	}
	return out, nil
}

// Resolve returns the values of the named secrets for a call of a job of namespace ns, with
// the hosts each may go to; a secret the namespace lacks, or a stored one this replica cannot
// open, is an error that says what to do.
func (s *Source) Resolve(ctx context.Context, ns string, names []string) (map[string]runtimejob.SecretValue, error) {
	out := make(map[string]runtimejob.SecretValue, len(names))
	operator, err := s.granted(ctx, ns, names)
	if err != nil {
		return nil, err
	}
	var stored []string
	for _, name := range names {
		if v, ok := operator[name]; ok {
			out[name] = runtimejob.SecretValue{Value: v}
		} else {
			stored = append(stored, name)
		}
	}
	if len(stored) == 0 {
		return out, nil
	}
	rows, err := s.db.SealedSecrets(ctx, ns, stored)
	if err != nil {
		return nil, err
	}
	for _, row := range rows {
		value, err := s.box.Open(row.Namespace, row.Name, row.KeyID, row.Sealed)
		if err != nil {
			return nil, err
		}
		out[row.Name] = runtimejob.SecretValue{Value: string(value), AllowedHosts: hostsOf(row.Secret)}
	}
	for _, name := range stored {
		if _, ok := out[name]; !ok {
			return nil, errors.New(runtimejob.SecretMissing(ns, name))
		}
	}
	return out, nil
}

// Lookup returns what a definition check asks of namespace ns's secrets
// (definition.Env.Secret): whether a name exists there and where it may go. It reads the
// namespace's list once, without a value; a question about another namespace finds nothing.
func (s *Source) Lookup(ctx context.Context, ns string) (func(ns, name string) ([]string, bool), error) {
	list, err := s.db.Secrets(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("read the secrets of namespace %s: %w", ns, err)
	}
	hosts := make(map[string][]string, len(list))
	for _, sec := range list {
		hosts[sec.Name] = hostsOf(sec)
	}
	names := make([]string, 0, len(s.operator))
	for name := range s.operator {
		names = append(names, name)
	}
	operator, err := s.granted(ctx, ns, names)
	if err != nil {
		return nil, err
	}
	return func(asked, name string) ([]string, bool) {
		if asked != ns {
			return nil, false
		}
		if _, ok := operator[name]; ok {
			return nil, true
		}
		h, ok := hosts[name]
		return h, ok
	}, nil
}

// hostsOf is a stored secret's allowed hosts, never nil: nil means any host, which only an
// operator's secret may go to. A row without hosts goes nowhere.
func hostsOf(s store.Secret) []string {
	if s.AllowedHosts == nil {
		return []string{}
	}
	return s.AllowedHosts
}
