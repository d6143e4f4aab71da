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
	out := make([]runtimejob.Definition, 0, len(defs))
	state := make([]int, len(defs)) // 0 not placed, 1 placing, 2 placed
	var place func(i int)
	place = func(i int) {
		if state[i] != 0 {
			return // placed, or a cycle: left where the file has it
		}
		state[i] = 1
		for _, p := range defs[i].After {
			if j, ok := index[p]; ok {
				place(j)
			}
		}
		state[i] = 2
		out = append(out, defs[i])
	}
	for i := range defs {
		place(i)
	}
	return out
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
	out := make([]client.Job, 0, len(jobs))
	state := make([]int, len(jobs))
	var place func(i int)
	place = func(i int) {
		if state[i] != 0 {
			return
		}
		state[i] = 1
		for _, c := range children[i] {
			place(c)
		}
		state[i] = 2
		out = append(out, jobs[i])
	}
	for i := range jobs {
		place(i)
	}
	return out
}
