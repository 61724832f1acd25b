package dsv4

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
	"github.com/dsv4go/dsv4go/internal/regexgrammar"
)

// DefaultConstraintCacheBytes is the default of
// EngineOptions.ConstraintCacheBytes: 512 MiB, the default of vLLM's
// VLLM_XGRAMMAR_CACHE_MB (the cache_limit_bytes its xgrammar backend gives
// xgrammar's GrammarCompiler).
const DefaultConstraintCacheBytes = 512 << 20

// MaxConstraintCacheEntries bounds the compiled constraints an Engine
// keeps (EngineOptions.ConstraintCacheBytes), whatever their size.
const MaxConstraintCacheEntries = 512

// Kinds of constraint, the first byte of a cache key.
const (
	conKindSchema     = "j" // a JSON schema (response_format, structured_outputs.json, tools' parameters, the required array)
	conKindJSONObject = "o" // json_object: any JSON object
	conKindRegex      = "r" // structured_outputs.regex, guided_regex
	conKindChoice     = "c" // structured_outputs.choice, guided_choice
)

// constraintCache keeps an Engine's compiled constraints by their kind and
// canonical bytes (a schema compacted by encoding/json, which keeps its
// keys in order; a regex's pattern; choices with their lengths), as vLLM's
// xgrammar backend keeps compiled grammars in its GrammarCompiler's cache:
// a request that repeats a schema (the usual case: a client sends the same
// response_format or tools with every request) gets the compiled
// constraint, its mask cache included, without compiling it again. A
// constraint being compiled is compiled once: concurrent requests for it
// wait for that compilation. A compilation that fails is not kept (the
// next request compiles again and gets the same error), nor is a regex
// whose cache of DFA states has filled up (regexgrammar's
// MaxCachedStates: the states its outputs reach beyond it would be
// computed again at every mask; a fresh compilation, as each request had
// without the cache, caches them again).
//
// The cache holds at most maxEntries constraints and, each time it is
// used and each time a constrained request ends (settle), evicts the least recently used ones until the memory they hold
// (OutputConstraint.bytes: the automaton, the DFA states a regex has
// cached so far and the masks cached per state; they grow while requests
// decode) is at most maxBytes. A constraint larger than maxBytes alone is
// served but not kept. It is safe for concurrent use; a nil
// *constraintCache compiles every constraint anew.
type constraintCache struct {
	maxBytes   int64
	maxEntries int

	mu       sync.Mutex
	entries  map[string]*conEntry // compiled and in-flight constraints by key
	lru      list.List            // the compiled ones (*conEntry), most recently used first
	settling atomic.Bool          // a settle is pending
	hits     int64                // constraints served without compiling (kept, or compiled by a concurrent request)
	misses   int64                // compilations started
}

// conEntry is one constraint of the cache: in flight until done is
// closed, then con or err.
type conEntry struct {
	key  string
	done chan struct{}
	con  *OutputConstraint
	err  error
	elem *list.Element // in lru; nil while in flight
	size int64         // entryBytes when last measured (trim)
}

// newConstraintCache returns a cache of at most maxEntries constraints
// holding at most maxBytes.
func newConstraintCache(maxBytes int64, maxEntries int) *constraintCache {
	return &constraintCache{maxBytes: maxBytes, maxEntries: maxEntries, entries: map[string]*conEntry{}}
}

