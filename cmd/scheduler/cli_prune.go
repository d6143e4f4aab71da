package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// What apply --prune may delete. apply marks every job it writes with the owner label, whose
// value names the file (its base name, "billing.yaml") or --owner; --prune then deletes only
// the jobs of the file's namespaces that the file no longer defines, that carry the same
// owner, and that match -l (--selector) if given. --prune-any-owner drops the owner
// condition (the jobs made by hand or by another file become candidates too), as --prune did
// before owners existed.

// ownerLabel marks the file (or --owner) that applied a job.
const ownerLabel = "scheduler.dev/applied-by"

// defaultOwner is the owner of a file's jobs without --owner: the file's name without its
// directories, so that the same file applied from a laptop and from CI owns the same jobs.
func defaultOwner(path string) string {
	if path == "-" {
		return "stdin"
	}
	return filepath.Base(path)
}

// withOwner labels each definition with its owner, unless the file sets the label itself.
func withOwner(defs []runtimejob.Definition, owner string) {
	for i := range defs {
		if _, set := defs[i].Labels[ownerLabel]; set {
			continue
		}
		labels := maps.Clone(defs[i].Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ownerLabel] = owner
		defs[i].Labels = labels
	}
}

// requirement is one term of a label selector: key=value, key!=value, key, or !key.
type requirement struct {
	key, value string
	op         string // "=", "!=", "exists", "!exists"
}

// selector is a label selector: every requirement must hold ("team=billing,tier!=batch").
type selector []requirement

// parseSelector reads kubectl's equality-based label selector: comma-separated key=value
// (or key==value), key!=value, key (the label is set), !key (it is not).
func parseSelector(s string) (selector, error) {
	var sel selector
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for term := range strings.SplitSeq(s, ",") {
		term = strings.TrimSpace(term)
		var r requirement
		switch {
		case strings.Contains(term, "!="):
			r.key, r.value, _ = strings.Cut(term, "!=")
			r.op = "!="
		case strings.Contains(term, "=="):
			r.key, r.value, _ = strings.Cut(term, "==")
			r.op = "="
		case strings.Contains(term, "="):
			r.key, r.value, _ = strings.Cut(term, "=")
			r.op = "="
		case strings.HasPrefix(term, "!"):
			r.key, r.op = term[1:], "!exists"
		default:
			r.key, r.op = term, "exists"
		}
		r.key, r.value = strings.TrimSpace(r.key), strings.TrimSpace(r.value)
		if r.key == "" || strings.ContainsAny(r.key, " ()!=") || strings.ContainsAny(r.value, " ()!=,") {
			return nil, fmt.Errorf("%q is not a label selector term: want key=value, key!=value, key or !key, comma-separated (e.g. team=billing,tier!=batch)", term)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// matches reports whether labels satisfy every requirement.
func (s selector) matches(labels map[string]string) bool {
	for _, r := range s {
		v, set := labels[r.key]
		switch r.op {
		case "=":
			if !set || v != r.value {
				return false
			}
		case "!=":
			if set && v == r.value {
				return false
			}
		case "exists":
			if !set {
				return false
			}
		case "!exists":
			if set {
				return false
			}
		}
	}
	return true
}

// pruneScope decides which jobs not in the file --prune deletes.
type pruneScope struct {
	owner    string // "" with --prune-any-owner
	selector selector
}

// candidate reports whether --prune may delete a runtime job with these labels.
func (p pruneScope) candidate(labels map[string]string) bool {
	if p.owner != "" && labels[ownerLabel] != p.owner {
		return false
	}
	return p.selector.matches(labels)
}
