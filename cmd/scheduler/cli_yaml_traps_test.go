package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/namespace"
)

// YAML 1.1 reads `on`, `yes`, `off` as booleans; a job file's keys are YAML 1.2 strings, so a
// notify rule's `on:` is the key on, not true.
func TestJobFileKeysAreYAML12Strings(t *testing.T) {
	t.Parallel()
	file := `
jobs:
- name: nightly
  schedule: "0 2 * * *"
  http: {url: "https://example.com/hook"}
  notify:
  - on: [failed, timed_out]
    webhook: {url: "https://example.com/alerts"}
`
	defs, problems := parseJobs([]byte(file), namespace.Default)
	require.Empty(t, problems)
	require.Len(t, defs, 1)
	require.Len(t, defs[0].Notify, 1)
	assert.Equal(t, []string{"failed", "timed_out"}, defs[0].Notify[0].On)
}

// A YAML 1.1 boolean word as a value is a string in YAML 1.2: the error says what to write.
func TestYAML11BooleanWordsSayWhatToWrite(t *testing.T) {
	t.Parallel()
	_, problems := parseJobs([]byte("jobs:\n- name: a\n  schedule: \"0 2 * * *\"\n  enabled: yes\n  http: {url: \"https://example.com/x\"}\n"), namespace.Default)
	assert.Equal(t, []string{`jobs[0] (a): enabled: want true or false, not a string ("yes" is a string in YAML 1.2: write true)`}, problems)
}

// An unknown key, at any depth, offers the known key nearest to it.
func TestUnknownKeysOfferTheNearestKnownName(t *testing.T) {
	t.Parallel()
	file := `
jobs:
- name: nightly
  schedule: "0 2 * * *"
  timezone: Europe/Paris
  retry: {max_attempt: 3}
  http: {url: "https://example.com/hook", methd: POST}
  notify:
  - on: [failed]
    webhok: {url: "https://example.com/alerts"}
`
	_, problems := parseJobs([]byte(file), namespace.Default)
	got := strings.Join(problems, "\n")
	assert.Contains(t, got, `unknown key "timezone": did you mean "time_zone"?`)
	assert.Contains(t, got, `unknown key "retry.max_attempt": did you mean "max_attempts"?`)
	assert.Contains(t, got, `unknown key "http.methd": did you mean "method"?`)
	assert.Contains(t, got, `unknown key "notify[0].webhok": did you mean "webhook"?`)
}

func TestNearestName(t *testing.T) {
	t.Parallel()
	known := []string{"time_zone", "timeout", "schedule", "name"}
	for in, want := range map[string]string{
		"timezone": "time_zone", "TimeZone": "time_zone", "timout": "timeout", "shcedule": "schedule",
		"nmae": "name", "zzzzzzzz": "",
	} {
		assert.Equal(t, want, nearestName(in, known), in)
	}
	assert.Equal(t, 1, editDistance("ab", "ba"))
	assert.Equal(t, 3, editDistance("", "abc"))
}
