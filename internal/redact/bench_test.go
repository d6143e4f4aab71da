package redact_test

import (
	"strings"
	"testing"

	"github.com/schedulerhq/scheduler/internal/redact"
)

// What redacting an attempt's 4 KiB body costs, for two secrets of ordinary length and for a
// hostile 8 KiB one (the longest a secret may be): a plain JSON body is read once, one full
// of every escape is read in up to 21 ways.
func BenchmarkRedactor(b *testing.B) {
	bodies := map[string]string{
		"plain":   strings.Repeat(`{"id":12345,"status":"ok","n":"abc"}`, 4096/36),
		"escapes": strings.Repeat(`{"a":"\u003c\"x\\y%2F%41&amp;+QmVhcmVy"}`, 4096/40),
	}
	secrets := map[string][]string{
		"two tokens":       {"tok_0123456789abcdefghijklmnop", "https://hooks.slack.com/services/T0/B0/xyzxyzxyz"},
		"8 KiB of escapes": {strings.Repeat(`"\%&+/`, 8192/6)},
	}
	for bn, body := range bodies {
		for sn, values := range secrets {
			b.Run(bn+"/"+sn, func(b *testing.B) {
				for b.Loop() {
					redact.New(values...).Text(body)
				}
			})
		}
	}
}
