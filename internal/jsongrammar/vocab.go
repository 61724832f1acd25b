package jsongrammar

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/dsv4go/dsv4go/internal/maskwalk"
	"github.com/dsv4go/dsv4go/internal/regexgrammar"
)

// trie is a byte trie of token strings, children stored contiguously.
type trie struct {
	nodes []trieNode
	label []byte  // label[i]: the byte on the edge into node i
	ids   []int32 // token ids, grouped by the node they end at
}

type trieNode struct {
	child, nChild int32 // children are nodes[child : child+nChild]
	tok, nTok     int32 // tokens ending here are ids[tok : tok+nTok]
}

type entry struct {
	b  []byte
	id int32
}

// buildTrie builds the trie of entries (sorted by bytes, then id).
func buildTrie(es []entry) *trie {
	nodes, label, ids := buildTrieOf(len(es), func(i int) []byte { return es[i].b }, func(i int) int32 { return es[i].id })
	return &trie{nodes: nodes, label: label, ids: ids}
}

// buildTrieOf builds a trie over n keys, key(i) with token id(i), sorted by
// key then id: node i's children are nodes[child : child+nChild], its
// tokens ids[tok : tok+nTok], label[i] the element on the edge into it
// (label[0], the root's, is 0). Breadth first over ranges of keys sharing a
// prefix: node covers keys lo .. hi-1 at depth d.
func buildTrieOf[E byte | rune](n int, key func(int) []E, id func(int) int32) (nodes []trieNode, label []E, ids []int32) {
	nodes, label = []trieNode{{}}, []E{0}
	type job struct{ node, lo, hi, d int32 }
	q := []job{{0, 0, int32(n), 0}}
	for len(q) > 0 {
		j := q[0]
		q = q[1:]
		lo := j.lo
		nodes[j.node].tok = int32(len(ids))
		for lo < j.hi && int32(len(key(int(lo)))) == j.d {
			ids = append(ids, id(int(lo)))
			lo++
		}
		nodes[j.node].nTok = int32(len(ids)) - nodes[j.node].tok
		nodes[j.node].child = int32(len(nodes))
		for lo < j.hi {
			c := key(int(lo))[j.d]
			hi := lo + 1
			for hi < j.hi && key(int(hi))[j.d] == c {
				hi++
			}
			nodes = append(nodes, trieNode{})
			label = append(label, c)
			q = append(q, job{int32(len(nodes) - 1), lo, hi, j.d + 1})
			nodes[j.node].nChild++
			lo = hi
		}
	}
	return nodes, label, ids
}

// Vocab is a tokenizer's vocabulary prepared for masking: the tries of its
// tokens' bytes. Build it once per tokenizer; it is immutable and safe for
// concurrent use.
type Vocab struct {
	size  int
	all   *trie     // every token given
	other *trie     // the tokens that are not plain
	runes *runeTrie // the plain tokens, by their characters
	plain []uint64  // bitset of plain tokens
	chars []uint16  // code points of each plain token (0: not plain)
}

// runeTrie is a trie of the plain tokens' characters (code points), for
// walking a pattern's automaton inside a string body.
type runeTrie struct {
	nodes []trieNode
	label []rune
	ids   []int32
}

// buildRuneTrie builds the trie of entries, whose bytes are plain tokens,
// by their characters.
func buildRuneTrie(es []entry) *runeTrie {
	type rentry struct {
		r  []rune
		id int32
	}
	rs := make([]rentry, len(es))
	for i, e := range es {
		rs[i] = rentry{[]rune(string(e.b)), e.id}
	}
	slices.SortFunc(rs, func(x, y rentry) int {
		if c := slices.Compare(x.r, y.r); c != 0 {
			return c
		}
		return int(x.id - y.id)
	})
	nodes, label, ids := buildTrieOf(len(rs), func(i int) []rune { return rs[i].r }, func(i int) int32 { return rs[i].id })
	return &runeTrie{nodes: nodes, label: label, ids: ids}
}

// walkRunes sets in dst the tokens of the subtree of node ni whose
// characters the automaton d takes from state st.
func (t *runeTrie) walkRunes(ni int32, d *regexgrammar.RuneDFA, st int32, dst []uint64) {
	nd := t.nodes[ni]
	for c := nd.child; c < nd.child+nd.nChild; c++ {
		nx := d.Next(st, t.label[c])
		if nx < 0 {
			continue
		}
		ch := t.nodes[c]
		for _, id := range t.ids[ch.tok : ch.tok+ch.nTok] {
			dst[id/64] |= 1 << (id % 64)
		}
		if ch.nChild > 0 {
			t.walkRunes(c, d, nx, dst)
		}
	}
}

