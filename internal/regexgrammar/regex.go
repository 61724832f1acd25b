// Package regexgrammar is a byte-level matcher for regular expressions
// (full match) and fixed lists of choices, as vLLM serves structured
// outputs regex and choice: a Grammar is compiled once per request, a
// State follows one output byte by byte, and a Masker gives, for a State,
// the set of vocabulary tokens whose bytes can continue a match (see
// Vocab).
//
// Patterns are parsed by Go's regexp/syntax with its Perl flags (the
// syntax of Python's re and xgrammar for the common constructs: classes,
// \d \w \s, Unicode classes \pL, repetition {m,n}, lazy quantifiers,
// groups, (?i)); the output must match the whole pattern, as vLLM's
// backends require. A leading ^ or \A and a trailing $ or \z are allowed
// and change nothing; any other anchor or boundary (^ or $ inside, (?m),
// \b, \B) is an *UnsupportedError, and constructs Go does not parse
// (backreferences, lookaround, possessive quantifiers) a *SyntaxError.
//
// Matching works on runes compiled to a syntax.Prog and simulated as a
// set of threads, each at an instruction and holding the bytes of a rune
// begun but not finished; a thread keeps a partial rune only while some
// rune of its class can complete it, so a State that accepts a byte can
// always be extended to a match (no dead ends). The sets are cached as the
// states of a lazy DFA with their byte transitions, up to MaxCachedStates
// (and MaxCachedThreads) per Grammar; beyond that, transitions are
// computed without caching. A state set holds at most 4 threads per
// program instruction, so MaxInsts bounds its size.
// Output is valid UTF-8: bytes that cannot be part of a valid encoding are
// never accepted.
//
// Grammar.RuneDFA builds, once and in full, the automaton of a pattern
// over whole runes rather than bytes, with states numbered, for callers
// that decode their input themselves: the pattern and format keywords of
// JSON schemas (internal/jsongrammar), whose string characters may come
// escaped.
package regexgrammar

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Limits on what Compile and Choice accept, and on the DFA cache.
const (
	// MaxPatternBytes bounds the length of a pattern given to Compile.
	MaxPatternBytes = 16 << 10
	// MaxChoices bounds the number of choices given to Choice.
	MaxChoices = 4096
	// MaxChoiceBytes bounds the total length of the choices.
	MaxChoiceBytes = 64 << 10
	// MaxInsts bounds the compiled program (instructions): a state set
	// holds at most 4 threads per instruction (one per partial-rune length).
	MaxInsts = 100_000
	// MaxCachedStates bounds the DFA states cached per Grammar (each about
	// 2 KiB of transitions plus its thread set).
	MaxCachedStates = 2048
	// MaxCachedThreads bounds the threads of the cached states of a
	// Grammar, all together (16 bytes each with their keys): large sets
	// stop being cached before MaxCachedStates is reached.
	MaxCachedThreads = 1 << 20
)

// SyntaxError is a pattern Go's regexp/syntax does not parse (with Perl
// flags): malformed, or a construct it does not implement, such as
// backreferences and lookaround.
type SyntaxError struct {
	Err  error  // the *syntax.Error
	Hint string // what the error most likely stands for ("" if nothing)
}

// Error reports the parser's message, with the hint if any.
func (e *SyntaxError) Error() string {
	if e.Hint != "" {
		return "invalid regular expression: " + e.Err.Error() + " (" + e.Hint + ")"
	}
	return "invalid regular expression: " + e.Err.Error()
}

// hint names the unsupported constructs Go's parser reports by their
// syntax only.
func hint(err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch {
	case strings.HasPrefix(se.Expr, "(?=") || strings.HasPrefix(se.Expr, "(?!") || strings.HasPrefix(se.Expr, "(?<=") || strings.HasPrefix(se.Expr, "(?<!"):
		return "lookaround assertions are not supported"
	case se.Code == syntax.ErrInvalidEscape && len(se.Expr) == 2 && se.Expr[1] >= '1' && se.Expr[1] <= '9':
		return "backreferences are not supported"
	case se.Code == syntax.ErrInvalidRepeatOp && strings.HasSuffix(se.Expr, "+"):
		return "possessive quantifiers are not supported"
	}
	return ""
}

