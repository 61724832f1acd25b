package dsv4

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
)

// prefixEngine starts an engine on the forward tests' random tiny model
// (vocab 96, every layer type) with small steps, so that prefill chunks,
// save points and decode batches interleave; budget is
// EngineOptions.PrefixCacheBytes.
func prefixEngine(t testing.TB, m *Model, budget int64) *Engine {
	t.Helper()
	e, err := NewEngine(m, EngineOptions{MaxBatch: 64, StepTokens: 48, PrefixCacheBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// genTokens runs one request and returns every token it yields (ids,
// logprobs, top alternatives, finish) and the prompt tokens the prefix
// cache served (the engine's hit counter over the request, so requests
// must not overlap).
func genTokens(t testing.TB, e *Engine, prompt []int32, p SamplingParams) ([]Token, int64) {
	t.Helper()
	before := e.Stats().PrefixCacheHits
	out, err := allTokens(e, prompt, p)
	if err != nil {
		t.Fatal(err)
	}
	return out, e.Stats().PrefixCacheHits - before
}

// allTokens runs one request and returns every token it yields.
func allTokens(e *Engine, prompt []int32, p SamplingParams) ([]Token, error) {
	seq, err := e.Generate(context.Background(), prompt, p)
	if err != nil {
		return nil, err
	}
	var out []Token
	for tok, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, tok)
	}
	return out, nil
}

// randTokens returns n token ids of the test model's vocabulary.
func randTokens(rng *rand.Rand, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(2 + rng.IntN(94))
	}
	return p
}

func cat(parts ...[]int32) []int32 { return slices.Concat(parts...) }

// greedyLP is greedy decoding with logprobs: outputs are compared token
// and logprob for logprob.
var greedyLP = SamplingParams{MaxTokens: 6, IgnoreEOS: true, Logprobs: true, TopLogprobs: 5}

func withPromptLogprobs(p SamplingParams) SamplingParams {
	p.PromptLogprobs = ptr(3)
	return p
}

// Requests through the prefix cache give the same tokens and the same
// logprobs, bit for bit, as the same requests on an engine without it, and
// restore the prefixes the design promises: geometric checkpoints on the
// second sharer, the branch point (16-token units) from the third, the
// whole prompt on a repeat, the previous turn on a continuation.
func TestPrefixCacheMatchesUncached(t *testing.T) {
	m := engineTestModel(t)
	rng := rand.New(rand.NewPCG(7, 8))
	sys := randTokens(rng, 150)  // a shared "system prompt"
	short := randTokens(rng, 20) // shared by prompts below the first checkpoint
	u := func(first int32, n int) []int32 { return cat([]int32{first}, randTokens(rng, n-1)) }
	a, b, c := cat(sys, u(2, 9)), cat(sys, u(3, 30)), cat(sys, u(4, 1))
	turn1 := cat(sys, u(5, 12))
	long := cat(sys, u(12, 200))
	type req struct {
		prompt []int32
		p      SamplingParams
		hits   int64 // prompt tokens restored
	}
	tests := []struct {
		name string
		reqs []req
	}{
		{"shared system prompt", []req{
			{a, greedyLP, 0},
			{b, greedyLP, 128}, // the 128-token checkpoint of a
			{c, greedyLP, 144}, // the branch point b saved: 150 rounded down to 16
			{cat(sys, u(6, 40)), greedyLP, 144},
			{sys[:100], greedyLP, 64},
		}},
		{"repeat", []req{
			{a, greedyLP, 0},
			{a, greedyLP, int64(len(a))}, // restored whole, sampled from the saved logits
			{a, SamplingParams{MaxTokens: 6, IgnoreEOS: true, Temperature: 0.9, Seed: ptr(int64(3))}, int64(len(a))},
		}},
		{"next turn", []req{
			{turn1, greedyLP, 0},
			{cat(turn1, u(7, 3), u(8, 20)), greedyLP, int64(len(turn1))},
		}},
		{"below the first checkpoint", []req{
			{cat(short, u(9, 5)), greedyLP, 0},
			{cat(short, u(10, 7)), greedyLP, 0},   // saves the branch point at 16
			{cat(short, u(11, 30)), greedyLP, 16}, // restores it
		}},
		{"prompt logprobs", []req{ // need every position's logits: no restore, but saves
			{a, greedyLP, 0},
			{a, withPromptLogprobs(greedyLP), 0},
			{long, withPromptLogprobs(greedyLP), 0},
			{long, greedyLP, int64(len(long))},
		}},
		{"one-token prompts", []req{
			{[]int32{5}, greedyLP, 0},
			{[]int32{5}, greedyLP, 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cached := prefixEngine(t, m, 0)
			plain := prefixEngine(t, m, -1)
			var queries int64
			for i, r := range tt.reqs {
				want, _ := genTokens(t, plain, r.prompt, r.p)
				got, hits := genTokens(t, cached, r.prompt, r.p)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("request %d: cached %+v\nuncached %+v", i, got, want)
				}
				if hits != r.hits {
					t.Errorf("request %d: %d prompt tokens restored, want %d", i, hits, r.hits)
				}
				if r.p.PromptLogprobs == nil { // the others do not look the cache up
					queries += int64(len(r.prompt))
				}
			}
			st := cached.Stats()
			if st.PrefixCacheQueries != queries || st.PrefixCacheEntries == 0 || st.PrefixCacheBytes <= 0 ||
				st.PrefixCacheBudget != DefaultPrefixCacheBytes {
				t.Errorf("stats %+v, want %d queries", st, queries)
			}
			if ps := plain.Stats(); ps.PrefixCacheQueries != 0 || ps.PrefixCacheEntries != 0 || ps.PrefixCacheBudget != 0 {
				t.Errorf("uncached engine's stats %+v", ps)
			}
			checkCache(t, cached)
		})
	}
}

