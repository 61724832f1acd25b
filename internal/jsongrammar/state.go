package jsongrammar

import (
	"bytes"
	"math"

	"github.com/dsv4go/dsv4go/internal/regexgrammar"
)

// Frame kinds.
const (
	fRoot uint8 = iota
	fObject
	fArray
	fString
	fNumber
	fLiteral
)

// Phases of a root frame.
const (
	rStart uint8 = iota
	rValue
	rDone
)

// Phases of an object frame.
const (
	oOpen        uint8 = iota // after '{'
	oKeyMatch                 // inside a declared key: b is the candidate, n the bytes matched
	oKeyFree                  // a free key's string frame is on top
	oAfterKey                 // after the key's closing quote
	oBeforeValue              // after ':'
	oValue                    // the value's frame is on top
	oAfterValue               // after a value
	oBeforeKey                // after ','
)

// Phases of an array frame.
const (
	aOpen uint8 = iota
	aValue
	aAfterValue
	aBeforeValue
)

// Phases of a string frame.
const (
	sBody uint8 = iota
	sEsc
	sHex
	sUTF8
	sLow1 // pattern strings: '\\' of a low surrogate's escape expected
	sLow2 // pattern strings: 'u' of a low surrogate's escape expected
)

// Phases of a number frame.
const (
	nStart uint8 = iota
	nMinus
	nZero
	nInt
	nDot
	nFrac
	nExp
	nExpSign
	nExpDigits
)

// frame is one level of the automaton's stack. Fields a value does not use
// stay zero, so that equal states encode to equal keys.
type frame struct {
	kind, phase uint8
	ws          uint8 // whitespace bytes in the current run
	u           uint8 // string: hex digits or UTF-8 continuation bytes left
	lo, hi      uint8 // string: range of the next UTF-8 continuation byte; in a \u escape and after it, see str
	node        int32
	n           int32 // array items, string code points, number digits, literal/key bytes matched
	a, b        int32 // object: last property emitted, key candidate; literal: candidate range; bounded number: a, its fraction digits so far
	val         int64 // bounded integer or number: magnitude of the integer digits so far (u 1: negative)
}

// State is the automaton's position in one output. Where alternatives of
// an anyOf (or oneOf) can start with the same byte, it follows each of
// them (a thread: a stack of frames) and drops those that a byte rules
// out, up to MaxLive threads (see MaxLive for what happens past it). The
// zero State is not usable: start one with Grammar.Start. A State is not
// safe for concurrent use.
type State struct {
	g *Grammar
	// frames is the only thread when ends is empty (none left when frames
	// is empty too), else the thread being fed.
	frames []frame
	// With several threads: thread i is all[ends[i-1]:ends[i]] (from 0
	// for the first).
	all  []frame
	ends []int32
	// Scratch: a new thread; the threads a byte starts beside the one fed
	// (fork, ends in forkAt); the threads after a byte (next, nextAt).
	tmp    []frame
	fork   []frame
	forkAt []int32
	next   []frame
	nextAt []int32
}

// Start returns the state before the first byte.
func (g *Grammar) Start() *State {
	return &State{g: g, frames: append(make([]frame, 0, 8), frame{kind: fRoot, node: g.root})}
}

// CopyFrom makes s equal to o (same grammar), reusing s's memory.
func (s *State) CopyFrom(o *State) {
	s.g = o.g
	if len(o.ends) == 0 {
		s.frames = append(s.frames[:0], o.frames...)
		s.ends = s.ends[:0]
		return
	}
	s.all = append(s.all[:0], o.all...)
	s.ends = append(s.ends[:0], o.ends...)
}

// Clone returns a copy of s.
func (s *State) Clone() *State {
	c := &State{}
	c.CopyFrom(s)
	return c
}

// threads calls f with each live thread's frames until f returns false.
func (s *State) threads(f func(t []frame) bool) {
	if len(s.ends) == 0 {
		if len(s.frames) > 0 {
			f(s.frames)
		}
		return
	}
	start := int32(0)
	for _, end := range s.ends {
		if !f(s.all[start:end]) {
			return
		}
		start = end
	}
}

// Accepting reports whether the bytes fed so far are a complete value: the
// output may end here.
func (s *State) Accepting() bool {
	ok := false
	s.threads(func(t []frame) bool {
		ok = s.accepting(t)
		return !ok
	})
	return ok
}