// Unwrap returns the *syntax.Error.
func (e *SyntaxError) Unwrap() error { return e.Err }

// UnsupportedError is a construct that parses but that a full-match
// constraint does not implement: anchors and word boundaries other than a
// leading ^ / \A and a trailing $ / \z, NUL characters (vLLM refuses
// them too), and a pattern that matches no text at all.
type UnsupportedError struct {
	Construct string // e.g. "^", "$", `\b`
	Msg       string
}

// Error names the construct and why it is refused.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unsupported %s: %s", e.Construct, e.Msg)
}

// LimitError is an input over one of the package's limits.
type LimitError struct {
	What  string // "pattern bytes", "choices", "choice bytes", "program instructions"
	Got   int
	Limit int
}

// Error gives the size and the limit.
func (e *LimitError) Error() string {
	return fmt.Sprintf("too large: %d %s, at most %d", e.Got, e.What, e.Limit)
}

// ChoiceError is a malformed list of choices.
type ChoiceError struct {
	Msg string
}

// Error returns Msg.
func (e *ChoiceError) Error() string { return e.Msg }

// Grammar is a compiled pattern. It is safe for concurrent use; its DFA
// cache is shared by the States of all its users.
type Grammar struct {
	prog   *syntax.Prog
	ranges [][]rune // per instruction: the sorted [lo, hi] pairs its rune matches (nil: not a rune instruction)
	start  *node
	dead   *node
	static int // Bytes of the program and its tables

	mu     sync.Mutex
	nodes  map[string]*node
	marks  []uint32 // closure scratch: marks[pc] == gen when visited
	gen    uint32
	cached int // threads in the cached states
}

// thread is one NFA thread: the instruction (high 32 bits), the number of
// bytes of its pending rune (bits 24-25) and those bytes (bits 0-23, the
// first in the highest byte).
type thread uint64

func mkThread(pc uint32, n int, bs uint32) thread {
	return thread(uint64(pc)<<32 | uint64(n)<<24 | uint64(bs))
}
func (t thread) pc() uint32 { return uint32(t >> 32) }
func (t thread) n() int     { return int(t>>24) & 3 }
func (t thread) bytes() []byte {
	n := t.n()
	b := make([]byte, n, 4)
	for i := range n {
		b[i] = byte(uint32(t) >> (16 - 8*i))
	}
	return b
}

// node is a DFA state: a set of threads and whether it matches.
type node struct {
	threads  []thread
	match    bool
	interned bool
	next     [256]atomic.Pointer[node]
}

// Compile parses pattern (Perl flags) and compiles it for full matching.
// Errors: *LimitError (longer than MaxPatternBytes, a program over
// MaxInsts), *SyntaxError, *UnsupportedError.
func Compile(pattern string) (*Grammar, error) {
	if len(pattern) > MaxPatternBytes {
		return nil, &LimitError{What: "pattern bytes", Got: len(pattern), Limit: MaxPatternBytes}
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, &UnsupportedError{Construct: "NUL character", Msg: "the pattern must not contain U+0000"}
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, &SyntaxError{Err: err, Hint: hint(err)}
	}
	return build(re)
}