// checkCache checks every entry of e's prefix cache: its state is at the
// position its key names and fits the model. Call it with e idle (after
// the last request's last token: the scheduler wrote the cache before
// sending it).
func checkCache(t *testing.T, e *Engine) {
	t.Helper()
	c := e.s.cache
	var bytes int64
	for k, en := range c.entries {
		st := en.st.(*SequenceState)
		if st.Position != k.n || len(en.toks) != k.n {
			t.Errorf("entry of %d tokens holds a state at %d", k.n, st.Position)
		}
		if err := e.b.(modelBackend).m.net.validate(st); err != nil {
			t.Errorf("entry of %d tokens: %v", k.n, err)
		}
		bytes += en.bytes
	}
	if bytes != c.bytes || c.bytes > c.budget {
		t.Errorf("entries hold %d bytes, cache counts %d, budget %d", bytes, c.bytes, c.budget)
	}
}

// Concurrent requests sharing prefixes (some cached before, some saved by
// each other as they run) equal the uncached engine's answers.
func TestPrefixCacheConcurrent(t *testing.T) {
	m := engineTestModel(t)
	rng := rand.New(rand.NewPCG(9, 10))
	systems := [][]int32{randTokens(rng, 70), randTokens(rng, 140), randTokens(rng, 10)}
	const n = 48
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = cat(systems[i%len(systems)], randTokens(rng, 1+rng.IntN(25)))
		if i%5 == 4 {
			prompts[i] = prompts[i-2] // some repeats
		}
	}
	plain := prefixEngine(t, m, -1)
	want := make([][]Token, n)
	for i, p := range prompts {
		want[i], _ = genTokens(t, plain, p, greedyLP)
	}
	cached := prefixEngine(t, m, 0)
	for i := range 6 { // warm: some prefixes cached before the burst
		genTokens(t, cached, prompts[i], greedyLP)
	}
	got := make([][]Token, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if got[i], err = allTokens(cached, prompts[i], greedyLP); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("request %d: cached %v, uncached %v", i, got[i], want[i])
		}
	}
	st := cached.Stats()
	if st.PrefixCacheHits == 0 || st.LiveSequences != 0 {
		t.Errorf("stats %+v", st)
	}
	checkCache(t, cached)
}

// Under a budget of about two whole-prompt entries the least recently used
// one goes; the cache never holds more than its budget, and answers stay
// those of the uncached engine.
func TestPrefixCacheEviction(t *testing.T) {
	m := engineTestModel(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 40 // below the first checkpoint: one entry per prompt
	entry := m.SequenceBytes(n) + 4*int64(n+m.Config().VocabSize)
	cached := prefixEngine(t, m, entry*5/2)
	plain := prefixEngine(t, m, -1)
	a, b, c := randTokens(rng, n), randTokens(rng, n), randTokens(rng, n)
	steps := []struct {
		prompt  []int32
		hits    int64
		entries int
	}{
		{a, 0, 1},
		{b, 0, 2},
		{a, n, 2}, // a is now the most recently used
		{c, 0, 2}, // evicts b
		{b, 0, 2}, // evicts a
		{c, n, 2},
		{a, 0, 2},
	}
	for i, s := range steps {
		want, _ := genTokens(t, plain, s.prompt, greedyLP)
		got, hits := genTokens(t, cached, s.prompt, greedyLP)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %d: cached %v, uncached %v", i, got, want)
		}
		st := cached.Stats()
		if hits != s.hits || st.PrefixCacheEntries != s.entries || st.PrefixCacheBytes > st.PrefixCacheBudget {
			t.Errorf("step %d: %d tokens restored, stats %+v; want %d restored, %d entries", i, hits, st, s.hits, s.entries)
		}
	}
	checkCache(t, cached)

	// A state larger than the whole budget is never kept.
	tiny := prefixEngine(t, m, entry/2)
	genTokens(t, tiny, a, greedyLP)
	if _, hits := genTokens(t, tiny, a, greedyLP); hits != 0 || tiny.Stats().PrefixCacheEntries != 0 {
		t.Errorf("budget below one entry: %d restored, stats %+v", hits, tiny.Stats())
	}
}