func (s *State) accepting(t []frame) bool {
	top := &t[len(t)-1]
	if top.kind == fRoot {
		return top.phase == rDone
	}
	return len(t) == 2 && s.completable(top)
}

// Done reports whether no byte can follow (the value is complete and is
// not a number that could go on).
func (s *State) Done() bool {
	done := false
	s.threads(func(t []frame) bool {
		top := &t[len(t)-1]
		done = top.kind == fRoot && top.phase == rDone
		return done
	})
	return done
}

// completable reports whether a number or literal frame could end here.
func (s *State) completable(f *frame) bool {
	switch f.kind {
	case fNumber:
		switch f.phase {
		case nZero, nInt:
			if n := &s.g.nodes[f.node]; n.bounded && n.kind == kNumber {
				return numIn(n, f.u == 1, f.val, 0, 0)
			} else if n.bounded {
				v := f.val
				if f.u == 1 {
					v = -v
				}
				return v >= n.lo && v <= n.hi
			}
			return true
		case nFrac:
			if n := &s.g.nodes[f.node]; n.bounded {
				return numIn(n, f.u == 1, f.val, f.a, f.n)
			}
			return true
		case nExpDigits:
			return true
		}
	case fLiteral:
		return len(s.g.nodes[f.node].lits[f.a]) == int(f.n)
	}
	return false
}

// AppendKey appends an encoding of s that equal states share.
func (s *State) AppendKey(dst []byte) []byte {
	s.threads(func(t []frame) bool {
		dst = append(dst, byte(len(t)))
		for i := range t {
			f := &t[i]
			dst = append(dst, f.kind, f.phase, f.ws, f.u, f.lo, f.hi)
			for _, v := range [...]int32{f.node, f.n, f.a, f.b, int32(f.val), int32(f.val >> 32)} {
				dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
			}
		}
		return true
	})
	return dst
}

// stringRoom reports whether every thread of s is inside the body of a
// string, between characters, where a plain token (see plainToken) is
// accepted exactly when it has at most room characters (room -1: any
// number): the most any thread has room for.
func (s *State) stringRoom() (room int, ok bool) {
	s.threads(func(t []frame) bool {
		top := &t[len(t)-1]
		if top.kind != fString || top.phase != sBody || s.g.nodes[top.node].re != nil {
			ok = false
			return false
		}
		n := &s.g.nodes[top.node]
		switch {
		case n.maxLen < 0:
			room = -1
		case !ok:
			room = int(n.maxLen - top.n)
		case room >= 0:
			room = max(room, int(n.maxLen-top.n))
		}
		ok = true
		return true
	})
	return room, ok
}

// patternBody reports whether s has one thread and it is inside the body
// of a string with a pattern or format, between characters: the pattern
// and its automaton's state.
func (s *State) patternBody() (*pattern, int32, bool) {
	if len(s.ends) > 0 || len(s.frames) == 0 {
		return nil, 0, false
	}
	top := &s.frames[len(s.frames)-1]
	if top.kind != fString || top.phase != sBody {
		return nil, 0, false
	}
	p := s.g.nodes[top.node].re
	return p, top.a, p != nil
}

type result uint8

const (
	reject result = iota
	accept
	acceptPop // consumed the byte and completed the frame
	popRetry  // completed the frame without consuming the byte
)

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

// steps[kind] is the step of a frame of that kind.
var steps = [...]func(*State, byte) result{
	fRoot: (*State).root, fObject: (*State).object, fArray: (*State).array,
	fString: (*State).str, fNumber: (*State).number, fLiteral: (*State).literal,
}

// Feed advances s by one byte of output. It returns false, leaving s with
// no thread (it accepts nothing more), when the grammar does not allow c
// here.
func (s *State) Feed(c byte) bool {
	if len(s.ends) > 0 {
		return s.feedAll(c)
	}
	// One thread, fed in place: the common case.
	if len(s.frames) == 0 {
		return false
	}
	for {
		top := len(s.frames) - 1
		r := steps[s.frames[top].kind](s, c)
		switch r {
		case reject:
			s.frames = s.frames[:0]
			return false
		case popRetry:
			s.frames = s.frames[:top]
			s.childDone()
			continue
		case acceptPop:
			s.frames = s.frames[:top]
			s.childDone()
		}
		if len(s.forkAt) > 0 {
			// c started alternatives beside this thread.
			s.all = append(s.all[:0], s.frames...)
			s.ends = append(s.ends[:0], int32(len(s.all)))
			s.all, s.ends = s.addForks(s.all, s.ends)
			if len(s.ends) == 1 {
				s.ends = s.ends[:0]
			}
		}
		return true
	}
}