// Choice compiles the constraint of a list of choices: the output is
// exactly one of them (vLLM's structured_outputs choice, which it
// compiles to the grammar of their alternation). Choices may repeat or be
// empty (then the empty output matches). Errors: *ChoiceError (no
// choices, invalid UTF-8 or a NUL character in one), *LimitError (more
// than MaxChoices or MaxChoiceBytes in all).
func Choice(choices []string) (*Grammar, error) {
	if len(choices) == 0 {
		return nil, &ChoiceError{Msg: "must hold at least one choice"}
	}
	if len(choices) > MaxChoices {
		return nil, &LimitError{What: "choices", Got: len(choices), Limit: MaxChoices}
	}
	total := 0
	for i, c := range choices {
		total += len(c)
		if !utf8.ValidString(c) {
			return nil, &ChoiceError{Msg: fmt.Sprintf("choice %d is not valid UTF-8", i)}
		}
		if strings.IndexByte(c, 0) >= 0 {
			return nil, &ChoiceError{Msg: fmt.Sprintf("choice %d contains a NUL character", i)}
		}
	}
	if total > MaxChoiceBytes {
		return nil, &LimitError{What: "choice bytes", Got: total, Limit: MaxChoiceBytes}
	}
	// The alternation of the quoted literals: the parser factors common
	// prefixes, so the program is a trie of the choices.
	var b strings.Builder
	for i, c := range choices {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(regexp.QuoteMeta(c))
	}
	re, err := syntax.Parse(b.String(), syntax.Perl)
	if err != nil {
		return nil, &SyntaxError{Err: err}
	}
	return build(re)
}

// build strips the edge anchors, refuses the others and compiles re.
func build(re *syntax.Regexp) (*Grammar, error) {
	re = stripLeft(re)
	re = stripRight(re)
	if err := checkAnchors(re); err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, &SyntaxError{Err: err}
	}
	if len(prog.Inst) > MaxInsts {
		return nil, &LimitError{What: "program instructions", Got: len(prog.Inst), Limit: MaxInsts}
	}
	g := &Grammar{prog: prog, ranges: make([][]rune, len(prog.Inst)), nodes: map[string]*node{}, marks: make([]uint32, len(prog.Inst))}
	live := liveInsts(prog)
	for pc := range prog.Inst {
		if live[pc] { // a rune thread that can never match is never started
			g.ranges[pc] = instRanges(&prog.Inst[pc])
		}
	}
	g.dead = &node{}
	g.static = 96 + 4*len(prog.Inst) // marks
	for pc := range prog.Inst {
		g.static += int(unsafe.Sizeof(prog.Inst[pc])) + 4*cap(prog.Inst[pc].Rune) + 24 + 4*cap(g.ranges[pc])
	}
	g.mu.Lock()
	var ts []thread
	match := g.closure(uint32(prog.Start), &ts)
	g.start = g.intern(ts, match)
	g.mu.Unlock()
	if g.start == g.dead {
		return nil, &UnsupportedError{Construct: "pattern", Msg: "it matches no text (an empty class)"}
	}
	return g, nil
}

// liveInsts marks the instructions from which a match can be reached.
func liveInsts(prog *syntax.Prog) []bool {
	preds := make([][]uint32, len(prog.Inst))
	for pc := range prog.Inst {
		in := &prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			preds[in.Arg] = append(preds[in.Arg], uint32(pc))
			preds[in.Out] = append(preds[in.Out], uint32(pc))
		case syntax.InstRune:
			if len(in.Rune) == 0 { // an empty class matches nothing
				continue
			}
			preds[in.Out] = append(preds[in.Out], uint32(pc))
		case syntax.InstCapture, syntax.InstNop, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			preds[in.Out] = append(preds[in.Out], uint32(pc))
		}
	}
	return coreach(preds, func(pc int) bool { return prog.Inst[pc].Op == syntax.InstMatch })
}

// coreach marks the nodes 0 .. len(preds)-1 from which a node with
// accept true can be reached, walking backwards: preds[t] lists the nodes
// with an edge into t (a node may be listed more than once).
func coreach[T int32 | uint32](preds [][]T, accept func(int) bool) []bool {
	live := make([]bool, len(preds))
	var q []T
	for i := range preds {
		if accept(i) {
			live[i] = true
			q = append(q, T(i))
		}
	}
	for len(q) > 0 {
		t := q[len(q)-1]
		q = q[:len(q)-1]
		for _, p := range preds[t] {
			if !live[p] {
				live[p] = true
				q = append(q, p)
			}
		}
	}
	return live
}

