// Package maskwalk bounds the work of the structured-output maskers' token
// trie walks (internal/jsongrammar and internal/regexgrammar share it): a
// walk that runs out of work is redone for the tokens of at most d bytes, d
// = 1, 2, ... in turn (iterative deepening), so that a hostile grammar costs
// a bounded time per decode step and its mask is a subset of the exact one,
// empty only when that one is. It has no dependencies.
package maskwalk

import "slices"

// Budget is what is left of one trie walk's work, and its depth limit. A
// walk subtracts its work from Left and sets Over (and stops) once Left is
// negative; it walks no token longer than Depth bytes (-1: no limit) and
// sets Deeper when it skipped a viable trie node below Depth.
type Budget struct {
	Left, Depth  int
	Over, Deeper bool
}

// Bounded sets in dst (cleared first) the tokens that walk finds, walk
// adding them to the bitset it is given under b, which Bounded resets.
// First one walk with limit units of work and no depth limit: if it
// finishes, dst is the exact mask. Otherwise the walks for tokens of at
// most d = 1, 2, ... bytes share another limit units (the first ones that
// find a token run whatever they cost), and dst is the result of the
// deepest that finishes: a subset of the exact mask, empty only when it
// is. The cost is at most about twice limit past the first walk that finds
// a token.
func Bounded(b *Budget, limit int, dst []uint64, walk func(dst []uint64)) {
	*b = Budget{Left: limit, Depth: -1}
	clear(dst)
	walk(dst)
	if !b.Over {
		return
	}
	tmp := make([]uint64, len(dst))
	clear(dst)
	empty := true
	b.Left = limit // shared by the passes below
	for d := 1; ; d++ {
		clear(tmp)
		b.Depth, b.Over, b.Deeper = d, false, false
		if empty { // no token yet: go deeper whatever it costs
			b.Left = max(b.Left, int(^uint(0)>>2))
		}
		walk(tmp)
		if b.Over {
			return
		}
		copy(dst, tmp)
		empty = empty && !slices.ContainsFunc(tmp, func(w uint64) bool { return w != 0 })
		if !empty {
			b.Left = min(b.Left, limit)
		}
		if !b.Deeper {
			return // no token longer than d bytes is viable
		}
	}
}
