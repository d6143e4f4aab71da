package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// apply creates a file's parents before their children (the server refuses a child whose
// parent does not exist yet), whatever order the file has, and prunes children before
// their parents (the server refuses to delete a parent a job still names).
func TestApplyOrdersChains(t *testing.T) {
	defs := []runtimejob.Definition{
		{Name: "load", After: []string{"transform"}},
		{Name: "report"},
		{Name: "transform", After: []string{"extract", "elsewhere"}},
		{Name: "extract"},
		{Name: "a", After: []string{"b"}}, {Name: "b", After: []string{"a"}}, // a cycle: the server names it
	}
	var names []string
	for _, d := range parentsFirst(defs) {
		names = append(names, d.Name)
	}
	assert.Equal(t, []string{"extract", "transform", "load", "report", "b", "a"}, names)

	jobs := []client.Job{{Name: "extract"}, {Name: "transform", After: []string{"extract"}}, {Name: "other"}, {Name: "load", After: []string{"transform"}}}
	names = nil
	for _, j := range childrenFirst(jobs) {
		names = append(names, j.Name)
	}
	assert.Equal(t, []string{"load", "transform", "extract", "other"}, names)
}