// get returns the constraint of key, compiling it with compile on a miss
// (or waiting for the request already compiling it). compile's error is
// returned as it is, and not kept.
func (cc *constraintCache) get(key string, compile func() (*OutputConstraint, error)) (*OutputConstraint, error) {
	if cc == nil {
		return compile()
	}
	cc.mu.Lock()
	if e, ok := cc.entries[key]; ok && e.elem != nil && e.con.saturated() {
		// A regex whose DFA cache is full would serve later requests'
		// new states uncached: they get a fresh one, as without the cache.
		cc.lru.Remove(e.elem)
		delete(cc.entries, key)
		e.elem = nil
	}
	if e, ok := cc.entries[key]; ok {
		if e.elem != nil {
			cc.lru.MoveToFront(e.elem)
			cc.hits++
			cc.trim()
			cc.mu.Unlock()
			return e.con, nil
		}
		cc.mu.Unlock()
		<-e.done
		if e.err == nil {
			cc.mu.Lock()
			cc.hits++ // served without compiling
			cc.mu.Unlock()
		}
		return e.con, e.err
	}
	e := &conEntry{key: key, done: make(chan struct{})}
	cc.entries[key] = e
	cc.misses++
	cc.mu.Unlock()
	ok := false
	defer func() {
		// On an error (or a panic in compile), the entry goes: waiters get
		// the error and the next request compiles again.
		cc.mu.Lock()
		if ok {
			e.elem = cc.lru.PushFront(e)
			cc.trim()
		} else {
			delete(cc.entries, key)
			if e.err == nil && e.con == nil {
				e.err = errConstraintCompile
			}
		}
		close(e.done)
		cc.mu.Unlock()
	}()
	e.con, e.err = compile()
	ok = e.err == nil && e.con != nil
	return e.con, e.err
}

// errConstraintCompile is what requests waiting on a compilation get if
// it ended without a constraint or an error (a panic).
var errConstraintCompile = errors.New("the constraint could not be compiled")

// trim evicts the constraints larger than maxBytes alone (a new one, or
// one whose caches grew while requests decoded: evicting the others first
// would empty the cache and still not keep it), then the least recently
// used ones until at most maxEntries remain, holding at most maxBytes.
// Each entry is measured once per trim (its size may grow meanwhile).
// cc.mu must be held.
func (cc *constraintCache) trim() {
	var total int64
	for el := cc.lru.Front(); el != nil; {
		next := el.Next()
		e := el.Value.(*conEntry)
		if e.size = cc.entryBytes(e); e.size > cc.maxBytes {
			cc.evict(e)
		} else {
			total += e.size
		}
		el = next
	}
	for cc.lru.Len() > 0 && (cc.lru.Len() > cc.maxEntries || total > cc.maxBytes) {
		e := cc.lru.Back().Value.(*conEntry)
		cc.evict(e)
		total -= e.size
	}
}

// settle trims the cache soon, on a goroutine of its own (at most one
// pending), so that the caller (the scheduler's loop, as a constrained
// request ends) does not wait for it: a request's decoding grows the
// masks and DFA states of the kept constraint it uses, and without it the
// memory kept would stay over the budget until the next request uses the
// cache. While requests decode, the cache may exceed its budget by what
// they add to kept constraints (each Masker at most MaxCachedMasks masks,
// a regex at most MaxCachedStates states). Safe on a nil cc.
func (cc *constraintCache) settle() {
	if cc == nil || !cc.settling.CompareAndSwap(false, true) {
		return
	}
	go func() {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		cc.settling.Store(false)
		cc.trim()
	}()
}

// evict removes the kept constraint e. cc.mu must be held.
func (cc *constraintCache) evict(e *conEntry) {
	cc.lru.Remove(e.elem)
	delete(cc.entries, e.key)
	e.elem = nil
}

// entryBytes is the memory e holds: its constraint and its key.
func (cc *constraintCache) entryBytes(e *conEntry) int64 {
	return e.con.bytes() + int64(len(e.key)) + 128
}

// totalBytes is the memory the kept constraints hold now (entryBytes
// summed, measured again).
func (cc *constraintCache) totalBytes() int64 {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.totalBytesLocked()
}

// totalBytesLocked is totalBytes with cc.mu held.
func (cc *constraintCache) totalBytesLocked() int64 {
	var total int64
	for el := cc.lru.Front(); el != nil; el = el.Next() {
		total += cc.entryBytes(el.Value.(*conEntry))
	}
	return total
}

