// Package namespace names the namespaces that own runtime jobs and secrets, and the key a
// runtime job goes by everywhere below the API: its name in namespace default (so the jobs
// defined before namespaces keep their history), "<namespace>/<name>" elsewhere. A name
// holds no '/', so a key says which namespace it belongs to.
package namespace

import (
	"regexp"
	"strings"
)

// Default is the namespace of a job that names none, and of the built-in jobs.
const Default = "default"

// labelRE is a DNS label (RFC 1123), the form of a namespace's and a runtime job's name.
var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Valid reports whether ns can name a namespace.
func Valid(ns string) bool { return labelRE.MatchString(ns) }

// Key is the key of the job name in namespace ns ("" is Default).
func Key(ns, name string) string {
	if ns == "" || ns == Default {
		return name
	}
	return ns + "/" + name
}

// Split returns the namespace and the name of a job's key.
func Split(key string) (ns, name string) {
	if ns, name, ok := strings.Cut(key, "/"); ok {
		return ns, name
	}
	return Default, key
}

// Of returns the namespace of a job's key.
func Of(key string) string {
	ns, _ := Split(key)
	return ns
}

// ValidKey reports whether key can be a runtime job's key.
func ValidKey(key string) bool {
	ns, name := Split(key)
	return Valid(name) && Valid(ns) && (ns != Default || !strings.Contains(key, "/"))
}