// feedAll is Feed with several threads.
func (s *State) feedAll(c byte) bool {
	next, nextAt := s.next[:0], s.nextAt[:0]
	start := int32(0)
	for _, end := range s.ends {
		s.frames = append(s.frames[:0], s.all[start:end]...)
		start = end
		if s.feed(c) {
			next, nextAt = s.addThread(next, nextAt, s.frames)
		}
		if len(s.forkAt) > 0 {
			next, nextAt = s.addForks(next, nextAt)
		}
	}
	s.next, s.nextAt = s.all, s.ends
	s.all, s.ends = next, nextAt
	switch len(s.ends) {
	case 0:
		s.frames = s.frames[:0]
		return false
	case 1:
		s.frames = append(s.frames[:0], s.all...)
		s.ends = s.ends[:0]
	}
	return true
}

// addForks adds the threads in s.fork to frames and ends, and empties
// s.fork.
func (s *State) addForks(frames []frame, ends []int32) ([]frame, []int32) {
	start := int32(0)
	for _, end := range s.forkAt {
		frames, ends = s.addThread(frames, ends, s.fork[start:end])
		start = end
	}
	s.fork, s.forkAt = s.fork[:0], s.forkAt[:0]
	return frames, ends
}

// addThread appends thread t to frames and ends unless an equal thread is
// there already or MaxLive threads are.
func (s *State) addThread(frames []frame, ends []int32, t []frame) ([]frame, []int32) {
	if len(ends) >= MaxLive {
		return frames, ends
	}
	start := int32(0)
	for _, end := range ends {
		if sameThread(frames[start:end], t) {
			return frames, ends
		}
		start = end
	}
	frames = append(frames, t...)
	return frames, append(ends, int32(len(frames)))
}