// Prefix caching is off with a negative budget and on a Backend that
// cannot snapshot; 0 takes the default budget.
func TestPrefixCacheOptions(t *testing.T) {
	m := engineTestModel(t)
	tests := []struct {
		name   string
		e      func(t *testing.T) *Engine
		budget int64
	}{
		{"default", func(t *testing.T) *Engine { return prefixEngine(t, m, 0) }, DefaultPrefixCacheBytes},
		{"budget", func(t *testing.T) *Engine { return prefixEngine(t, m, 1<<20) }, 1 << 20},
		{"off", func(t *testing.T) *Engine { return prefixEngine(t, m, -1) }, 0},
		{"no snapshots", func(t *testing.T) *Engine {
			e := newFakeEngine(&fakeBackend{}, EngineOptions{})
			t.Cleanup(func() { _ = e.Close(context.Background()) })
			return e
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.e(t)
			p := []int32{3, 4, 5, 6, 7, 8}
			genTokens(t, e, p, greedyLP)
			_, hits := genTokens(t, e, p, greedyLP)
			st := e.Stats()
			on := tt.budget > 0
			if st.PrefixCacheBudget != tt.budget || (hits > 0) != on || (st.PrefixCacheEntries > 0) != on ||
				(st.PrefixCacheQueries > 0) != on {
				t.Errorf("%d tokens restored, stats %+v; want budget %d", hits, st, tt.budget)
			}
		})
	}
}

// A request cancelled in the middle of its prefill leaves only states of
// prefixes it finished in the cache: the same prompt afterwards (restoring
// them) gives the uncached answer. So does an engine closed mid-prefill.
func TestPrefixCacheCancelMidPrefill(t *testing.T) {
	m := engineTestModel(t)
	rng := rand.New(rand.NewPCG(13, 14))
	prompt := randTokens(rng, 300)
	plain := prefixEngine(t, m, -1)
	want, _ := genTokens(t, plain, prompt, greedyLP)

	cached, err := NewEngine(m, EngineOptions{StepTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, cached)
	ctx, cancel := context.WithCancel(context.Background())
	var steps int
	cached.s.stepHook = func() { // runs on the loop goroutine: before the request exists
		if steps++; steps == 5 { // 4 chunks of 40 in: checkpoints 64 and 128 saved
			cancel()
		}
	}
	seq, err := cached.Generate(ctx, prompt, greedyLP)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range seq {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled request: %v", err)
			}
			break
		}
		t.Fatal("the cancelled request produced a token")
	}
	waitFor(t, "the cancelled request to end", func() bool { return cached.Stats().LiveSequences == 0 })
	if st := cached.Stats(); st.PrefixCacheEntries == 0 || st.PromptTokens >= int64(len(prompt)) {
		t.Fatalf("after the cancel: %+v; want some checkpoints, the prompt unfinished", st)
	}
	got, hits := genTokens(t, cached, prompt, greedyLP)
	if !reflect.DeepEqual(got, want) || hits < 128 {
		t.Errorf("after a cancel mid-prefill: %d restored, %v; uncached %v", hits, got, want)
	}
	checkCache(t, cached)
}

