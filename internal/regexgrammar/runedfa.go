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
	work  int       // the steps RuneDFA took to build it (see MaxRuneDFAWork)
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
	d.work = work
	return d, nil
}

// Work is the number of steps Grammar.RuneDFA took to build d, as counted
// against MaxRuneDFAWork (each state: its intervals times its threads plus
// one; about 50 ns a step on a 2-core dev box); 0 for an Intersect product,
// whose cost its maxStates bounds. Callers building many automata bound
// their sum.
func (d *RuneDFA) Work() int { return d.work }

// Bytes is an estimate of the memory d holds, in bytes: its transition
// tables (128 ASCII entries per state, and the intervals beyond ASCII).
func (d *RuneDFA) Bytes() int {
	n := 96 + len(d.match) + 4*cap(d.ascii) + 48*len(d.lo)
	for s := range d.lo {
		n += 4 * (cap(d.lo[s]) + cap(d.to[s]))
	}
	return n
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

// Intersect returns the automaton of the texts that both a and b match:
// their product, less the states from which no match is reachable (so
// that, as in every RuneDFA, each state can still reach a match). Errors:
// *LimitError past maxStates product states or MaxRuneDFAIntervals
// intervals; *UnsupportedError when no text matches both.
func Intersect(a, b *RuneDFA, maxStates int) (*RuneDFA, error) {
	p := &RuneDFA{}
	ids := map[[2]int32]int32{}
	var pairs [][2]int32
	var limitErr error
	add := func(x, y int32) int32 {
		if x < 0 || y < 0 {
			return -1
		}
		k := [2]int32{x, y}
		if id, ok := ids[k]; ok {
			return id
		}
		if len(pairs) >= maxStates {
			limitErr = &LimitError{What: "automaton states", Got: len(pairs) + 1, Limit: maxStates}
			return -1
		}
		id := int32(len(pairs))
		ids[k] = id
		pairs = append(pairs, k)
		p.match = append(p.match, a.match[x] && b.match[y])
		return id
	}
	add(0, 0)
	intervals := 0
	for s := 0; s < len(pairs) && limitErr == nil; s++ {
		x, y := pairs[s][0], pairs[s][1]
		asc := make([]int32, 128)
		for r := range 128 {
			asc[r] = add(a.ascii[int(x)*128+r], b.ascii[int(y)*128+r])
		}
		// Merge the two interval lists (both start at 0x80).
		la, ta, lb, tb := a.lo[x], a.to[x], b.lo[y], b.to[y]
		var los []rune
		var tos []int32
		i, j, cur := 0, 0, rune(0x80)
		for {
			if t := add(ta[i], tb[j]); len(tos) == 0 || tos[len(tos)-1] != t {
				los = append(los, cur)
				tos = append(tos, t)
			}
			na, nb := rune(unicode.MaxRune+1), rune(unicode.MaxRune+1)
			if i+1 < len(la) {
				na = la[i+1]
			}
			if j+1 < len(lb) {
				nb = lb[j+1]
			}
			cur = min(na, nb)
			if cur > unicode.MaxRune {
				break
			}
			if na == cur {
				i++
			}
			if nb == cur {
				j++
			}
		}
		if intervals += len(los); intervals > MaxRuneDFAIntervals && limitErr == nil {
			limitErr = &LimitError{What: "automaton intervals", Got: intervals, Limit: MaxRuneDFAIntervals}
		}
		p.ascii = append(p.ascii, asc...)
		p.lo = append(p.lo, los)
		p.to = append(p.to, tos)
	}
	if limitErr != nil {
		return nil, limitErr
	}
	// The states that can reach a match, backwards from the matches.
	n := len(pairs)
	preds := make([][]int32, n)
	for s := range n {
		seen := map[int32]bool{}
		edge := func(t int32) {
			if t >= 0 && !seen[t] {
				seen[t] = true
				preds[t] = append(preds[t], int32(s))
			}
		}
		for _, t := range p.ascii[s*128 : s*128+128] {
			edge(t)
		}
		for _, t := range p.to[s] {
			edge(t)
		}
	}
	live := coreach(preds, func(s int) bool { return p.match[s] })
	if !live[0] {
		return nil, &UnsupportedError{Construct: "intersection", Msg: "no text matches both patterns"}
	}
	// Renumber the live states in order (the start stays 0).
	renum := make([]int32, n)
	next := int32(0)
	for s := range n {
		renum[s] = -1
		if live[s] {
			renum[s] = next
			next++
		}
	}
	out := &RuneDFA{}
	for s := range n {
		if !live[s] {
			continue
		}
		out.match = append(out.match, p.match[s])
		for _, t := range p.ascii[s*128 : s*128+128] {
			if t >= 0 {
				t = renum[t]
			}
			out.ascii = append(out.ascii, t)
		}
		var los []rune
		var tos []int32
		for k, t := range p.to[s] {
			if t >= 0 {
				t = renum[t]
			}
			if len(tos) > 0 && tos[len(tos)-1] == t {
				continue
			}
			los = append(los, p.lo[s][k])
			tos = append(tos, t)
		}
		out.lo = append(out.lo, los)
		out.to = append(out.to, tos)
	}
	return out, nil
}