// fill sets s's ConstraintCache fields (the bytes measured now); a nil
// cc leaves them zero.
func (cc *constraintCache) fill(s *EngineStats) {
	if cc == nil {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	s.ConstraintCacheBytes = cc.totalBytesLocked() // with the entries, one snapshot
	s.ConstraintCacheEntries = cc.lru.Len()
	s.ConstraintCacheBudget = cc.maxBytes
	s.ConstraintCacheHits, s.ConstraintCacheMisses = cc.hits, cc.misses
}

// stats returns the number of compiled constraints kept, the hits and the
// compilations so far (for tests).
func (cc *constraintCache) stats() (entries int, hits, misses int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.lru.Len(), cc.hits, cc.misses
}

// schema returns the compiled constraint of a JSON schema (the error is
// jsongrammar's). Its key is the schema compacted (insignificant
// whitespace removed; keys stay in their order, which the grammar
// follows); a schema over MaxSchemaBytes as given, or one encoding/json
// does not parse, is compiled without the cache (it fails, or could not
// be told apart from another).
func (cc *constraintCache) schema(schema []byte) (*OutputConstraint, error) {
	compile := func() (*OutputConstraint, error) {
		g, err := jsongrammar.Compile(schema)
		if err != nil {
			return nil, err
		}
		return &OutputConstraint{g: g}, nil
	}
	if cc == nil || len(schema) > MaxSchemaBytes {
		return compile()
	}
	var b bytes.Buffer
	b.Grow(len(schema) + 1)
	b.WriteString(conKindSchema)
	if json.Compact(&b, schema) != nil {
		return compile()
	}
	return cc.get(b.String(), compile)
}

// jsonObject returns the constraint of json_object (one per cache, so that
// its masks are shared by every request).
func (cc *constraintCache) jsonObject() *OutputConstraint {
	con, _ := cc.get(conKindJSONObject, func() (*OutputConstraint, error) { return JSONObjectConstraint(), nil })
	return con
}

// regex returns the compiled constraint of a regex (the error is
// regexgrammar's); its key is the pattern.
func (cc *constraintCache) regex(pattern string) (*OutputConstraint, error) {
	compile := func() (*OutputConstraint, error) {
		g, err := regexgrammar.Compile(pattern)
		if err != nil {
			return nil, err
		}
		return &OutputConstraint{rg: g}, nil
	}
	if len(pattern) > MaxRegexBytes {
		return compile()
	}
	return cc.get(conKindRegex+pattern, compile)
}

// choice returns the compiled constraint of a list of choices (the error
// is regexgrammar's); its key is each choice's length (uvarint) and
// bytes, in order.
func (cc *constraintCache) choice(choices []string) (*OutputConstraint, error) {
	compile := func() (*OutputConstraint, error) {
		g, err := regexgrammar.Choice(choices)
		if err != nil {
			return nil, err
		}
		return &OutputConstraint{rg: g}, nil
	}
	total := 0
	for _, c := range choices {
		total += len(c)
	}
	if cc == nil || len(choices) > MaxChoiceList || total > MaxChoiceBytes {
		return compile()
	}
	b := make([]byte, 0, 1+total+binary.MaxVarintLen64*len(choices))
	b = append(b, conKindChoice...)
	for _, c := range choices {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return cc.get(string(b), compile)
}

// saturated reports whether c is a regex (or choice) whose DFA cache is
// full (regexgrammar.Grammar.Saturated).
func (c *OutputConstraint) saturated() bool { return c.rg != nil && c.rg.Saturated() }

// bytes is an estimate of the memory c holds now: its automaton (with the
// DFA states a regex has cached so far) and the masks cached for each
// vocabulary.
func (c *OutputConstraint) bytes() int64 {
	n := 256
	if c.g != nil {
		n += c.g.Bytes()
	}
	if c.rg != nil {
		n += c.rg.Bytes()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.m {
		n += m.Bytes()
	}
	for _, m := range c.rm {
		n += m.Bytes()
	}
	return int64(n)
}
