package regexgrammar

import (
	"bytes"
	"slices"
	"sync"

	"github.com/dsv4go/dsv4go/internal/maskwalk"
)

// Vocab is a tokenizer's vocabulary prepared for masking: a byte trie of
// its tokens. Build it once per tokenizer; it is immutable and safe for
// concurrent use.
type Vocab struct {
	size  int
	nodes []trieNode
	ids   []int32 // token ids, grouped by the node they end at
}

// trieNode is one node of the trie: its children are nodes[child :
// child+nChild], the tokens ending at it ids[tok : tok+nTok].
type trieNode struct {
	child, nChild, tok, nTok int32
	label                    byte // the byte on the edge into the node
}

// NewVocab prepares tokens[id], the bytes of each token id, for masking.
// Nil or empty entries (special and added tokens) are never allowed.
func NewVocab(tokens [][]byte) *Vocab {
	type entry struct {
		b  []byte
		id int32
	}
	var es []entry
	for id, b := range tokens {
		if len(b) > 0 {
			es = append(es, entry{b, int32(id)})
		}
	}
	slices.SortFunc(es, func(x, y entry) int {
		if c := bytes.Compare(x.b, y.b); c != 0 {
			return c
		}
		return int(x.id - y.id)
	})
	v := &Vocab{size: len(tokens), nodes: []trieNode{{}}}
	// Breadth first: node covers es[lo:hi], which share their first d bytes.
	type job struct{ node, lo, hi, d int32 }
	q := []job{{0, 0, int32(len(es)), 0}}
	for len(q) > 0 {
		j := q[0]
		q = q[1:]
		lo := j.lo
		nd := &v.nodes[j.node]
		nd.tok = int32(len(v.ids))
		for lo < j.hi && int32(len(es[lo].b)) == j.d {
			v.ids = append(v.ids, es[lo].id)
			lo++
		}
		nd.nTok = int32(len(v.ids)) - nd.tok
		nd.child = int32(len(v.nodes))
		for lo < j.hi {
			c := es[lo].b[j.d]
			hi := lo + 1
			for hi < j.hi && es[hi].b[j.d] == c {
				hi++
			}
			v.nodes = append(v.nodes, trieNode{label: c})
			v.nodes[j.node].nChild++
			q = append(q, job{int32(len(v.nodes) - 1), lo, hi, j.d + 1})
			lo = hi
		}
	}
	return v
}

// Size is the number of token ids (the length given to NewVocab).
func (v *Vocab) Size() int { return v.size }

// Words is the length in uint64 words of an Allowed bitset.
func (v *Vocab) Words() int { return (v.size + 63) / 64 }

// MaxMaskWork bounds the work of one mask: the threads advanced over the
// DFA transitions that are not cached yet (each transition costs its
// state's threads plus 64, about 25 ns each on a 2-core dev box). Patterns whose states are many and large
// (`(?s).*a.{100}`, `(.|..){0,300}`, `\p{L}{0,200}`: every trie node a new
// state) would otherwise cost 0.2-4 s per decode step on DeepSeek-V4's
// vocabulary; past the bound a mask costs at most a few times the bound.
const MaxMaskWork = 1 << 21

// Allowed sets in dst (Words() words, cleared first) the ids of the tokens
// whose bytes s accepts in full from its position. End-of-sequence tokens
// are the caller's: allow them when s.Accepting(). Cost: a walk of the
// token trie pruned at the first byte refused, each edge one cached DFA
// transition. When the walk would cost more than MaxMaskWork, only the
// tokens of at most d bytes are offered, d the largest whose walks (d = 1,
// 2, ... in turn) fit in another MaxMaskWork (at least the tokens of one
// byte, or the shortest that s accepts),
// so the mask is a subset of the exact one and is empty only when that
// one is.
func (v *Vocab) Allowed(s *State, dst []uint64) {
	var b maskwalk.Budget
	maskwalk.Bounded(&b, MaxMaskWork, dst, func(dst []uint64) { v.walk(s.g, 0, s.n, dst, 0, &b) })
}

// walk sets the tokens below trie node ni, at depth bytes, reached in DFA
// state n.
func (v *Vocab) walk(g *Grammar, ni int32, n *node, dst []uint64, depth int, b *maskwalk.Budget) {
	nd := v.nodes[ni]
	for c := nd.child; c < nd.child+nd.nChild; c++ {
		ch := &v.nodes[c]
		if n.next[ch.label].Load() == nil {
			if b.Left -= len(n.threads) + 64; b.Left < 0 {
				b.Over = true
				return
			}
		}
		nx := g.step(n, ch.label)
		if nx == g.dead {
			continue
		}
		for _, id := range v.ids[ch.tok : ch.tok+ch.nTok] {
			dst[id/64] |= 1 << (id % 64)
		}
		if ch.nChild > 0 {
			if depth+1 == b.Depth {
				b.Deeper = true
				continue
			}
			v.walk(g, c, nx, dst, depth+1, b)
			if b.Over {
				return
			}
		}
	}
}

// MaxCachedMasks bounds a Masker's cache (each entry Vocab.Words() words:
// 16 KiB for DeepSeek's 129,280 ids).
const MaxCachedMasks = 256

// Masker computes Allowed for the states of one Grammar and caches the
// results by DFA state, up to MaxCachedMasks bitsets. It is safe for
// concurrent use.
type Masker struct {
	v     *Vocab
	mu    sync.Mutex
	cache map[*node][]uint64
}

// NewMasker returns a Masker over v.
func NewMasker(v *Vocab) *Masker {
	return &Masker{v: v, cache: map[*node][]uint64{}}
}

// Allowed returns the allowed-token bitset of s (see Vocab.Allowed). The
// result is shared: the caller must not modify it.
func (m *Masker) Allowed(s *State) []uint64 {
	m.mu.Lock()
	bits, ok := m.cache[s.n]
	m.mu.Unlock()
	if ok {
		return bits
	}
	bits = make([]uint64, m.v.Words())
	m.v.Allowed(s, bits)
	if !s.n.interned {
		return bits
	}
	m.mu.Lock()
	if len(m.cache) >= MaxCachedMasks {
		clear(m.cache)
	}
	m.cache[s.n] = bits
	m.mu.Unlock()
	return bits
}

// Bytes is an estimate of the memory m's cache holds now, in bytes (the
// Vocab excluded): at most MaxCachedMasks bitsets of Vocab.Words() words.
func (m *Masker) Bytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return 64 + len(m.cache)*(48+8*m.v.Words())
}