// stripLeft removes the ^ / \A anchors at the leftmost position of re.
func stripLeft(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpBeginText:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
	case syntax.OpConcat:
		subs := re.Sub
		for len(subs) > 0 && subs[0].Op == syntax.OpBeginText {
			subs = subs[1:]
		}
		if len(subs) > 0 {
			subs = append([]*syntax.Regexp{stripLeft(subs[0])}, subs[1:]...)
		}
		c := *re
		c.Sub = subs
		return &c
	case syntax.OpAlternate:
		c := *re
		c.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, s := range re.Sub {
			c.Sub[i] = stripLeft(s)
		}
		return &c
	case syntax.OpCapture:
		c := *re
		c.Sub = []*syntax.Regexp{stripLeft(re.Sub[0])}
		return &c
	}
	return re
}

// stripRight removes the $ / \z anchors at the rightmost position of re.
func stripRight(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpEndText:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
	case syntax.OpConcat:
		subs := re.Sub
		for len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText {
			subs = subs[:len(subs)-1]
		}
		if len(subs) > 0 {
			subs = append(slices.Clone(subs[:len(subs)-1]), stripRight(subs[len(subs)-1]))
		}
		c := *re
		c.Sub = subs
		return &c
	case syntax.OpAlternate:
		c := *re
		c.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, s := range re.Sub {
			c.Sub[i] = stripRight(s)
		}
		return &c
	case syntax.OpCapture:
		c := *re
		c.Sub = []*syntax.Regexp{stripRight(re.Sub[0])}
		return &c
	}
	return re
}

// checkAnchors refuses the empty-width assertions left in re.
func checkAnchors(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText:
		return &UnsupportedError{Construct: "^", Msg: "a start anchor is only allowed at the start of the pattern (the output must match the whole pattern)"}
	case syntax.OpEndLine, syntax.OpEndText:
		return &UnsupportedError{Construct: "$", Msg: "an end anchor is only allowed at the end of the pattern (the output must match the whole pattern)"}
	case syntax.OpWordBoundary:
		return &UnsupportedError{Construct: `\b`, Msg: "word boundaries are not supported"}
	case syntax.OpNoWordBoundary:
		return &UnsupportedError{Construct: `\B`, Msg: "word boundaries are not supported"}
	}
	for _, s := range re.Sub {
		if err := checkAnchors(s); err != nil {
			return err
		}
	}
	return nil
}

// instRanges returns the sorted rune ranges a rune instruction matches.
func instRanges(in *syntax.Inst) []rune {
	switch in.Op {
	case syntax.InstRune1:
		return []rune{in.Rune[0], in.Rune[0]}
	case syntax.InstRuneAny:
		return []rune{0, unicode.MaxRune}
	case syntax.InstRuneAnyNotNL:
		return []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}
	case syntax.InstRune:
		if len(in.Rune) == 1 {
			r0 := in.Rune[0]
			rs := []rune{r0}
			if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
				for r := unicode.SimpleFold(r0); r != r0; r = unicode.SimpleFold(r) {
					rs = append(rs, r)
				}
			}
			slices.Sort(rs)
			out := make([]rune, 0, 2*len(rs))
			for _, r := range rs {
				out = append(out, r, r)
			}
			return out
		}
		// Pairs, sorted and non-overlapping as the parser leaves them.
		out := slices.Clone(in.Rune)
		return out
	}
	return nil
}

