package dsv4

import "slices"

// DefaultPrefixCacheBytes is the prefix cache's byte budget when
// EngineOptions.PrefixCacheBytes is 0: 1 GiB of saved sequence states
// (with V4-Flash's geometry about forty 1K-token prompts, or one of 32K).
const DefaultPrefixCacheBytes int64 = 1 << 30

// Prefix-cache geometry, in tokens.
const (
	// prefixGrain is the granularity at which prompts are compared to find
	// where a new prompt leaves the cached ones (its branch point): vLLM's
	// default block size.
	prefixGrain = 16
	// prefixFirstCheckpoint is the first of the checkpoints a prompt's
	// prefill saves at 64, 128, 256, ... tokens (see prefixCache).
	prefixFirstCheckpoint = 64
)

// SnapshotBackend is an optional extension of Backend that automatic
// prefix caching needs (EngineOptions.PrefixCacheBytes): copying a
// sequence's whole state out, and a new sequence back in from such a copy.
// A Backend without it runs with prefix caching off. The Engine's Backend
// for a *Model (NewEngine) implements it with Sequence.Snapshot and
// Model.Restore.
type SnapshotBackend interface {
	Backend
	// Snapshot returns a deep copy of seq's state: later calls on seq do
	// not change it.
	Snapshot(seq BackendSequence) (BackendState, error)
	// Restore returns a new sequence holding a deep copy of st (st itself
	// is never changed nor shared).
	Restore(st BackendState) (BackendSequence, error)
}

// BackendState is a saved sequence state of a SnapshotBackend (for a
// *Model, a *SequenceState).
type BackendState interface {
	// Bytes is the memory the state holds, in bytes; the prefix cache
	// charges it to its budget.
	Bytes() int64
}

// prefixCache is the Engine's automatic prefix cache: a byte-budgeted LRU
// of whole sequence states, each saved after a prefix of some prompt and
// keyed by that prefix's tokens. It is owned by the scheduler goroutine (no
// locks); restoring copies the state into a new sequence, so no sequence
// ever shares a buffer with the cache.
//
// Why whole states and not vLLM's blocks: DeepSeek-V4's per-sequence state
// is not a list of per-token KV blocks that a prefix could share. Each
// layer holds a sliding window ring of the last sliding_window-1 tokens,
// and CSA/HCA layers hold compressed entries (one per m tokens), the open
// window's partial c/z buffers and, for CSA, the overlap halves of the last
// closed window, plus the lightning indexer's own compressor state: the
// state after a prefix depends on where the prefix ends, not only on the
// blocks before it. A SequenceState taken at position p is exactly the
// state a prefill of those p tokens leaves, so restoring it and prefilling
// the rest gives the same bits as prefilling the whole prompt (the forward
// pass is chunking-invariant: Model.Prefill's guarantee, tested by
// TestPrefixCacheMatchesUncached and the forward tests' uneven-chunk
// modes).
//
// Where states are saved (for a prompt of n tokens, above the restored
// prefix):
//   - at n, the whole prompt, with the last position's logits: the same
//     prompt again (a retried request, another choice, a batch of equal
//     prompts) restores and samples without running the model, and a
//     later, longer prompt (the next turn of a conversation) restores it
//     and prefills only what follows;
//   - at the branch point, the longest prefix (in 16-token units) that the
//     prompt shares with a cached prompt: the first time two prompts with a
//     common system prompt differ, the common part is saved, and every
//     later prompt sharing it restores it (SGLang's radix tree materialises
//     its nodes the same way);
//   - at 64, 128, 256, ... tokens (geometric checkpoints): a second prompt
//     sharing a prefix of L tokens with the first restores at least the
//     largest of them <= L (at least half of L once L >= 64). Their total
//     size is at most about twice the state at the last one, and they cost
//     a prefill-chunk split each.
//
// Lookup hashes the prompt once (a seeded 64-bit chained hash of every
// prefix, as vLLM chains block hashes) and compares the tokens of a
// candidate in full, so a hash collision can cost a miss, never a wrong
// state. Requests asking for prompt logprobs restore nothing (they need
// every prompt position's logits) but still save states.
type prefixCache struct {
	budget  int64
	bytes   int64
	seed    uint64
	entries map[prefixKey]*prefixEntry
	lens    map[int]int      // key length -> number of entries of that length
	grains  map[uint64]int32 // prefix hashes at multiples of prefixGrain of the keys -> count
	head    prefixEntry      // LRU list sentinel: head.next is the most recently used
}

// prefixKey identifies a prefix by its length and chained hash.
type prefixKey struct {
	n int
	h uint64
}