// plainToken reports whether b, inside a JSON string's body, is accepted
// byte by byte and leaves the string's body as it was: printable ASCII
// other than '"' and '\\', and complete UTF-8 characters.
func plainToken(b []byte) bool {
	for len(b) > 0 {
		c := b[0]
		if c < 0x80 {
			if c < 0x20 || c == '"' || c == '\\' || c == 0x7F {
				return false
			}
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		b = b[n:]
	}
	return true
}

// NewVocab prepares tokens[id], the bytes of each token id (what the
// detokenizer produces for it alone), for masking. Nil or empty entries
// (special and added tokens, unknown ids) are never allowed by Allowed.
func NewVocab(tokens [][]byte) *Vocab {
	v := &Vocab{size: len(tokens), plain: make([]uint64, (len(tokens)+63)/64), chars: make([]uint16, len(tokens))}
	var all, other, plain []entry
	for id, b := range tokens {
		if len(b) == 0 {
			continue
		}
		e := entry{b, int32(id)}
		all = append(all, e)
		if plainToken(b) && utf8.RuneCount(b) < 1<<16 {
			v.plain[id/64] |= 1 << (id % 64)
			v.chars[id] = uint16(utf8.RuneCount(b))
			plain = append(plain, e)
		} else {
			other = append(other, e)
		}
	}
	cmp := func(x, y entry) int {
		if c := bytes.Compare(x.b, y.b); c != 0 {
			return c
		}
		return int(x.id - y.id)
	}
	slices.SortFunc(all, cmp)
	slices.SortFunc(other, cmp)
	v.all, v.other, v.runes = buildTrie(all), buildTrie(other), buildRuneTrie(plain)
	return v
}

// Size is the number of token ids (the length given to NewVocab).
func (v *Vocab) Size() int { return v.size }

// Words is the length in uint64 words of an Allowed bitset.
func (v *Vocab) Words() int { return (v.size + 63) / 64 }

// walker holds the per-depth states of one trie walk.
type walker struct {
	levels []*State
	b      maskwalk.Budget // work left (see MaxMaskWork) and depth limit
}

var walkers = sync.Pool{New: func() any { return &walker{} }}

// MaxMaskWork bounds the work of one mask's trie walk: each byte fed to a
// state of T threads and F frames in all costs 16 + F + T*T (threads are
// compared pairwise to merge equal ones), about 1.3 ns each on a 2-core
// dev box. Where many alternatives stay live inside
// strings (an anyOf of 128 strings with patterns `.{0,N}` or `[^a]*`: every
// trie node fed to 128 threads) a full walk cost 5-6 s per decode step on
// DeepSeek-V4's vocabulary; past the bound a mask costs at most about
// twice it (~0.2 s): the 128 strings case 0.3 s per step.
const MaxMaskWork = 1 << 26

// Allowed sets in dst (a bitset of Words() words, cleared first) the ids of
// the tokens whose bytes s accepts, in full, from its current position.
// It does not consider end-of-sequence tokens: the caller allows them when
// s.Accepting(). Cost: a walk of the token trie pruned at the first byte
// s rejects; inside a string body the plain tokens (printable ASCII without
// quote or backslash, whole UTF-8 characters) are allowed at once (those
// short enough for maxLength) and only the others walked; inside the body
// of a string with a pattern or format (one thread), the plain tokens are
// walked by their characters on the pattern's automaton alone (all of them
// at once where every such character loops back to its state). When the
// walk would cost more than MaxMaskWork, the tokens walked are only those
// of at most d bytes, d the largest whose walks (d = 1, 2, ... in turn) fit
// in another MaxMaskWork (at least the tokens of one byte, or the shortest
// that s accepts): a subset of the exact mask, empty only when it is.
func (v *Vocab) Allowed(s *State, dst []uint64) {
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	maskwalk.Bounded(&w.b, MaxMaskWork, dst, func(dst []uint64) { v.allowed(w, s, dst) })
}

// allowed is Allowed under w's budget and depth limit.
func (v *Vocab) allowed(w *walker, s *State, dst []uint64) {
	clear(dst)
	t := v.all
	if p, st, ok := s.patternBody(); ok {
		t = v.other
		switch room := p.room[st]; {
		case room == -1:
			copy(dst, v.plain)
		case room >= 0:
			v.plainUpTo(int(room), dst)
		default:
			v.runes.walkRunes(0, p.d, st, dst)
		}
	} else if room, ok := s.stringRoom(); ok {
		t = v.other
		if room < 0 {
			copy(dst, v.plain)
		} else {
			v.plainUpTo(room, dst)
		}
	}
	if len(w.levels) == 0 {
		w.levels = append(w.levels, &State{})
	}
	w.levels[0].CopyFrom(s)
	w.walk(t, 0, 0, dst)
}

// plainUpTo sets in dst the plain tokens of at most room characters.
func (v *Vocab) plainUpTo(room int, dst []uint64) {
	for id, n := range v.chars {
		if n > 0 && int(n) <= room {
			dst[id/64] |= 1 << (id % 64)
		}
	}
}

func (w *walker) walk(t *trie, ni int32, depth int, dst []uint64) {
	nd := t.nodes[ni]
	if depth+1 >= len(w.levels) {
		w.levels = append(w.levels, &State{})
	}
	parent, st := w.levels[depth], w.levels[depth+1]
	threads := max(1, len(parent.ends))
	cost := 16 + len(parent.frames) + len(parent.all) + threads*threads
	for c := nd.child; c < nd.child+nd.nChild; c++ {
		if w.b.Left -= cost; w.b.Left < 0 {
			w.b.Over = true
			return
		}
		st.CopyFrom(parent)
		if !st.Feed(t.label[c]) {
			continue
		}
		ch := t.nodes[c]
		for _, id := range t.ids[ch.tok : ch.tok+ch.nTok] {
			dst[id/64] |= 1 << (id % 64)
		}
		if ch.nChild > 0 {
			if depth+1 == w.b.Depth {
				w.b.Deeper = true
				continue
			}
			w.walk(t, c, depth+1, dst)
			if w.b.Over {
				return
			}
		}
	}
}

// Masker computes Allowed for the states of one grammar and caches the
// results by state (the states of a JSON output repeat: every character of
// a string body is the same state), up to MaxCachedMasks bitsets. It is
// safe for concurrent use, e.g. by the n choices of one request.
type Masker struct {
	v     *Vocab
	mu    sync.Mutex
	cache map[string][]uint64
	bytes int // the cache's entries: bitsets, keys and map overhead
}

// MaxCachedMasks bounds a Masker's cache (each entry is Vocab.Words()
// words: 16 KiB for DeepSeek's 129,280 ids).
const MaxCachedMasks = 256

// NewMasker returns a Masker over v.
func NewMasker(v *Vocab) *Masker {
	return &Masker{v: v, cache: map[string][]uint64{}}
}

// Allowed returns the allowed-token bitset of s (see Vocab.Allowed). The
// result is shared: the caller must not modify it. key is scratch space
// for the state's key, returned for reuse.
func (m *Masker) Allowed(s *State, key []byte) ([]uint64, []byte) {
	key = s.AppendKey(key[:0])
	m.mu.Lock()
	bits, ok := m.cache[string(key)]
	m.mu.Unlock()
	if ok {
		return bits, key
	}
	bits = make([]uint64, m.v.Words())
	m.v.Allowed(s, bits)
	m.mu.Lock()
	if len(m.cache) >= MaxCachedMasks {
		clear(m.cache)
		m.bytes = 0
	}
	if _, ok := m.cache[string(key)]; !ok {
		m.bytes += 64 + len(key) + 8*len(bits)
	}
	m.cache[string(key)] = bits
	m.mu.Unlock()
	return bits, key
}

// Bytes is an estimate of the memory m's cache holds now, in bytes (the
// Vocab excluded): at most MaxCachedMasks bitsets of Vocab.Words() words
// with their keys.
func (m *Masker) Bytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return 64 + m.bytes
}

// FeedBytes feeds every byte of b to s and reports whether s accepted them
// all.
func (s *State) FeedBytes(b []byte) bool {
	for _, c := range b {
		if !s.Feed(c) {
			return false
		}
	}
	return true
}