// inRanges reports whether some rune of [lo, hi] is in rs.
func inRanges(rs []rune, lo, hi rune) bool {
	// The first pair whose end is >= lo.
	i, j := 0, len(rs)/2
	for i < j {
		h := (i + j) / 2
		if rs[2*h+1] < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return i < len(rs)/2 && rs[2*i] <= hi
}

// closure adds to ts the rune threads reachable from pc without input and
// reports whether a match is. g.mu must be held.
func (g *Grammar) closure(pc uint32, ts *[]thread) bool {
	g.gen++
	if g.gen == 0 {
		clear(g.marks)
		g.gen = 1
	}
	return g.follow(pc, ts)
}

// follow adds the rune threads reachable from pc without input, skipping
// instructions already marked in this generation, and reports whether a
// match is reachable. g.mu must be held.
func (g *Grammar) follow(pc uint32, ts *[]thread) bool {
	match := false
	stack := []uint32{pc}
	for len(stack) > 0 {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if g.marks[pc] == g.gen {
			continue
		}
		g.marks[pc] = g.gen
		in := &g.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			stack = append(stack, in.Arg, in.Out)
		case syntax.InstCapture, syntax.InstNop:
			stack = append(stack, in.Out)
		case syntax.InstMatch:
			match = true
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if g.ranges[pc] != nil { // live
				*ts = append(*ts, mkThread(pc, 0, 0))
			}
		}
		// InstFail and InstEmptyWidth (none are left) end the thread.
	}
	return match
}

// utf8Len returns the length of the encoding a lead byte starts (0: not a
// lead byte).
func utf8Len(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c >= 0xC2 && c <= 0xDF:
		return 2
	case c >= 0xE0 && c <= 0xEF:
		return 3
	case c >= 0xF0 && c <= 0xF4:
		return 4
	}
	return 0
}

// validPrefix reports whether b (at least one byte) begins a valid UTF-8
// encoding, complete or not.
func validPrefix(b []byte) bool {
	n := utf8Len(b[0])
	if n == 0 || len(b) > n {
		return false
	}
	for i := 1; i < len(b); i++ {
		lo, hi := byte(0x80), byte(0xBF)
		if i == 1 {
			switch b[0] {
			case 0xE0:
				lo = 0xA0
			case 0xED:
				hi = 0x9F
			case 0xF0:
				lo = 0x90
			case 0xF4:
				hi = 0x8F
			}
		}
		if b[i] < lo || b[i] > hi {
			return false
		}
	}
	return true
}

// completions returns the interval of runes whose encodings begin with
// the valid, incomplete prefix b.
func completions(b []byte) (lo, hi rune) {
	n := utf8Len(b[0])
	lob := append(slices.Clone(b), make([]byte, n-len(b))...)
	hib := slices.Clone(lob)
	for i := len(b); i < n; i++ {
		lob[i], hib[i] = 0x80, 0xBF
	}
	dec := func(x []byte) rune {
		r := rune(x[0]) & (0x7F >> n)
		for _, c := range x[1:] {
			r = r<<6 | rune(c&0x3F)
		}
		return r
	}
	lo, hi = dec(lob), dec(hib)
	switch n {
	case 2:
		lo = max(lo, 0x80)
	case 3:
		lo = max(lo, 0x800)
		if b[0] == 0xED {
			hi = min(hi, 0xD7FF)
		}
	case 4:
		lo = max(lo, 0x10000)
		hi = min(hi, unicode.MaxRune)
	}
	return lo, hi
}

// advance computes the threads after byte c from threads ts, and whether
// they match. g.mu must be held.
func (g *Grammar) advance(ts []thread, c byte) ([]thread, bool) {
	var out []thread
	match := false
	g.gen++
	if g.gen == 0 {
		clear(g.marks)
		g.gen = 1
	}
	var buf [4]byte
	for _, t := range ts {
		pc := t.pc()
		b := append(buf[:0], t.bytes()...)
		b = append(b, c)
		if !validPrefix(b) {
			continue
		}
		rs := g.ranges[pc]
		if len(b) == utf8Len(b[0]) { // a complete rune
			r, _ := utf8.DecodeRune(b)
			if inRanges(rs, r, r) && g.follow(g.prog.Inst[pc].Out, &out) {
				match = true
			}
			continue
		}
		if lo, hi := completions(b); inRanges(rs, lo, hi) {
			var bs uint32
			for i, x := range b {
				bs |= uint32(x) << (16 - 8*i)
			}
			out = append(out, mkThread(pc, len(b), bs))
		}
	}
	// follow marks only instructions entered without a pending rune; a
	// partial thread at the same instruction is a different thread.
	slices.Sort(out)
	out = slices.Compact(out)
	return out, match
}

