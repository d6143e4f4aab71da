package oidc

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, subject string
		want             bool
	}{
		{"system:serviceaccount:billing:*", "system:serviceaccount:billing:runner", true},
		{"system:serviceaccount:billing:*", "system:serviceaccount:billing:", true},
		{"system:serviceaccount:billing:*", "system:serviceaccount:billing-eu:runner", false},
		{"system:serviceaccount:billing:*", "system:serviceaccount:billing", false},
		{"system:serviceaccount:*:reporter", "system:serviceaccount:ops:reporter", true},
		{"system:serviceaccount:*:reporter", "system:serviceaccount:ops:reporter2", false},
		{"system:serviceaccount:*:reporter", "system:serviceaccount:a:b:reporter", true}, // * spans ':'
		{"*", "anything:at:all", true},
		{"*", "", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "acb", false},
		{"ab*ba", "aba", false}, // prefix and suffix must not overlap
		{"ab*ba", "abba", true},
		{"a**b", "ab", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"exact", "inexact", false},
		{"?", "x", false}, // only * is special
		{"[a]", "a", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, globMatch(tt.pattern, tt.subject), "%q ~ %q", tt.pattern, tt.subject)
	}
}
