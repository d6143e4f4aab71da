package main

import "strings"

// nearestName is the name of known nearest to s, for "did you mean": within a third of
// the longer name's letters (at least 1, at most 3 edits), ignoring case, '_' and '-'; "" when
// none is that near. A known name that s merely lacks separators of ("timezone" for
// "time_zone") is nearest of all.
func nearestName(s string, known []string) string {
	norm := func(x string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(x))
	}
	best, bestD := "", 4
	for _, k := range known {
		d := editDistance(strings.ToLower(s), strings.ToLower(k))
		if norm(s) == norm(k) {
			d = 0
		}
		limit := max(1, min(3, max(len(s), len(k))/3))
		if d <= limit && d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and transpositions of two neighbours each count one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