// key encodes a thread set.
func key(ts []thread, match bool) string {
	b := make([]byte, 0, 1+8*len(ts))
	if match {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, t := range ts {
		b = append(b, byte(t>>56), byte(t>>48), byte(t>>40), byte(t>>32), byte(t>>24), byte(t>>16), byte(t>>8), byte(t))
	}
	return string(b)
}

// intern returns the cached node of (ts, match), adding it while the cache
// has room. g.mu must be held.
func (g *Grammar) intern(ts []thread, match bool) *node {
	if len(ts) == 0 && !match {
		return g.dead
	}
	k := key(ts, match)
	if n, ok := g.nodes[k]; ok {
		return n
	}
	n := &node{threads: ts, match: match}
	if len(g.nodes) < MaxCachedStates && g.cached+len(ts) <= MaxCachedThreads {
		n.interned = true
		g.nodes[k] = n
		g.cached += len(ts)
	}
	return n
}

// Bytes is an estimate of the memory g holds now, in bytes: its program
// and the DFA states cached so far (about 2 KiB of transitions each, plus
// 16 bytes per thread), which grow as outputs are matched, up to
// MaxCachedStates states and MaxCachedThreads threads.
func (g *Grammar) Bytes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.static + len(g.nodes)*(int(unsafe.Sizeof(node{}))+64) + 16*g.cached
}

// Saturated reports whether g's DFA cache is full (MaxCachedStates
// states, or 7/8 of MaxCachedThreads threads): the states reached from now on
// are computed again at each use, and masks over them are not cached.
// A Grammar shared by many outputs (a cache of compiled patterns) is
// better compiled anew then.
func (g *Grammar) Saturated() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.nodes) >= MaxCachedStates || g.cached >= MaxCachedThreads-MaxCachedThreads/8
}

// step returns the node after byte c from n (g.dead when c is refused).
func (g *Grammar) step(n *node, c byte) *node {
	if nx := n.next[c].Load(); nx != nil {
		return nx
	}
	g.mu.Lock()
	ts, match := g.advance(n.threads, c)
	nx := g.intern(ts, match)
	g.mu.Unlock()
	if n.interned && (nx.interned || nx == g.dead) {
		n.next[c].Store(nx)
	}
	return nx
}

// State is a position in one output: the DFA state after the bytes fed so
// far. Build one with Grammar.Start; the zero State is not usable.
type State struct {
	g *Grammar
	n *node
}

// Start returns the state before the first byte.
func (g *Grammar) Start() *State { return &State{g: g, n: g.start} }

// Feed advances s by one byte of output. It returns false, leaving s as it
// was, when no match can continue with c.
func (s *State) Feed(c byte) bool {
	nx := s.g.step(s.n, c)
	if nx == s.g.dead {
		return false
	}
	s.n = nx
	return true
}

// FeedBytes feeds every byte of b to s and reports whether s accepted them
// all; on false, s is as it was before the call.
func (s *State) FeedBytes(b []byte) bool {
	n := s.n
	for _, c := range b {
		n = s.g.step(n, c)
		if n == s.g.dead {
			return false
		}
	}
	s.n = n
	return true
}

// Accepting reports whether the bytes fed so far match the whole pattern
// (the output may end here).
func (s *State) Accepting() bool { return s.n.match }

// Done reports whether no byte can follow: the output matches and no
// longer one does.
func (s *State) Done() bool { return len(s.n.threads) == 0 }

// Clone returns a copy of s.
func (s *State) Clone() *State { c := *s; return &c }

// CopyFrom makes s equal to o.
func (s *State) CopyFrom(o *State) { *s = *o }

// Match reports whether the whole of b matches g, as regexp's full match
// (^(?:pattern)$) does on valid UTF-8 text.
func (g *Grammar) Match(b []byte) bool {
	s := g.Start()
	return s.FeedBytes(b) && s.Accepting()
}
