package disagg

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Policy picks a worker for a request among candidates; RouterConfig.Picker
// makes a Router use one of your own. The Router passes
// only healthy workers and never an empty list; the policies of NewPolicy,
// called directly (a router of one's own), skip nil entries and return nil
// when no worker is left, rather than panic. key is the request's cache key
// (the text of its messages) for cache-aware selection.
type Policy interface {
	Pick(cands []*Worker, key string) *Worker
}

// NewPolicy returns the named policy: "random", "round_robin",
// "power_of_two" (the less loaded of two random workers) or "cache_aware"
// (SGLang's: the worker whose prefix tree matches the most of the request,
// above a 0.3 match ratio, unless load is imbalanced by more than 64
// requests and 1.5×, when the least loaded wins).
func NewPolicy(name string) (Policy, error) {
	switch name {
	case "", "round_robin":
		return &roundRobin{}, nil
	case "random":
		return randomPolicy{}, nil
	case "power_of_two":
		return powerOfTwo{}, nil
	case "cache_aware":
		return NewCacheAware(0.3, 64, 1.5, 1<<22), nil
	}
	return nil, fmt.Errorf("disagg: unknown policy %q (want random, round_robin, power_of_two or cache_aware)", name)
}

// nonNil returns c without its nil entries (c itself when it has none).
func nonNil(c []*Worker) []*Worker {
	for i, w := range c {
		if w == nil {
			out := append([]*Worker(nil), c[:i]...)
			for _, w := range c[i+1:] {
				if w != nil {
					out = append(out, w)
				}
			}
			return out
		}
	}
	return c
}

type randomPolicy struct{}

func (randomPolicy) Pick(c []*Worker, _ string) *Worker {
	if c = nonNil(c); len(c) == 0 {
		return nil
	}
	return c[rand.IntN(len(c))]
}

type roundRobin struct{ n atomic.Uint64 }

func (p *roundRobin) Pick(c []*Worker, _ string) *Worker {
	if c = nonNil(c); len(c) == 0 {
		return nil
	}
	return c[int((p.n.Add(1)-1)%uint64(len(c)))]
}

type powerOfTwo struct{}

func (powerOfTwo) Pick(c []*Worker, _ string) *Worker {
	if c = nonNil(c); len(c) == 0 {
		return nil
	}
	if len(c) == 1 {
		return c[0]
	}
	i := rand.IntN(len(c))
	j := rand.IntN(len(c) - 1)
	if j >= i {
		j++
	}
	if c[j].InFlight() < c[i].InFlight() {
		return c[j]
	}
	return c[i]
}

// CacheAware is the cache-aware policy: an approximate radix tree of the
// request texts each worker served (edges of 16 bytes), so that requests
// sharing a prefix go where its KV cache likely is. Make one with
// NewCacheAware (NewPolicy("cache_aware") gives SGLang's settings); the zero
// value works, with every threshold and the byte bound 0.
type CacheAware struct {
	threshold float64
	absImb    int64
	relImb    float64
	maxBytes  int

	mu    sync.Mutex
	root  *trieNode
	bytes int
}

type trieNode struct {
	kids    map[string]*trieNode
	workers map[*Worker]struct{}
}

const trieEdge = 16

// NewCacheAware returns a cache-aware policy with the given match threshold,
// absolute and relative load-imbalance thresholds, and a bound on the bytes
// the tree indexes (the tree restarts empty when it is exceeded).
func NewCacheAware(threshold float64, absImbalance int64, relImbalance float64, maxBytes int) *CacheAware {
	return &CacheAware{threshold: threshold, absImb: absImbalance, relImb: relImbalance, maxBytes: maxBytes, root: newTrieNode()}
}

func newTrieNode() *trieNode {
	return &trieNode{kids: map[string]*trieNode{}, workers: map[*Worker]struct{}{}}
}

// Pick implements Policy (nil for no candidates).
func (p *CacheAware) Pick(c []*Worker, key string) *Worker {
	if c = nonNil(c); len(c) == 0 {
		return nil
	}
	least := c[0]
	most := c[0]
	for _, w := range c[1:] {
		if w.InFlight() < least.InFlight() {
			least = w
		}
		if w.InFlight() > most.InFlight() {
			most = w
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.root == nil { // a zero CacheAware: threshold 0, no imbalance rule
		p.root = newTrieNode()
	}
	chosen := least
	lo, hi := least.InFlight(), most.InFlight()
	imbalanced := hi-lo > p.absImb && float64(hi) > p.relImb*float64(lo)
	if !imbalanced && len(key) > 0 {
		// Deepest node reached by each candidate.
		best, bestLen := (*Worker)(nil), 0
		n := p.root
		for off := 0; off < len(key); off += trieEdge {
			k := key[off:min(off+trieEdge, len(key))]
			next := n.kids[k]
			if next == nil {
				break
			}
			n = next
			for _, w := range c {
				if _, ok := n.workers[w]; ok {
					best, bestLen = w, off+len(k)
				}
			}
		}
		if best != nil && float64(bestLen)/float64(len(key)) > p.threshold {
			chosen = best
		}
	}
	p.insert(key, chosen)
	return chosen
}

func (p *CacheAware) insert(key string, w *Worker) {
	if p.bytes+len(key) > p.maxBytes {
		p.root, p.bytes = newTrieNode(), 0
	}
	n := p.root
	for off := 0; off < len(key); off += trieEdge {
		k := key[off:min(off+trieEdge, len(key))]
		next := n.kids[k]
		if next == nil {
			next = newTrieNode()
			n.kids[k] = next
			p.bytes += len(k)
		}
		next.workers[w] = struct{}{}
		n = next
	}
}