// Restoring copies: a request that restored a cached state and ran on
// (prefill of its own suffix, decode steps) leaves the cached state as it
// was, and the next request restoring it gets the first one's answer.
func TestPrefixCacheRestoreCopies(t *testing.T) {
	m := engineTestModel(t)
	rng := rand.New(rand.NewPCG(15, 16))
	p := randTokens(rng, 90)
	e := prefixEngine(t, m, 0)
	first, _ := genTokens(t, e, p, greedyLP)
	snapshot := func() map[int]*SequenceState {
		out := map[int]*SequenceState{}
		for k, en := range e.s.cache.entries {
			out[k.n] = en.st.(*SequenceState).clone()
		}
		return out
	}
	before := snapshot()
	if len(before) != 2 { // the checkpoint at 64, the whole prompt
		t.Fatalf("entries at %v, want 64 and %d", slices.Sorted(maps.Keys(before)), len(p))
	}
	for i := range 3 {
		genTokens(t, e, cat(p, randTokens(rng, 5+i)), SamplingParams{MaxTokens: 20, IgnoreEOS: true})
		genTokens(t, e, cat(p[:70], randTokens(rng, 3)), SamplingParams{MaxTokens: 20, IgnoreEOS: true})
	}
	for k, en := range e.s.cache.entries {
		if old := before[k.n]; old != nil && !reflect.DeepEqual(old, en.st.(*SequenceState)) {
			t.Errorf("the cached state of %d tokens changed", k.n)
		}
	}
	again, hits := genTokens(t, e, p, greedyLP)
	if hits != int64(len(p)) || !reflect.DeepEqual(again, first) {
		t.Errorf("repeat: %d restored, %v; first %v", hits, again, first)
	}

	// The backend's Restore itself hands out a copy.
	b := e.b.(modelBackend)
	en := e.s.cache.entries[prefixKey{64, func() uint64 {
		h := e.s.cache.seed
		for _, tok := range p[:64] {
			h = prefixHash(h, tok)
		}
		return h
	}()}]
	if en == nil {
		t.Fatal("no entry at the 64-token checkpoint")
	}
	keep := en.st.(*SequenceState).clone()
	seq, err := b.Restore(en.st)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Release()
	if _, err := m.Prefill(context.Background(), seq.(*Sequence), p[64:]); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keep, en.st.(*SequenceState)) {
		t.Error("a prefill on a restored sequence changed the saved state")
	}
	if _, err := b.Restore(fakeState{}); !errors.Is(err, ErrSequence) {
		t.Errorf("restore of a foreign state: %v", err)
	}
}

type fakeState struct{}

func (fakeState) Bytes() int64 { return 0 }

// The cache's bookkeeping on its own: hash collisions cost a miss, never a
// wrong hit; entries gain their logits; grains follow insert and evict.
func TestPrefixCacheBookkeeping(t *testing.T) {
	st := func(n int) BackendState { return &SequenceState{Position: n} }
	c := newPrefixCache(1<<20, 42)
	p := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	if pl := c.plan(p, true); pl.hit != nil || !slices.Equal(pl.points, []int{18}) {
		t.Errorf("empty cache: %+v", pl)
	}
	c.insert(p[:16], st(16), nil)
	if pl := c.plan(p[:16], true); pl.hit != nil || !slices.Equal(pl.points, []int{16}) {
		t.Errorf("entry without logits served a whole prompt: %+v", pl)
	}
	c.insert(p[:16], st(16), []float32{1})
	if pl := c.plan(p[:16], true); pl.hit == nil || pl.hit.logits == nil || len(pl.points) != 0 || len(c.entries) != 1 {
		t.Errorf("entry with logits: %+v, %d entries", pl, len(c.entries))
	}
	if pl := c.plan(p, false); pl.hit != nil {
		t.Errorf("read false restored %+v", pl.hit)
	}
	q := slices.Clone(p)
	q[17] = 99
	if pl := c.plan(q, true); pl.hit == nil || pl.hit.key.n != 16 || !slices.Equal(pl.points, []int{18}) {
		t.Errorf("sharer: %+v", pl)
	}
	// Forge a collision: an entry under p[:17]'s key holding other tokens.
	h := c.seed
	for _, tok := range p[:17] {
		h = prefixHash(h, tok)
	}
	other := slices.Clone(p[:17])
	other[3] = 77
	forged := &prefixEntry{key: prefixKey{17, h}, toks: other, st: st(17)}
	c.entries[forged.key] = forged
	c.lens[17]++
	c.countGrains(forged.toks, 1)
	c.link(forged)
	if pl := c.plan(p, true); pl.hit == nil || pl.hit.key.n != 16 {
		t.Errorf("a colliding entry was restored: %+v", pl.hit)
	}
	c.remove(forged)
	c.clear()
	if len(c.entries) != 0 || len(c.lens) != 0 || len(c.grains) != 0 || c.bytes != 0 {
		t.Errorf("after clear: %d entries, %v lens, %d grains, %d bytes", len(c.entries), c.lens, len(c.grains), c.bytes)
	}
}
