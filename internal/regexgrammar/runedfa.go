package regexgrammar

import (
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Limits of a RuneDFA (see Grammar.RuneDFA).
const (
	// MaxRuneDFAThreads bounds the threads of all the states of one
	// RuneDFA together: the work of building it.
	MaxRuneDFAThreads = 1 << 20
	// MaxRuneDFAIntervals bounds the rune intervals (transitions beyond
	// ASCII) of all the states of one RuneDFA together.
	MaxRuneDFAIntervals = 1 << 20
	// MaxRuneDFAWork bounds the work of building one RuneDFA: for each
	// state, its threads' rune ranges plus its threads times the intervals
	// those ranges cut (at most about half a second on one core).
	MaxRuneDFAWork = 1 << 23
)

// RuneDFA is the complete deterministic automaton of a Grammar over whole
// runes (code points) rather than bytes: a caller that decodes its input
// itself, such as a JSON string whose characters may be escaped, feeds it
// one decoded rune at a time. States are small integers (0 is the start,
// -1 the dead state that nothing continues from); every state other than
// -1 can reach a match (no dead ends). Surrogate code points
// (U+D800-U+DFFF) are never accepted, as in UTF-8 text. A RuneDFA is
// immutable and safe for concurrent use.
type RuneDFA struct {
	match []bool
	ascii []int32   // state*128 + r: the state after ASCII rune r
	lo    [][]rune  // per state: the first rune of each interval from 0x80 (lo[s][0] == 0x80)
	to    [][]int32 // per state: the state after any rune of each interval
}

// RuneDFA builds the complete rune automaton of g, exploring every state
// reachable from the start. Errors: *LimitError when it has more than
// maxStates states, or its states hold more than MaxRuneDFAThreads threads
// or MaxRuneDFAIntervals intervals in all, or it takes more than
// MaxRuneDFAWork steps to build. The Grammar's own byte-level
// behaviour is unchanged.
func (g *Grammar) RuneDFA(maxStates int) (*RuneDFA, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := &RuneDFA{}
	ids := map[string]int32{}
	var sets [][]thread
	threads, intervals, work := 0, 0, 0
	var limitErr error
	add := func(ts []thread, match bool) int32 {
		if len(ts) == 0 && !match {
			return -1
		}
		slices.Sort(ts)
		ts = slices.Compact(ts)
		k := key(ts, match)
		if id, ok := ids[k]; ok {
			return id
		}
		if len(sets) >= maxStates {
			limitErr = &LimitError{What: "automaton states", Got: len(sets) + 1, Limit: maxStates}
			return -1
		}
		if threads += len(ts); threads > MaxRuneDFAThreads {
			limitErr = &LimitError{What: "automaton threads", Got: threads, Limit: MaxRuneDFAThreads}
			return -1
		}
		id := int32(len(sets))
		ids[k] = id
		sets = append(sets, ts)
		d.match = append(d.match, match)
		return id
	}
	var ts []thread
	m := g.closure(uint32(g.prog.Start), &ts)
	add(ts, m)
	for s := 0; s < len(sets) && limitErr == nil; s++ {
		cur := sets[s]
		// The boundaries of the rune ranges of the state's threads cut the
		// code points into intervals that every thread treats alike.
		pts := []rune{0, 0x80, 0xD800, 0xE000}
		for _, t := range cur {
			rs := g.ranges[t.pc()]
			for j := 0; j+1 < len(rs); j += 2 {
				pts = append(pts, rs[j], rs[j+1]+1)
			}
		}
		slices.Sort(pts)
		pts = slices.Compact(pts)
		for len(pts) > 0 && pts[len(pts)-1] > unicode.MaxRune {
			pts = pts[:len(pts)-1]
		}
		if work += len(pts) + len(cur)*len(pts); work > MaxRuneDFAWork {
			limitErr = &LimitError{What: "automaton work", Got: work, Limit: MaxRuneDFAWork}
			break
		}
		memo := map[string]int32{}
		var sel []byte
		asc := make([]int32, 128)
		var los []rune
		var tos []int32
		for i, lo := range pts {
			hi := rune(unicode.MaxRune)
			if i+1 < len(pts) {
				hi = pts[i+1] - 1
			}
			target := int32(-1)
			if lo < 0xD800 || lo > 0xDFFF {
				sel = sel[:0]
				for j, t := range cur {
					if inRanges(g.ranges[t.pc()], lo, lo) {
						sel = strconv.AppendInt(sel, int64(j), 36)
						sel = append(sel, ',')
					}
				}
				var ok bool
				if target, ok = memo[string(sel)]; !ok {
					g.gen++
					if g.gen == 0 {
						clear(g.marks)
						g.gen = 1
					}
					var out []thread
					match := false
					for _, t := range cur {
						if inRanges(g.ranges[t.pc()], lo, lo) && g.follow(g.prog.Inst[t.pc()].Out, &out) {
							match = true
						}
					}
					target = add(out, match)
					memo[string(sel)] = target
				}
			}
			if lo < 0x80 {
				for r := lo; r <= min(hi, 0x7F); r++ {
					asc[r] = target
				}
				continue
			}
			if n := len(tos); n > 0 && tos[n-1] == target {
				continue // the same as the interval before
			}
			los = append(los, lo)
			tos = append(tos, target)
		}
		if intervals += len(los); intervals > MaxRuneDFAIntervals && limitErr == nil {
			limitErr = &LimitError{What: "automaton intervals", Got: intervals, Limit: MaxRuneDFAIntervals}
		}
		d.ascii = append(d.ascii, asc...)
		d.lo = append(d.lo, los)
		d.to = append(d.to, tos)
	}
	if limitErr != nil {
		return nil, limitErr
	}
	return d, nil
}

// States is the number of states.
func (d *RuneDFA) States() int { return len(d.match) }

// Start is the state before the first rune (0).
func (d *RuneDFA) Start() int32 { return 0 }

// Accepting reports whether the runes that led to state s match the
// whole pattern (false for -1).
func (d *RuneDFA) Accepting(s int32) bool { return s >= 0 && d.match[s] }

// interval returns the index in d.lo[s] of the interval holding r >= 0x80.
func (d *RuneDFA) interval(s int32, r rune) int {
	los := d.lo[s]
	i, j := 0, len(los)
	for i < j {
		h := (i + j) / 2
		if los[h] <= r {
			i = h + 1
		} else {
			j = h
		}
	}
	return i - 1
}

// Next returns the state after rune r from state s: -1 when no match
// continues with r (always for s -1, a surrogate or a rune outside
// Unicode).
func (d *RuneDFA) Next(s int32, r rune) int32 {
	switch {
	case s < 0 || r < 0 || r > unicode.MaxRune:
		return -1
	case r < 0x80:
		return d.ascii[int(s)*128+int(r)]
	}
	return d.to[s][d.interval(s, r)]
}

// CanAccept reports whether some rune of [lo, hi] continues a match from
// state s (Next is not -1): a decoder that has read part of a character
// asks it with the interval of the characters that the part begins.
func (d *RuneDFA) CanAccept(s int32, lo, hi rune) bool {
	lo, hi = max(lo, 0), min(hi, unicode.MaxRune)
	if s < 0 || lo > hi {
		return false
	}
	for r := lo; r <= min(hi, 0x7F); r++ {
		if d.ascii[int(s)*128+int(r)] >= 0 {
			return true
		}
	}
	if hi < 0x80 {
		return false
	}
	los, tos := d.lo[s], d.to[s]
	for i := d.interval(s, max(lo, 0x80)); i < len(los) && los[i] <= hi; i++ {
		if tos[i] >= 0 {
			return true
		}
	}
	return false
}

// Match reports whether the whole of text (valid UTF-8) matches, as
// Grammar.Match does.
func (d *RuneDFA) Match(text string) bool {
	s := d.Start()
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		i += n
		if s = d.Next(s, r); s < 0 {
			return false
		}
	}
	return d.Accepting(s)
}

