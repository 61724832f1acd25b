package tokenizer

import (
	"hash/maphash"
	"sync/atomic"
)

// maxCachedWord is the longest pre-token (bytes) whose BPE result is cached.
const maxCachedWord = 96

// wordCache is a bounded, lock-free, direct-mapped cache of BPE results: a slot holds
// the last word hashed to it. Readers never block; a collision just recomputes.
type wordCache struct {
	slots []atomic.Pointer[cacheEntry]
	mask  uint64
	seed  maphash.Seed
}

type cacheEntry struct {
	word string
	ids  []int32
}

func newWordCache(n int) *wordCache {
	return &wordCache{slots: make([]atomic.Pointer[cacheEntry], n), mask: uint64(n - 1), seed: maphash.MakeSeed()}
}

// bpeState is per-call scratch space for BPE.
type bpeState struct {
	ids   []int32
	ranks []uint32 // rank of the pair (ids[i], ids[i+1]); noRank when none
	sym   []symbol
	heap  []heapEntry
}

const noRank = ^uint32(0)

// appendWord appends the BPE ids of word (raw bytes, non-empty) to dst.
func (t *Tokenizer) appendWord(st *bpeState, word string, dst []int32) []int32 {
	if len(word) == 1 {
		return append(dst, t.byteID[word[0]])
	}
	if len(word) <= maxCachedWord {
		slot := &t.cache.slots[maphash.String(t.cache.seed, word)&t.cache.mask]
		if e := slot.Load(); e != nil && e.word == word {
			return append(dst, e.ids...)
		}
		n := len(dst)
		dst = t.bpe(st, word, dst)
		ids := make([]int32, len(dst)-n)
		copy(ids, dst[n:])
		slot.Store(&cacheEntry{word: word, ids: ids})
		return dst
	}
	return t.bpe(st, word, dst)
}

func (t *Tokenizer) mergeOf(a, b int32) (rank uint32, id int32, ok bool) {
	v, ok := t.merges[uint64(uint32(a))<<32|uint64(uint32(b))]
	return uint32(v >> 32), int32(uint32(v)), ok
}

// bpe merges word's bytes. The order is HF's Word::merge_all: lowest merge rank
// first, leftmost on ties.
func (t *Tokenizer) bpe(st *bpeState, word string, dst []int32) []int32 {
	if t.ignoreMerges {
		if id, ok := t.vocab[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) > 48 || !t.uniqueMerges {
		return t.bpeHeap(st, word, dst)
	}
	// Small words: scan for the best pair. With unique merge results this equals
	// HF's heap order (stale heap entries are exactly the pairs no longer adjacent).
	ids := st.ids[:0]
	for i := 0; i < len(word); i++ {
		ids = append(ids, t.byteID[word[i]])
	}
	ranks := st.ranks[:0]
	for i := 0; i+1 < len(ids); i++ {
		r, _, ok := t.mergeOf(ids[i], ids[i+1])
		if !ok {
			r = noRank
		}
		ranks = append(ranks, r)
	}
	for len(ids) > 1 {
		best, bi := noRank, -1
		for i, r := range ranks {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		_, nid, _ := t.mergeOf(ids[bi], ids[bi+1])
		ids[bi] = nid
		ids = append(ids[:bi+1], ids[bi+2:]...)
		ranks = append(ranks[:bi], ranks[bi+1:]...)
		if bi > 0 {
			if r, _, ok := t.mergeOf(ids[bi-1], ids[bi]); ok {
				ranks[bi-1] = r
			} else {
				ranks[bi-1] = noRank
			}
		}
		if bi < len(ranks) {
			if r, _, ok := t.mergeOf(ids[bi], ids[bi+1]); ok {
				ranks[bi] = r
			} else {
				ranks[bi] = noRank
			}
		}
	}
	st.ids, st.ranks = ids, ranks
	return append(dst, ids...)
}

type symbol struct {
	id         int32
	prev, next int32 // -1 at the ends
	live       bool
}

type heapEntry struct {
	key uint64 // rank<<32 | pos: min-heap on rank, then position
	id  int32  // the merge's result
}

// bpeHeap is HF's Word::merge_all, verbatim in behaviour: a min-heap of (rank, pos)
// with lazy deletion, an entry being stale when the pair now at pos does not merge
// into the same id.
func (t *Tokenizer) bpeHeap(st *bpeState, word string, dst []int32) []int32 {
	sym := st.sym[:0]
	for i := 0; i < len(word); i++ {
		sym = append(sym, symbol{id: t.byteID[word[i]], prev: int32(i - 1), next: int32(i + 1), live: true})
	}
	sym[len(sym)-1].next = -1
	h := st.heap[:0]
	for i := 0; i+1 < len(sym); i++ {
		if r, id, ok := t.mergeOf(sym[i].id, sym[i+1].id); ok {
			h = heapPush(h, heapEntry{uint64(r)<<32 | uint64(i), id})
		}
	}
	for len(h) > 0 {
		var top heapEntry
		top, h = heapPop(h)
		pos := int32(uint32(top.key))
		s := &sym[pos]
		if !s.live || s.next < 0 {
			continue
		}
		right := sym[s.next]
		if _, id, ok := t.mergeOf(s.id, right.id); !ok || id != top.id {
			continue
		}
		s.id = top.id
		sym[s.next].live = false
		s.next = right.next
		if right.next >= 0 {
			sym[right.next].prev = pos
		}
		if s.prev >= 0 {
			if r, id, ok := t.mergeOf(sym[s.prev].id, s.id); ok {
				h = heapPush(h, heapEntry{uint64(r)<<32 | uint64(uint32(s.prev)), id})
			}
		}
		if s.next >= 0 {
			if r, id, ok := t.mergeOf(s.id, sym[s.next].id); ok {
				h = heapPush(h, heapEntry{uint64(r)<<32 | uint64(uint32(pos)), id})
			}
		}
	}
	for i := int32(0); i >= 0; i = sym[i].next {
		dst = append(dst, sym[i].id)
	}
	st.sym, st.heap = sym, h
	return dst
}

func heapPush(h []heapEntry, e heapEntry) []heapEntry {
	h = append(h, e)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key <= h[i].key {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	return h
}

func heapPop(h []heapEntry) (heapEntry, []heapEntry) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].key < h[l].key {
			m = r
		}
		if h[i].key <= h[m].key {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}