// sameThread compares two threads from the top, where they differ if
// anywhere.
func sameThread(a, b []frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// feed advances the thread in s.frames by c.
func (s *State) feed(c byte) bool {
	for {
		top := len(s.frames) - 1
		r := steps[s.frames[top].kind](s, c)
		switch r {
		case reject:
			return false
		case accept:
			return true
		}
		s.frames = s.frames[:top]
		s.childDone()
		if r == acceptPop {
			return true
		}
	}
}

// childDone moves the frame on top past the value its child completed.
func (s *State) childDone() {
	f := &s.frames[len(s.frames)-1]
	switch f.kind {
	case fRoot:
		f.phase = rDone
	case fObject:
		if f.phase == oKeyFree {
			f.phase = oAfterKey
		} else {
			f.phase = oAfterValue
		}
	case fArray:
		f.phase = aAfterValue
		if n := &s.g.nodes[f.node]; n.minItems > 0 || n.maxItems >= 0 {
			f.n++
		}
	}
}

// white accepts c as whitespace in frame f, within MaxWhitespace.
func white(f *frame, c byte) result {
	if isWS(c) && f.ws < MaxWhitespace {
		f.ws++
		return accept
	}
	return reject
}

// fits reports whether a value of node ni, started on top of the current
// frames, can be completed within MaxNesting levels of objects and arrays.
func (s *State) fits(ni int32) bool {
	return int32(len(s.frames))-1+s.g.nodes[ni].need <= MaxNesting
}

// keyFrom reports whether object node n (its frame on top) can take a
// declared property at index from or later: one up to the next required
// property whose value fits.
func (s *State) keyFrom(n *node, from int32) bool {
	hi := int32(len(n.props) - 1)
	if r := n.nextReq[from]; r >= 0 {
		hi = r
	}
	for j := from; j <= hi; j++ {
		if s.fits(n.props[j].node) {
			return true
		}
	}
	return false
}

// startValue pushes the frame of a value of node ni that starts with c.
// For an anyOf, the first of its leaves (firstOf) that takes c is pushed
// here; each later one that takes c starts a thread of its own in s.fork:
// a copy of the frames below with that leaf's frame on top. startValue is
// the last change a step makes to the thread, so the copies are final.
func (s *State) startValue(ni int32, c byte) result {
	n := &s.g.nodes[ni]
	if n.kind != kAnyOf {
		return s.startLeaf(ni, c)
	}
	base, placed := len(s.frames), false
	for _, leaf := range n.leaves(c) {
		if !placed {
			placed = s.startLeaf(leaf, c) == accept
			continue
		}
		main := s.frames
		s.frames = append(s.tmp[:0], main[:base]...)
		if s.startLeaf(leaf, c) == accept {
			s.fork = append(s.fork, s.frames...)
			s.forkAt = append(s.forkAt, int32(len(s.fork)))
		}
		s.tmp, s.frames = s.frames, main
	}
	if placed {
		return accept
	}
	return reject
}

// startLeaf pushes the frame of a value of leaf node ni (not an anyOf)
// that starts with c; on reject the frames are as they were.
func (s *State) startLeaf(ni int32, c byte) result {
	n := &s.g.nodes[ni]
	switch n.kind {
	case kObject, kArray:
		want, k := byte('{'), fObject
		if n.kind == kArray {
			want, k = '[', fArray
		}
		if c != want || !s.fits(ni) {
			return reject
		}
		f := frame{kind: k, node: ni}
		if k == fObject {
			f.a = -1 // no property emitted yet
		}
		s.frames = append(s.frames, f)
		return accept
	case kString:
		if c != '"' {
			return reject
		}
		s.frames = append(s.frames, frame{kind: fString, node: ni})
		return accept
	case kNumber, kInteger:
		s.frames = append(s.frames, frame{kind: fNumber, node: ni})
	case kLiteral:
		s.frames = append(s.frames, frame{kind: fLiteral, node: ni, a: 0, b: int32(len(n.lits) - 1)})
	default:
		return reject
	}
	// A number or literal consumes its first byte itself.
	switch r := s.stepTop(c); r {
	case accept:
		return accept
	default:
		s.frames = s.frames[:len(s.frames)-1]
		return reject
	}
}

func (s *State) stepTop(c byte) result {
	if s.frames[len(s.frames)-1].kind == fNumber {
		return s.number(c)
	}
	return s.literal(c)
}

func (s *State) root(c byte) result {
	f := &s.frames[len(s.frames)-1]
	if f.phase != rStart {
		return reject
	}
	f.phase = rValue
	if s.startValue(f.node, c) == reject {
		s.frames[len(s.frames)-1].phase = rStart
		return reject
	}
	return accept
}

func (s *State) object(c byte) result {
	top := len(s.frames) - 1
	f := &s.frames[top]
	n := &s.g.nodes[f.node]
	free := n.addl >= 0
	canClose := free || n.nextReq[f.a+1] < 0
	switch f.phase {
	case oOpen, oBeforeKey:
		if c == '"' {
			f.ws = 0
			return s.startKey(f, n)
		}
		if c == '}' && f.phase == oOpen && canClose {
			return acceptPop
		}
		return white(f, c)
	case oKeyMatch:
		hi := int32(len(n.props) - 1)
		if r := n.nextReq[f.a+1]; r >= 0 {
			hi = r
		}
		cand := n.props[f.b].name[:f.n]
		for j := f.b; j <= hi; j++ {
			nm := n.props[j].name
			if len(nm) > int(f.n) && nm[f.n] == c && bytes.HasPrefix(nm, cand) && s.fits(n.props[j].node) {
				f.b = j
				f.n++
				if int(f.n) == len(nm) {
					f.a, f.b, f.n, f.phase = j, 0, 0, oAfterKey
				}
				return accept
			}
		}
		return reject
	case oAfterKey:
		if c == ':' {
			f.ws, f.phase = 0, oBeforeValue
			return accept
		}
		return white(f, c)
	case oBeforeValue:
		if isWS(c) {
			return white(f, c)
		}
		vn := n.addl
		if !free {
			vn = n.props[f.a].node
		}
		f.ws, f.phase = 0, oValue
		if s.startValue(vn, c) == reject {
			s.frames[top].phase = oBeforeValue
			return reject
		}
		return accept
	case oAfterValue:
		switch c {
		case ',':
			if free || (f.a+1 < int32(len(n.props)) && s.keyFrom(n, f.a+1)) {
				f.ws, f.phase = 0, oBeforeKey
				return accept
			}
			return reject
		case '}':
			if canClose {
				return acceptPop
			}
			return reject
		}
		return white(f, c)
	}
	return reject
}

// startKey begins a key after its opening quote.
func (s *State) startKey(f *frame, n *node) result {
	if n.addl >= 0 {
		if !s.fits(n.addl) {
			return reject
		}
		f.phase = oKeyFree
		s.frames = append(s.frames, frame{kind: fString, node: nAnyString})
		return accept
	}
	if int(f.a+1) >= len(n.props) || !s.keyFrom(n, f.a+1) {
		return reject
	}
	f.phase, f.b, f.n = oKeyMatch, f.a+1, 0
	return accept
}

func (s *State) array(c byte) result {
	top := len(s.frames) - 1
	f := &s.frames[top]
	n := &s.g.nodes[f.node]
	switch f.phase {
	case aOpen, aBeforeValue:
		if isWS(c) {
			return white(f, c)
		}
		if c == ']' && f.phase == aOpen && n.minItems == 0 {
			return acceptPop
		}
		if n.maxItems >= 0 && f.n >= n.maxItems {
			return reject
		}
		old := f.phase
		f.ws, f.phase = 0, aValue
		if s.startValue(n.items, c) == reject {
			s.frames[top].phase = old
			return reject
		}
		return accept
	case aAfterValue:
		switch c {
		case ',':
			if n.maxItems < 0 || f.n < n.maxItems {
				f.ws, f.phase = 0, aBeforeValue
				return accept
			}
			return reject
		case ']':
			if f.n >= n.minItems {
				return acceptPop
			}
			return reject
		}
		return white(f, c)
	}
	return reject
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// utf8Lead returns, for a UTF-8 lead byte, the continuation bytes that
// follow and the range of the first (excluding overlong forms, surrogates
// and code points past U+10FFFF, as RFC 3629); need 0: not a lead byte.
func utf8Lead(c byte) (need, lo, hi uint8) {
	switch {
	case c < 0xC2 || c > 0xF4:
		return 0, 0, 0
	case c < 0xE0:
		need = 1
	case c < 0xF0:
		need = 2
	default:
		need = 3
	}
	lo, hi = 0x80, 0xBF
	switch c {
	case 0xE0: // no overlong 3-byte forms
		lo = 0xA0
	case 0xED: // no surrogates
		hi = 0x9F
	case 0xF0: // no overlong 4-byte forms
		lo = 0x90
	case 0xF4: // nothing past U+10FFFF
		hi = 0x8F
	}
	return need, lo, hi
}

func (s *State) str(c byte) result {
	f := &s.frames[len(s.frames)-1]
	n := &s.g.nodes[f.node]
	if n.re != nil {
		return strPattern(f, n.re.d, c)
	}
	counted := n.minLen > 0 || n.maxLen >= 0
	room := !counted || n.maxLen < 0 || f.n < n.maxLen
	char := func() {
		if counted {
			f.n++
		}
	}
	switch f.phase {
	case sBody:
		switch {
		case c == '"':
			if f.n >= n.minLen {
				return acceptPop
			}
			return reject
		case !room || c < 0x20:
			return reject
		case c == '\\':
			f.phase = sEsc
		case c < 0x80:
			f.hi = 0
			char()
		default:
			need, lo, hi := utf8Lead(c)
			if need == 0 {
				return reject
			}
			f.phase, f.u, f.lo, f.hi = sUTF8, need, lo, hi
			char()
		}
		return accept
	case sEsc:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.phase, f.hi = sBody, 0
		case 'u':
			f.phase, f.u = sHex, 4
		default:
			return reject
		}
		char()
		return accept
	case sHex:
		// f.lo classifies the escape by its first two digits (1: D, 2: a
		// high surrogate D800-DBFF, 3: a low one DC00-DFFF); f.hi is 1
		// right after a high surrogate's escape. A pair is one code point.
		if !isHex(c) {
			return reject
		}
		switch f.u {
		case 4:
			f.lo = 0
			if c == 'd' || c == 'D' {
				f.lo = 1
			}
		case 3:
			switch {
			case f.lo != 1:
			case c >= '8' && c <= '9', c >= 'a' && c <= 'b', c >= 'A' && c <= 'B':
				f.lo = 2
			case c >= 'c' && c <= 'f', c >= 'C' && c <= 'F':
				f.lo = 3
			default:
				f.lo = 0
			}
		}
		if f.u--; f.u == 0 {
			if f.lo == 3 && f.hi == 1 && counted {
				f.n-- // the second half of a surrogate pair
			}
			f.hi = 0
			if f.lo == 2 {
				f.hi = 1
			}
			f.phase, f.lo = sBody, 0
		}
		return accept
	case sUTF8:
		if c < f.lo || c > f.hi {
			return reject
		}
		f.lo, f.hi = 0x80, 0xBF
		if f.u--; f.u == 0 {
			f.phase, f.lo, f.hi = sBody, 0, 0
		}
		return accept
	}
	return reject
}

// feasible reports whether the digits of a bounded integer so far
// (magnitude p, digits long, negative when neg) can still end inside the
// node's range: some p·10^k + j, 0 <= j < 10^k, within it, with at most
// MaxIntDigits digits; p 0 cannot grow (no leading zeros).
func feasible(n *node, neg bool, p int64, digits int32) bool {
	mlo, mhi := max(n.lo, 0), n.hi // the magnitudes allowed
	if neg {
		mlo, mhi = max(-n.hi, 0), -n.lo
	}
	if mhi < mlo {
		return false
	}
	base, span := p, int64(0)
	for {
		if base > mhi {
			return false
		}
		if span >= mlo-base { // base+span >= mlo, without overflow
			return true
		}
		if p == 0 || digits >= MaxIntDigits || base > math.MaxInt64/10 {
			return false
		}
		base, span, digits = base*10, span*10+9, digits+1
	}
}

// fixed is a number i + f/10^6 (i its floor, 0 <= f < 10^6), for bounded
// numbers; the order of the pairs is the order of the numbers.
type fixed struct {
	i int64
	f int32
}

func (a fixed) less(b fixed) bool { return a.i < b.i || a.i == b.i && a.f < b.f }

// neg returns -a in the same form (i the floor).
func (a fixed) neg() fixed {
	if a.f == 0 {
		return fixed{-a.i, 0}
	}
	return fixed{-(a.i + 1), fracUnits - a.f}
}

// fracUnits is 10^MaxRangeFracDigits.
const fracUnits = 1_000_000

// pow10 is 10^0 .. 10^MaxRangeFracDigits.
var pow10 = [...]int32{1, 10, 100, 1000, 10000, 100000, 1000000}

// numMagnitudes returns the magnitudes a bounded number's range allows
// (mhi < mlo: none), negated for a number written with a minus sign (its
// magnitude 0, "-0", is 0).
func numMagnitudes(n *node, neg bool) (mlo, mhi fixed) {
	mlo, mhi = fixed{n.lo, n.loF}, fixed{n.hi, n.hiF}
	if neg {
		mlo, mhi = mhi.neg(), mlo.neg()
	}
	if mlo.less(fixed{}) {
		mlo = fixed{}
	}
	return mlo, mhi
}

// numFeasible reports whether the output of a bounded number so far can
// still end inside the node's range, with at most MaxIntDigits integer
// and MaxRangeFracDigits fraction digits. fd < 0: inside the integer part
// p, digits long (more digits may follow, then a fraction); fd >= 0: fd
// fraction digits frac written after p and the point (0: just the point;
// digits may follow up to MaxRangeFracDigits).
func numFeasible(n *node, neg bool, p int64, digits, frac, fd int32) bool {
	mlo, mhi := numMagnitudes(n, neg)
	if mhi.less(mlo) {
		return false
	}
	if fd >= 0 { // p.frac, then up to MaxRangeFracDigits-fd digits: [a, b]
		step := pow10[MaxRangeFracDigits-fd]
		a := fixed{p, frac * step}
		b := fixed{p, a.f + step - 1}
		return !mhi.less(a) && !b.less(mlo)
	}
	// More integer digits, then any fraction: p·10^k + j + x, 0 <= j <
	// 10^k, 0 <= x < 1; p 0 cannot grow (no leading zeros).
	base, span := p, int64(0)
	for {
		if base > mhi.i {
			return false
		}
		if span >= mlo.i-base { // base+span >= mlo.i, without overflow
			return true
		}
		if p == 0 || digits >= MaxIntDigits || base > math.MaxInt64/10 {
			return false
		}
		base, span, digits = base*10, span*10+9, digits+1
	}
}

// numIn reports whether the bounded number written, integer part p and
// fd fraction digits frac (fd 0: none), lies in the node's range.
func numIn(n *node, neg bool, p int64, frac, fd int32) bool {
	mlo, mhi := numMagnitudes(n, neg)
	v := fixed{p, frac * pow10[MaxRangeFracDigits-fd]}
	return !v.less(mlo) && !mhi.less(v)
}

func (s *State) number(c byte) result {
	f := &s.frames[len(s.frames)-1]
	nd := &s.g.nodes[f.node]
	integer := nd.kind == kInteger
	ranged := nd.bounded && !integer // no exponent, at most MaxRangeFracDigits fraction digits
	digit := c >= '0' && c <= '9'
	next := func(p uint8, n int32) result {
		if nd.bounded && (p == nZero || p == nInt) {
			switch d := int64(c - '0'); {
			case p == nZero:
				f.val = 0
			case f.val > (math.MaxInt64-d)/10:
				return reject
			default:
				f.val = f.val*10 + d
			}
			if integer && !feasible(nd, f.u == 1, f.val, n) || ranged && !numFeasible(nd, f.u == 1, f.val, n, 0, -1) {
				return reject
			}
		}
		if ranged && (p == nDot || p == nFrac) {
			if p == nFrac {
				f.a = f.a*10 + int32(c-'0')
			}
			if !numFeasible(nd, f.u == 1, f.val, -1, f.a, n) {
				return reject
			}
		}
		f.phase, f.n = p, n
		return accept
	}
	switch f.phase {
	case nStart, nMinus:
		switch {
		case c == '-' && f.phase == nStart && (!nd.bounded || nd.lo < 0):
			// A bounded number: lo < 0 (its floor) is a negative lower
			// bound, as xgrammar allows the sign only then.
			f.u = 1
			return next(nMinus, 0)
		case c == '0':
			return next(nZero, 0)
		case digit:
			return next(nInt, 1)
		}
		return reject
	case nZero, nInt:
		switch {
		case digit && f.phase == nInt && f.n < MaxIntDigits:
			return next(nInt, f.n+1)
		case c == '.' && !integer:
			return next(nDot, 0)
		case (c == 'e' || c == 'E') && !integer && !ranged:
			return next(nExp, 0)
		}
	case nDot:
		if digit {
			return next(nFrac, 1)
		}
		return reject
	case nFrac:
		switch {
		case digit && (ranged && f.n < MaxRangeFracDigits || !ranged && f.n < MaxFracDigits):
			return next(nFrac, f.n+1)
		case (c == 'e' || c == 'E') && !ranged:
			return next(nExp, 0)
		}
	case nExp:
		switch {
		case c == '+' || c == '-':
			return next(nExpSign, 0)
		case digit:
			return next(nExpDigits, 1)
		}
		return reject
	case nExpSign:
		if digit {
			return next(nExpDigits, 1)
		}
		return reject
	case nExpDigits:
		if digit && f.n < MaxExpDigits {
			return next(nExpDigits, f.n+1)
		}
	}
	if s.completable(f) && !digit {
		return popRetry
	}
	return reject
}

func (s *State) literal(c byte) result {
	f := &s.frames[len(s.frames)-1]
	lits := s.g.nodes[f.node].lits
	pos := int(f.n)
	// lits[f.a..f.b] share their first pos bytes; the one of length pos, if
	// any, is lits[f.a]. Narrow to those whose byte at pos is c.
	lo := int(f.a)
	if len(lits[lo]) == pos {
		lo++
	}
	for lo <= int(f.b) && lits[lo][pos] < c {
		lo++
	}
	hi := lo
	for hi <= int(f.b) && lits[hi][pos] == c {
		hi++
	}
	if hi > lo {
		f.a, f.b, f.n = int32(lo), int32(hi-1), f.n+1
		return accept
	}
	if s.completable(f) {
		return popRetry
	}
	return reject
}

// canRune reports whether the character (code point) of some JSON string
// escape \uXXXX with code unit in [lo, hi] can continue a match from
// state st of d, outside a surrogate pair: the code units that are
// characters themselves, and the high surrogates, which stand for the
// characters U+10000-U+10FFFF their pair can make. A lone low surrogate
// is not a character.
func canRune(d *regexgrammar.RuneDFA, st int32, lo, hi rune) bool {
	if lo <= 0xD7FF && d.CanAccept(st, lo, min(hi, 0xD7FF)) {
		return true
	}
	if hi >= 0xE000 && d.CanAccept(st, max(lo, 0xE000), hi) {
		return true
	}
	if a, b := max(lo, 0xD800), min(hi, 0xDBFF); a <= b {
		return d.CanAccept(st, 0x10000+(a-0xD800)<<10, 0x10000+(b-0xD800)<<10+0x3FF)
	}
	return false
}

// strPattern steps a string frame whose node has a pattern (or format):
// the JSON text is decoded as it comes (escapes, surrogate pairs, UTF-8)
// and each character is fed to the pattern's automaton, whose state is
// f.a. A byte is accepted only when some character it begins can
// continue a match, so the string can always be completed: f.b holds the
// bits of the character or code unit being read, f.u the hex digits or
// continuation bytes left, f.lo/f.hi the range of the next continuation
// byte, f.val a pending high surrogate (0: none). Lengths are not counted
// (pattern and format are not supported beside minLength / maxLength).
func strPattern(f *frame, d *regexgrammar.RuneDFA, c byte) result {
	feed := func(r rune) result {
		nx := d.Next(f.a, r)
		if nx < 0 {
			return reject
		}
		f.a, f.b, f.phase = nx, 0, sBody
		return accept
	}
	switch f.phase {
	case sBody:
		switch {
		case c == '"':
			if d.Accepting(f.a) {
				return acceptPop
			}
			return reject
		case c < 0x20:
			return reject
		case c == '\\':
			// Every character but a surrogate can be escaped (\uXXXX).
			if !canRune(d, f.a, 0, 0xFFFF) {
				return reject
			}
			f.phase = sEsc
			return accept
		case c < 0x80:
			return feed(rune(c))
		}
		need, lo, hi := utf8Lead(c)
		if need == 0 {
			return reject
		}
		// The characters this lead byte begins, with the first
		// continuation byte in [lo, hi].
		shift := 6 * uint(need)
		v := rune(c) & (0x3F >> need)
		rlo := v<<shift | rune(lo-0x80)<<(shift-6)
		rhi := v<<shift | rune(hi-0x80)<<(shift-6) | (1<<(shift-6) - 1)
		if !d.CanAccept(f.a, rlo, rhi) {
			return reject
		}
		f.phase, f.u, f.lo, f.hi, f.b = sUTF8, need, lo, hi, int32(v)
		return accept
	case sUTF8:
		if c < f.lo || c > f.hi {
			return reject
		}
		b := f.b<<6 | int32(c&0x3F)
		if f.u == 1 {
			f.u, f.lo, f.hi = 0, 0, 0
			return feed(rune(b))
		}
		shift := 6 * uint(f.u-1)
		if !d.CanAccept(f.a, rune(b)<<shift, rune(b)<<shift|(1<<shift-1)) {
			return reject
		}
		f.b, f.u, f.lo, f.hi = b, f.u-1, 0x80, 0xBF
		return accept
	case sEsc:
		var r rune
		switch c {
		case '"', '\\', '/':
			r = rune(c)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			f.phase, f.u, f.b = sHex, 4, 0
			return accept
		default:
			return reject
		}
		return feed(r)
	case sLow1:
		if c != '\\' {
			return reject
		}
		f.phase = sLow2
		return accept
	case sLow2:
		if c != 'u' {
			return reject
		}
		f.phase, f.u, f.b = sHex, 4, 0
		return accept
	case sHex:
		var h int32
		switch {
		case c >= '0' && c <= '9':
			h = int32(c - '0')
		case c >= 'a' && c <= 'f':
			h = int32(c-'a') + 10
		case c >= 'A' && c <= 'F':
			h = int32(c-'A') + 10
		default:
			return reject
		}
		cu := f.b<<4 | h
		left := f.u - 1
		shift := 4 * uint(left)
		lo, hi := rune(cu)<<shift, rune(cu)<<shift|(1<<shift-1)
		if f.val != 0 { // the low half of a pair
			a, b := max(lo, 0xDC00), min(hi, 0xDFFF)
			high := rune(f.val-0xD800) << 10
			if a > b || !d.CanAccept(f.a, 0x10000+high+(a-0xDC00), 0x10000+high+(b-0xDC00)) {
				return reject
			}
			if left == 0 {
				f.val, f.u = 0, 0
				return feed(0x10000 + high + (lo - 0xDC00))
			}
		} else {
			if !canRune(d, f.a, lo, hi) {
				return reject
			}
			if left == 0 {
				f.u = 0
				if lo >= 0xD800 && lo <= 0xDBFF {
					f.val, f.b, f.phase = int64(lo), 0, sLow1
					return accept
				}
				return feed(lo)
			}
		}
		f.b, f.u = cu, left
		return accept
	}
	return reject
}