// Uniform reports whether every rune of [lo, hi] other than a surrogate
// leads from state s to one same state, and returns it (-1: every such
// rune is refused; always so from -1). Where it leads back to s, a caller
// can take any run of such runes without stepping through them.
func (d *RuneDFA) Uniform(s int32, lo, hi rune) (int32, bool) {
	lo, hi = max(lo, 0), min(hi, unicode.MaxRune)
	if s < 0 || lo > hi {
		return -1, true
	}
	t, seen := int32(-1), false
	same := func(x int32) bool {
		if !seen {
			t, seen = x, true
			return true
		}
		return x == t
	}
	for r := lo; r <= min(hi, 0x7F); r++ {
		if !same(d.ascii[int(s)*128+int(r)]) {
			return 0, false
		}
	}
	if hi < 0x80 {
		return t, true
	}
	los, tos := d.lo[s], d.to[s]
	for i := d.interval(s, max(lo, 0x80)); i < len(los) && los[i] <= hi; i++ {
		end := rune(unicode.MaxRune)
		if i+1 < len(los) {
			end = los[i+1] - 1
		}
		if max(los[i], lo) >= 0xD800 && min(end, hi) <= 0xDFFF {
			continue // surrogates only
		}
		if !same(tos[i]) {
			return 0, false
		}
	}
	return t, true
}