// prefixEntry is one saved state.
type prefixEntry struct {
	key        prefixKey
	toks       []int32 // the prefix (own copy)
	st         BackendState
	logits     []float32 // the logits after the prefix's last token (whole-prompt entries), else nil
	bytes      int64
	prev, next *prefixEntry
}

func newPrefixCache(budget int64, seed uint64) *prefixCache {
	c := &prefixCache{budget: budget, seed: seed, entries: map[prefixKey]*prefixEntry{},
		lens: map[int]int{}, grains: map[uint64]int32{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// prefixHash extends the chained hash h by token t (splitmix64's mixer).
func prefixHash(h uint64, t int32) uint64 {
	z := h ^ (uint64(uint32(t)) + 0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// prefixPlan is what a lookup finds for a prompt: the longest cached
// prefix to restore, and the positions past it where prefill saves states.
type prefixPlan struct {
	hit    *prefixEntry // nil: nothing to restore
	points []int        // ascending, in (hit length, len(prompt)]
}

// plan looks prompt up: the longest entry whose tokens are a prefix of
// prompt (the whole prompt only when the entry has its logits; none when
// read is false), and the save points of prefill past it that the cache
// does not hold yet.
func (c *prefixCache) plan(prompt []int32, read bool) prefixPlan {
	n := len(prompt)
	hs := make([]uint64, n+1)
	hs[0] = c.seed
	var pl prefixPlan
	hitLen, branch := 0, 0
	for i := 1; i <= n; i++ {
		hs[i] = prefixHash(hs[i-1], prompt[i-1])
		if i%prefixGrain == 0 && c.grains[hs[i]] > 0 {
			branch = i
		}
		if !read || c.lens[i] == 0 {
			continue
		}
		if e := c.entries[prefixKey{i, hs[i]}]; e != nil && slices.Equal(e.toks, prompt[:i]) && (i < n || e.logits != nil) {
			pl.hit, hitLen = e, i
		}
	}
	if pl.hit != nil {
		c.touch(pl.hit)
	}
	add := func(p int) {
		if p <= hitLen || p > n || slices.Contains(pl.points, p) {
			return
		}
		if e := c.entries[prefixKey{p, hs[p]}]; e != nil && slices.Equal(e.toks, prompt[:p]) && (p < n || e.logits != nil) {
			c.touch(e)
			return
		}
		pl.points = append(pl.points, p)
	}
	for p := prefixFirstCheckpoint; p < n; p *= 2 {
		add(p)
	}
	add(branch)
	add(n)
	slices.Sort(pl.points)
	return pl
}

// insert saves st as the state after toks (logits: those of the last
// token, or nil), evicting least recently used entries to stay within the
// budget. A state larger than the whole budget is not kept. It reports
// whether the entry was stored.
func (c *prefixCache) insert(toks []int32, st BackendState, logits []float32) bool {
	h := c.seed
	for _, t := range toks {
		h = prefixHash(h, t)
	}
	key := prefixKey{len(toks), h}
	size := st.Bytes() + 4*int64(len(toks)+len(logits))
	if size > c.budget {
		return false
	}
	if old := c.entries[key]; old != nil {
		if slices.Equal(old.toks, toks) && (logits == nil || old.logits != nil) {
			c.touch(old)
			return false
		}
		c.remove(old) // a hash collision, or the entry gains its logits
	}
	for c.bytes+size > c.budget && c.head.prev != &c.head {
		c.remove(c.head.prev)
	}
	e := &prefixEntry{key: key, toks: slices.Clone(toks), st: st, logits: slices.Clone(logits), bytes: size}
	c.entries[key] = e
	c.lens[key.n]++
	c.bytes += size
	c.countGrains(toks, 1)
	c.link(e)
	return true
}

// countGrains adds d to the count of each of toks' prefix hashes at
// multiples of prefixGrain.
func (c *prefixCache) countGrains(toks []int32, d int32) {
	h := c.seed
	for i, t := range toks {
		h = prefixHash(h, t)
		if (i+1)%prefixGrain != 0 {
			continue
		}
		if v := c.grains[h] + d; v > 0 {
			c.grains[h] = v
		} else {
			delete(c.grains, h)
		}
	}
}

func (c *prefixCache) remove(e *prefixEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(c.entries, e.key)
	if c.lens[e.key.n]--; c.lens[e.key.n] == 0 {
		delete(c.lens, e.key.n)
	}
	c.bytes -= e.bytes
	c.countGrains(e.toks, -1)
}

// link puts e at the front (most recently used).
func (c *prefixCache) link(e *prefixEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

func (c *prefixCache) touch(e *prefixEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	c.link(e)
}

// clear drops every entry.
func (c *prefixCache) clear() {
	for c.head.prev != &c.head {
		c.remove(c.head.prev)
	}
}
