package allowedhosts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/secrets/allowedhosts"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"api.example.com":       "api.example.com",
		"API.Example.com.":      "api.example.com",
		"api.example.com:8443":  "api.example.com:8443",
		"10.0.0.5":              "10.0.0.5",
		"10.0.0.5:80":           "10.0.0.5:80",
		"2001:DB8::1":           "2001:db8::1",
		"[2001:db8::1]:443":     "[2001:db8::1]:443",
		"receiver_1.internal":   "receiver_1.internal",
		"::ffff:192.0.2.1":      "192.0.2.1",
		"localhost:8099":        "localhost:8099",
		"[::ffff:192.0.2.1]:80": "192.0.2.1:80",
	} {
		got, err := allowedhosts.Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, why := range map[string]string{
		"":                          "empty",
		"https://api.example.com":   "scheme",
		"api.example.com/path":      "path",
		"*.example.com":             "wildcard",
		"user@api.example.com":      "user@",
		"api.example.com:0":         "port",
		"api.example.com:99999":     "port",
		"api.example.com:08443":     "port",
		"api.example.com:https":     "port",
		"api example.com":           "space",
		"bücher.example":            "xn--",
		"-bad-.example.com":         "neither",
		"api..example.com":          "neither",
		"api.example.com:8443:8443": "neither",
	} {
		_, err := allowedhosts.Parse(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), why, in)
	}
}

func TestMatch(t *testing.T) {
	allowed := []string{"api.example.com", "hooks.example.com:8443", "10.0.0.5", "[2001:db8::1]:443"}
	for _, c := range []struct {
		host, port string
		want       bool
	}{
		{"api.example.com", "443", true},
		{"API.example.com.", "80", true},
		{"hooks.example.com", "8443", true},
		{"hooks.example.com", "443", false},
		{"evil.example.com", "443", false},
		{"api.example.com.evil.net", "443", false},
		{"10.0.0.5", "9999", true},
		{"2001:db8::1", "443", true},
		{"[2001:db8::1]", "443", true},
		{"2001:db8::1", "80", false},
	} {
		assert.Equal(t, c.want, allowedhosts.Match(allowed, c.host, c.port), "%s:%s", c.host, c.port)
	}
	assert.False(t, allowedhosts.Match(nil, "api.example.com", "443"))
}

func TestFromURL(t *testing.T) {
	for raw, want := range map[string][2]string{
		"https://API.example.com/x":    {"API.example.com", "443"},
		"http://api.example.com/x":     {"api.example.com", "80"},
		"https://api.example.com:8443": {"api.example.com", "8443"},
		"http://[2001:db8::1]:8080/":   {"2001:db8::1", "8080"},
	} {
		h, p, err := allowedhosts.FromURL(raw)
		require.NoError(t, err)
		assert.Equal(t, want, [2]string{h, p}, raw)
	}
}
