package schedule

import (
	"math/big"
	"slices"
)

// CloserThan's arithmetic of @every specs: each names the multiples of its period since the
// epoch, so where their slots fall needs no walk.

// everyPairs: @every N alone is N apart; two of them, gcd(N, M) at the closest.
func (g *gapFinder) everyPairs() bool {
	for i, n := range g.every {
		first := ceilMultiple(g.start, n)
		if g.found(first, first+n) {
			return true
		}
		for _, m := range g.every[i+1:] {
			x, y, ok := closestMultiples(n, m, g.start)
			if !ok || abs(x-y) >= g.floor {
				continue // no two of their slots closer than the floor, anywhere
			}
			if g.found(x, y) || g.everyWalk(max(n, m), min(n, m)) {
				return true
			}
		}
	}
	return false
}

// everyWalk compares each slot of @every long in range with its nearest of @every short.
// It is for two specs whose gcd pair lies beyond the range, where closer pairs than the
// floor may still lie inside it: their period lcm exceeds the range, so long is at least
// the square root of the range (lcm <= long²) and the walk at most that many slots (5,900
// for 400 days).
func (g *gapFinder) everyWalk(long, short int64) bool {
	for x := ceilMultiple(g.start, long); x <= g.end; x += long {
		if r := x - floorDiv(x, short)*short; r != 0 && (g.found(x-r, x) || g.found(x, x-r+short)) {
			return true
		}
	}
	return false
}

// closestMultiples returns x, a multiple of n, and y, of m, gcd(n, m) apart, with y at or
// after start: x - y = gcd by Bézout, moved by lcm(n, m) (big: it overflows for long ones).
func closestMultiples(n, m, start int64) (x, y int64, ok bool) {
	bn, bm := big.NewInt(n), big.NewInt(m)
	u, v, gcd := new(big.Int), new(big.Int), new(big.Int)
	gcd.GCD(u, v, bn, bm) // u*n + v*m = gcd
	if gcd.Int64() == n || gcd.Int64() == m {
		return 0, 0, false // one's slots are all the other's: no pair closer than the larger
	}
	lcm := new(big.Int).Div(new(big.Int).Mul(bn, bm), gcd)
	bx := new(big.Int).Mul(u, bn)
	// Move x (and y with it) to the first place where y is at or after start.
	k := new(big.Int).Sub(big.NewInt(start), bx)
	k.Add(k, gcd)
	k.Add(k, lcm).Sub(k, big.NewInt(1)).Div(k, lcm) // ceil((start-x)/lcm), Div floors
	bx.Add(bx, new(big.Int).Mul(k, lcm))
	if !bx.IsInt64() {
		return 0, 0, false
	}
	x = bx.Int64()
	return x, x - gcd.Int64(), true
}

func ceilMultiple(t, n int64) int64 { return -floorDiv(-t, n) * n }

// nearEvery returns the closest distinct pair of a time t of p and a slot e of @every n, as
// seconds after dayStart. It depends on the day only through where the @every slots fall
// in it (dayStart mod n), so it is remembered by that: a day costs a look-up, and at most
// n days cost the search, each one binary search per @every slot of the day.
func (g *gapFinder) nearEvery(p *dayTimes, mask uint64, n, dayStart int64) (t, e int64, ok bool) {
	phase := ceilMultiple(dayStart, n) - dayStart // the day's first @every slot
	key := everyKey{mask: mask, n: n, phase: phase}
	if r, seen := g.near[key]; seen {
		return r.t, r.e, r.ok
	}
	best := int64(-1)
	for at := phase - n; at < daySeconds+n; at += n {
		times := p.list()
		j, _ := slices.BinarySearch(times, int32(min(at, daySeconds)))
		for _, k := range []int{j - 1, j, j + 1} {
			if k < 0 || k >= len(times) || int64(times[k]) == at {
				continue
			}
			if d := abs(int64(times[k]) - at); best < 0 || d < best {
				best, t, e = d, int64(times[k]), at
			}
		}
	}
	ok = best > 0
	if g.near == nil {
		g.near = map[everyKey]nearPair{}
	}
	g.near[key] = nearPair{t: t, e: e, ok: ok}
	return t, e, ok
}

type everyKey struct {
	mask     uint64
	n, phase int64
}

type nearPair struct {
	t, e int64
	ok   bool
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
