package config

import (
	"fmt"
	"strings"

	"github.com/schedulerhq/scheduler/internal/secrets/seal"
)

// The keys that seal the secrets stored through the API (internal/secrets/seal). Neither is a
// secret's value: SCHEDULER_SECRET_<NAME> skips them.
const (
	secretKeyVar         = "SCHEDULER_SECRET_KEY"
	secretKeyPreviousVar = "SCHEDULER_SECRET_KEY_PREVIOUS"
	secretKeyWant        = "32 random bytes in standard base64, as `openssl rand -base64 32` prints them"
)

// LoadSecretBox reads SCHEDULER_SECRET_KEY (seals and opens) and
// SCHEDULER_SECRET_KEY_PREVIOUS (comma-separated older keys that only open, during a
// rotation). Without a key the box seals nothing, and the API refuses to store a secret with
// a message saying how to make one. A problem is recorded on env; a key is never printed.
func LoadSecretBox(env *Env) *seal.Box {
	var current *seal.Key
	if v, ok := env.lookup(secretKeyVar); ok {
		k, err := seal.ParseKey(v)
		if err != nil {
			env.Fail(secretKeyVar, hidden, fmt.Sprintf("%s (it is %s)", secretKeyWant, err))
		}
		current = k
	}
	var previous []*seal.Key
	if v, ok := env.lookup(secretKeyPreviousVar); ok {
		for i, entry := range strings.Split(v, ",") {
			if entry = strings.TrimSpace(entry); entry == "" {
				continue
			}
			k, err := seal.ParseKey(entry)
			if err != nil {
				env.Fail(secretKeyPreviousVar, hidden, fmt.Sprintf("comma-separated keys, each %s (entry %d is %s)", secretKeyWant, i+1, err))
				continue
			}
			previous = append(previous, k)
		}
		if _, ok := env.lookup(secretKeyVar); !ok {
			// Older keys alone would open what they sealed and seal nothing new: a rotation
			// half done. Say which half is missing rather than run like that.
			env.Fail(secretKeyVar, "", secretKeyWant+", because SCHEDULER_SECRET_KEY_PREVIOUS is set (it holds the keys a rotation replaced, beside the current one)")
		}
	}
	return seal.New(current, previous...)
}

// hidden stands for a value that must not be printed: the problem names the variable only.
const hidden = "(hidden)"
