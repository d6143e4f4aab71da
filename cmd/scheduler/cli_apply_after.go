package main

import (
	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// parentsFirst orders one namespace's jobs of a file so that a job comes after the parents
// (after) the file also defines: the server refuses a job whose parent does not exist yet.
// The order is the file's otherwise; a cycle is placed as far as it goes, and the server
// refuses it, naming it.
func parentsFirst(defs []runtimejob.Definition) []runtimejob.Definition {
	index := make(map[string]int, len(defs))
	for i, d := range defs {
		index[d.Name] = i
	}
	return placeAfter(defs, func(i int) (parents []int) {
		for _, p := range defs[i].After {
			if j, ok := index[p]; ok {
				parents = append(parents, j)
			}
		}
		return parents
	})
}

// childrenFirst orders the jobs apply prunes so that a job goes before its parents among
// them: the server refuses to delete a job that another job still names in after.
func childrenFirst(jobs []client.Job) []client.Job {
	index := make(map[string]int, len(jobs))
	for i, j := range jobs {
		index[j.Name] = i
	}
	children := make(map[int][]int, len(jobs))
	for i, j := range jobs {
		for _, p := range j.After {
			if k, ok := index[p]; ok {
				children[k] = append(children[k], i)
			}
		}
	}
	return placeAfter(jobs, func(i int) []int { return children[i] })
}

// placeAfter orders items so that each comes after the items first(i) names (by index), and
// in the items' order otherwise: a depth-first walk, the one both orders above need. An item
// met again while it is being placed closes a cycle: it is left where the walk has it, for
// the server to refuse with its own words.
func placeAfter[T any](items []T, first func(i int) []int) []T {
	out := make([]T, 0, len(items))
	state := make([]int, len(items)) // 0 not placed, 1 placing, 2 placed
	var place func(i int)
	place = func(i int) {
		if state[i] != 0 {
			return // placed, or a cycle
		}
		state[i] = 1
		for _, j := range first(i) {
			place(j)
		}
		state[i] = 2
		out = append(out, items[i])
	}
	for i := range items {
		place(i)
	}
	return out
}
