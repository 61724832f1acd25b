package dsv4

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Backend is the compute an Engine schedules. NewEngine wraps a *Model;
// NewEngineWithBackend takes any implementation (a mock in tests, a remote
// or accelerator-specific model). The Engine calls it from one goroutine
// only, so implementations need not be safe for concurrent use.
type Backend interface {
	// NewSequence allocates an empty sequence (its KV state).
	NewSequence() BackendSequence
	// Prefill appends ids (≥ 1) to seq and returns the logits [vocab] of
	// the last position. It is called repeatedly for chunked prefill.
	Prefill(ctx context.Context, seq BackendSequence, ids []int32) ([]float32, error)
	// Decode appends ids[i] to seqs[i] for every i in one batched step and
	// returns the logits [len(seqs)][vocab].
	Decode(ctx context.Context, seqs []BackendSequence, ids []int32) ([][]float32, error)
	// StateBytes is the state memory of one sequence holding n tokens,
	// in bytes (used for admission control).
	StateBytes(n int) int64
	// VocabSize is the number of logits per position.
	VocabSize() int
	// MaxContext is the context length in tokens.
	MaxContext() int
	// EOS lists the end-of-sequence token ids.
	EOS() []int32
}

// AllLogitsBackend is a Backend that can also return the logits of every
// position of a prefill chunk, which prompt logprobs need
// (SamplingParams.PromptLogprobs); NewEngine's model backend is one
// (Model.PrefillAll). An Engine on a Backend without it refuses prompt
// logprobs with a *ParamError (param prompt_logprobs).
type AllLogitsBackend interface {
	Backend
	// PrefillAll is Prefill returning the logits of every position of ids:
	// [len(ids)][vocab], the last row being what Prefill returns.
	PrefillAll(ctx context.Context, seq BackendSequence, ids []int32) ([][]float32, error)
}

// allLogitsOf returns b as an AllLogitsBackend (seeing through the
// MaxContext cap), or nil.
func allLogitsOf(b Backend) AllLogitsBackend {
	if c, ok := b.(cappedBackend); ok {
		b = c.Backend
	}
	a, _ := b.(AllLogitsBackend)
	return a
}

// promptLogitsChunk bounds the prompt tokens one step prefills for a request
// asking for prompt logprobs, so that their logits ([rows][vocab] float32:
// 66 MB for 128 rows of DeepSeek-V4's vocabulary) stay small; the forward
// pass is batch-invariant, so the chunking changes no value.
const promptLogitsChunk = 128

// BackendSequence is one sequence's state in a Backend. Release frees it
// and must be idempotent.
type BackendSequence interface{ Release() }

// tokenEvent is one generated token (or the end) handed from the scheduler to
// a request's consumer.
type tokenEvent struct {
	Token
	err error // terminal error; the event carries no token
}

// request is one sequence being generated. Fields under "scheduler" are
// touched by the scheduler goroutine only; the output queue by both.
type request struct {
	ctx       context.Context
	prompt    []int32
	samp      *sampler
	maxTokens int
	reserve   int64
	forcer    func(tok int32) []int32 // optional: tokens to force after tok
	enqueued  time.Time
	unwatch   func() bool // stops the ctx watch (context.AfterFunc)
	// cached is the number of prompt tokens restored from the prefix cache
	// (set at admission, before any event).
	cached atomic.Int64

	// scheduler
	seq          BackendSequence
	pending      []int32   // tokens to feed next
	prefilled    bool      // the prompt is fully fed
	savePoints   []int     // prompt positions, ascending, after which prefill saves the state
	cachedLogits []float32 // the whole prompt was restored: its last logits, to sample from
	draw         Token     // the token sampleAll drew for the next emit
	drawn        bool
	nOut         int
	admitted     time.Time
	paused       time.Time // zero, or since when MaxUnread tokens wait unread
	// promptLP collects the prompt logprobs (SamplingParams.PromptLogprobs;
	// nil: not asked) while the prompt is prefilled; the first token
	// hands them over.
	promptLP []*PromptLogprob

	// output queue
	mu      sync.Mutex
	events  []tokenEvent
	closed  bool          // no more events will come
	stopReq bool          // the consumer asked to stop (cancel or stop string)
	notify  chan struct{} // cap 1: events or closed changed
}

func (r *request) push(ev tokenEvent, last bool) {
	r.mu.Lock()
	if !r.closed {
		r.events = append(r.events, ev)
		r.closed = last
	}
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether the stream is closed.
func (r *request) take(buf []tokenEvent) ([]tokenEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf = append(buf[:0], r.events...)
	r.events = r.events[:0]
	return buf, r.closed
}

// unread returns the number of queued events.
func (r *request) unread() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *request) stopRequested() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReq || r.ctx.Err() != nil
}

// scheduler runs the continuous-batching loop of an Engine.
type scheduler struct {
	b    Backend
	all  AllLogitsBackend // b's every-position prefill, or nil
	opts EngineOptions
	cons *constraintCache // the engine's compiled constraints (nil: off), settled when a constrained request ends

	mu       sync.Mutex
	incoming []*request // submitted, not yet seen by the loop
	nWaiting int        // len(incoming)+len(waiting), for the queue limit
	closed   bool
	wake     chan struct{} // cap 1

	// loop-owned
	waiting []*request // FIFO
	running []*request
	used    int64 // reserved state bytes of running requests
	// snap and cache are set when prefix caching is on
	// (EngineOptions.PrefixCacheBytes > 0 and a SnapshotBackend).
	snap  SnapshotBackend
	cache *prefixCache

	stats    statsCounters
	done     chan struct{}
	killed   atomic.Bool // the loop ended running requests because Close gave up
	stepHook func()      // tests: called at the start of each step
}

func (s *scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// submit queues r or returns ErrQueueFull / ErrEngineClosed.
func (s *scheduler) submit(r *request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrEngineClosed
	}
	if s.nWaiting >= s.opts.MaxWaiting {
		return ErrQueueFull
	}
	s.nWaiting++
	s.incoming = append(s.incoming, r)
	s.stats.waiting.Store(int64(s.nWaiting))
	s.signal()
	return nil
}

// stop asks the loop to end r (consumer cancel, stop string, or finish).
func (s *scheduler) stop(r *request) {
	r.mu.Lock()
	r.stopReq = true
	r.mu.Unlock()
	s.signal()
}

func (s *scheduler) loop(ctx context.Context) {
	defer close(s.done)
	defer s.dropCache()
	for {
		s.mu.Lock()
		s.waiting = append(s.waiting, s.incoming...)
		clear(s.incoming)
		s.incoming = s.incoming[:0]
		closed := s.closed
		s.mu.Unlock()

		s.reap(closed)
		if ctx.Err() != nil { // Close gave up waiting: end everything now
			if len(s.running) > 0 {
				s.killed.Store(true)
			}
			for _, r := range s.running {
				s.finish(r, "", ErrEngineClosed)
			}
			s.running = s.running[:0]
			s.publish()
			if closed && len(s.waiting) == 0 {
				return
			}
		}
		if closed && len(s.running) == 0 && len(s.waiting) == 0 {
			s.publish()
			return
		}
		s.admit()
		wait := s.throttle(time.Now())
		s.publish()
		if !s.runnable() {
			var timer *time.Timer
			var timeout <-chan time.Time
			if wait > 0 {
				timer = time.NewTimer(wait)
				timeout = timer.C
			}
			select {
			case <-s.wake:
			case <-timeout:
			case <-ctx.Done():
				s.mu.Lock()
				s.closed = true
				s.mu.Unlock()
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}
		s.step(ctx)
	}
}

// reap removes cancelled or stopped requests and frees their state at once.
// When the engine is closing, every waiting request fails.
func (s *scheduler) reap(closing bool) {
	keep := s.running[:0]
	for _, r := range s.running {
		if r.stopRequested() {
			s.finish(r, "", r.ctx.Err())
			continue
		}
		keep = append(keep, r)
	}
	clear(s.running[len(keep):])
	s.running = keep

	w := s.waiting[:0]
	for _, r := range s.waiting {
		switch {
		case r.stopRequested():
			r.push(tokenEvent{err: r.ctx.Err()}, true)
			s.dequeued()
		case closing:
			r.push(tokenEvent{err: ErrEngineClosed}, true)
			s.dequeued()
		default:
			w = append(w, r)
		}
	}
	clear(s.waiting[len(w):])
	s.waiting = w
}

// throttle pauses the running requests whose consumer has MaxUnread tokens
// unread (step skips them) and resumes the others; it ends those paused
// longer than UnreadTimeout with ErrUnreadTimeout, freeing their state. It
// returns the time until the next paused request times out (0: none).
func (s *scheduler) throttle(now time.Time) time.Duration {
	if s.opts.MaxUnread < 0 {
		return 0
	}
	var wait time.Duration
	keep := s.running[:0]
	for _, r := range s.running {
		if !r.prefilled || r.unread() < s.opts.MaxUnread {
			r.paused = time.Time{}
			keep = append(keep, r)
			continue
		}
		if r.paused.IsZero() {
			r.paused = now
		}
		if to := s.opts.UnreadTimeout; to >= 0 {
			left := r.paused.Add(to).Sub(now)
			if left <= 0 {
				s.finish(r, "", ErrUnreadTimeout)
				continue
			}
			if wait == 0 || left < wait {
				wait = left
			}
		}
		keep = append(keep, r)
	}
	clear(s.running[len(keep):])
	s.running = keep
	return wait
}

// runnable reports whether a running request can step (is not paused).
func (s *scheduler) runnable() bool {
	for _, r := range s.running {
		if r.paused.IsZero() {
			return true
		}
	}
	return false
}

func (s *scheduler) dequeued() {
	s.mu.Lock()
	s.nWaiting--
	s.stats.waiting.Store(int64(s.nWaiting))
	s.mu.Unlock()
}

// admit moves waiting requests to running in FIFO order while the batch and
// the state-memory budget allow (the head of the queue blocks the rest, so a
// large request is not starved by small ones).
func (s *scheduler) admit() {
	for len(s.waiting) > 0 && len(s.running) < s.opts.MaxBatch {
		r := s.waiting[0]
		if s.opts.StateMemory > 0 && s.used+r.reserve > s.opts.StateMemory {
			break
		}
		s.waiting = slices.Delete(s.waiting, 0, 1)
		s.dequeued()
		s.restore(r)
		if r.seq == nil {
			r.seq = s.b.NewSequence()
			r.pending = r.prompt
		}
		r.admitted = time.Now()
		s.used += r.reserve
		s.stats.liveSeqs.Add(1)
		s.running = append(s.running, r)
	}
}

func (s *scheduler) publish() {
	s.stats.running.Store(int64(len(s.running)))
	s.stats.stateBytes.Store(s.used)
}

// finish releases r's state and closes its stream with reason or err.
func (s *scheduler) finish(r *request, reason string, err error) {
	if r.samp != nil && r.samp.con != nil {
		s.cons.settle() // its decoding may have grown a kept constraint past the budget
	}
	if r.seq != nil {
		r.seq.Release()
		r.seq = nil
		s.used -= r.reserve
		s.stats.liveSeqs.Add(-1)
	}
	switch {
	case err != nil:
		r.push(tokenEvent{err: err}, true)
	case reason != "":
		// the reason was attached to the last token already
	}
	r.mu.Lock()
	if !r.closed {
		r.closed = true
	}
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// step runs one engine iteration: a batched decode of every request waiting
// for its next token, then prefill chunks (FIFO) within the token budget.
func (s *scheduler) step(ctx context.Context) {
	if s.stepHook != nil {
		s.stepHook()
	}
	var dec []*request
	var pre []*request
	for _, r := range s.running {
		if !r.paused.IsZero() {
			continue
		}
		if r.prefilled && len(r.pending) == 1 {
			dec = append(dec, r)
		} else {
			pre = append(pre, r)
		}
	}
	budget := s.opts.StepTokens - len(dec)
	var ended []*request
	if len(dec) > 0 {
		seqs := make([]BackendSequence, len(dec))
		ids := make([]int32, len(dec))
		for i, r := range dec {
			seqs[i] = r.seq
			ids[i] = r.pending[0]
		}
		t0 := time.Now()
		logits, err := s.b.Decode(ctx, seqs, ids)
		s.stats.decodeSteps.Add(1)
		s.stats.decodeNanos.Add(int64(time.Since(t0)))
		if err == nil {
			s.sampleAll(dec, logits)
		}
		for i, r := range dec {
			if err != nil {
				s.finish(r, "", err)
				ended = append(ended, r)
				continue
			}
			r.pending = r.pending[:0]
			if s.emit(r, logits[i]) {
				ended = append(ended, r)
			}
		}
	}
	first := len(dec) == 0 // the step's first prefill chunk runs even without budget
	for _, r := range pre {
		if r.cachedLogits != nil { // the whole prompt was restored: no forward
			logits := r.cachedLogits
			r.cachedLogits = nil
			r.prefilled = true
			if s.emit(r, logits) {
				ended = append(ended, r)
			}
			continue
		}
		if budget <= 0 && !first {
			break
		}
		if s.prefillChunks(ctx, r, &budget, &first) {
			ended = append(ended, r)
		}
	}
	if len(ended) > 0 {
		s.running = slices.DeleteFunc(s.running, func(r *request) bool { return slices.Contains(ended, r) })
	}
}

// prefillChunks feeds r's pending tokens in chunks while the step's token
// budget lasts, each chunk ending at or before r's next prefix-cache save
// point (where the state is saved), and reports whether r ended (an error,
// or its first token finished it).
func (s *scheduler) prefillChunks(ctx context.Context, r *request, budget *int, first *bool) bool {
	for {
		n := min(len(r.pending), max(*budget, 1))
		pos := len(r.prompt) - len(r.pending) // the prompt position while !r.prefilled
		if r.promptLP != nil && !r.prefilled {
			n = min(n, promptLogitsChunk)
		}
		if !r.prefilled {
			for len(r.savePoints) > 0 && r.savePoints[0] <= pos {
				r.savePoints = r.savePoints[1:]
			}
			if len(r.savePoints) > 0 {
				n = min(n, r.savePoints[0]-pos)
			}
		}
		t0 := time.Now()
		logits, err := s.prefill(ctx, r, r.pending[:n])
		s.stats.prefillNanos.Add(int64(time.Since(t0)))
		s.stats.prefillTokens.Add(int64(n))
		*budget -= n
		*first = false
		if err != nil {
			s.finish(r, "", err)
			return true
		}
		r.pending = r.pending[n:]
		if !r.prefilled && len(r.savePoints) > 0 && r.savePoints[0] == pos+n {
			r.savePoints = r.savePoints[1:]
			s.save(r, pos+n, logits)
		}
		if len(r.pending) == 0 {
			r.prefilled = true
			return s.emit(r, logits)
		}
		if *budget <= 0 || r.stopRequested() {
			return false
		}
	}
}

// restore looks r's prompt up in the prefix cache at admission: on a hit
// r gets a new sequence restored from the longest cached prefix (a copy)
// and only the rest of the prompt pending; either way r learns the
// positions where its prefill saves states. With the cache off, or when
// the restore fails, r.seq stays nil (the caller starts an empty
// sequence).
func (s *scheduler) restore(r *request) {
	if s.cache == nil {
		return
	}
	// Prompt logprobs need the logits of every prompt position, so such a
	// request restores nothing (as in vLLM); its prefill still saves states.
	read := r.promptLP == nil
	pl := s.cache.plan(r.prompt, read)
	r.savePoints = pl.points
	if !read {
		return
	}
	s.stats.cacheQueries.Add(int64(len(r.prompt)))
	if pl.hit == nil {
		return
	}
	seq, err := s.snap.Restore(pl.hit.st)
	if err != nil {
		return // prefill from the start; the save points past the hit still apply
	}
	n := pl.hit.key.n
	r.seq = seq
	r.pending = r.prompt[n:]
	if n == len(r.prompt) {
		r.cachedLogits = slices.Clone(pl.hit.logits)
	}
	r.cached.Store(int64(n))
	s.stats.cacheHits.Add(int64(n))
}

// save puts r's state, after its first p prompt tokens, in the prefix
// cache; logits are those of token p-1, kept when p is the whole prompt.
func (s *scheduler) save(r *request, p int, logits []float32) {
	if s.b.StateBytes(p) > s.cache.budget {
		return // could not be kept: skip the copy
	}
	st, err := s.snap.Snapshot(r.seq)
	if err != nil {
		return
	}
	if p < len(r.prompt) {
		logits = nil
	}
	s.cache.insert(r.prompt[:p], st, logits)
	s.publishCache()
}

func (s *scheduler) publishCache() {
	s.stats.cacheBytes.Store(s.cache.bytes)
	s.stats.cacheEntries.Store(int64(len(s.cache.entries)))
}

// dropCache empties the prefix cache when the loop ends.
func (s *scheduler) dropCache() {
	if s.cache != nil {
		s.cache.clear()
		s.publishCache()
	}
}

// cacheBudget is the prefix cache's budget in bytes, 0 when it is off.
func (s *scheduler) cacheBudget() int64 {
	if s.cache == nil {
		return 0
	}
	return s.cache.budget
}

// prefill feeds chunk, the next of r's pending tokens, to its sequence and
// returns the logits of the chunk's last position. While the prompt of a
// request asking for prompt logprobs is fed, it takes every position's
// logits instead and records, from the logits of each position, the
// PromptLogprob of the prompt token after it (the last position of the
// prompt predicts the first generated token: no entry).
func (s *scheduler) prefill(ctx context.Context, r *request, chunk []int32) ([]float32, error) {
	if r.promptLP == nil || r.prefilled {
		return s.b.Prefill(ctx, r.seq, chunk)
	}
	rows, err := s.all.PrefillAll(ctx, r.seq, chunk)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(chunk) {
		return nil, fmt.Errorf("dsv4: backend PrefillAll returned %d rows for %d tokens", len(rows), len(chunk))
	}
	start := len(r.prompt) - len(r.pending) // the position of chunk[0]
	k := *r.samp.p.PromptLogprobs
	parallelFor(len(rows), func(j int) {
		if next := start + j + 1; next < len(r.prompt) {
			r.promptLP[next] = promptLogprob(rows[j], r.prompt[next], k)
		}
	})
	return rows[len(rows)-1], nil
}

// parallelFor runs f(0), ..., f(n-1) on up to GOMAXPROCS goroutines and
// returns when all have run.
func parallelFor(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// sampleAll samples the next token of every request of a decode batch in
// parallel (each request owns its sampler and RNG, so the result does not
// depend on the split); emit then uses the drawn token. Sampling costs one
// exp per vocabulary entry, which on a large batch would otherwise hold
// the single scheduler goroutine.
func (s *scheduler) sampleAll(rs []*request, logits [][]float32) {
	if min(runtime.GOMAXPROCS(0), len(rs)) <= 1 {
		return
	}
	parallelFor(len(rs), func(i int) {
		r := rs[i]
		if r.stopRequested() {
			return
		}
		t, lp, top := r.samp.sample(logits[i])
		r.draw = Token{ID: t, Logprob: lp, TopLogprobs: top}
		r.drawn = true
	})
}

// emit samples r's next token from logits (unless sampleAll drew it), queues it for the consumer and
// reports whether r has finished (and was released).
func (s *scheduler) emit(r *request, logits []float32) bool {
	if r.stopRequested() {
		s.finish(r, "", r.ctx.Err())
		return true
	}
	var tok int32
	var lp float32
	var top []TokenLogprob
	if r.drawn {
		tok, lp, top = r.draw.ID, r.draw.Logprob, r.draw.TopLogprobs
		r.drawn = false
	} else {
		tok, lp, top = r.samp.sample(logits)
	}
	r.samp.observe(tok)
	r.nOut++
	s.stats.genTokens.Add(1)
	ev := tokenEvent{Token: Token{ID: tok, Logprob: lp, TopLogprobs: top, PromptLogprobs: r.promptLP}}
	r.promptLP = nil // handed over with the first token
	ctxLen := s.b.MaxContext()
	switch {
	case r.samp.isStop(tok) && (r.nOut > r.samp.p.MinTokens-1 || r.samp.con.completed()):
		ev.FinishReason = "stop"
		ev.StopToken = true
	case r.nOut >= r.maxTokens || len(r.prompt)+r.nOut >= ctxLen:
		ev.FinishReason = "length"
	}
	if ev.FinishReason != "" {
		r.push(ev, true)
		s.finish(r, ev.FinishReason, nil)
		return true
	}
	r.push(ev, false)
	r.pending = append(r.pending[:0], tok)
	if r.forcer != nil {
		forced := r.forcer(tok)
		for _, f := range forced {
			if r.nOut >= r.maxTokens-1 || len(r.prompt)+r.nOut >= ctxLen-1 {
				break
			}
			r.samp.observe(f)
			r.nOut++
			s.stats.genTokens.Add(1)
			r.push(tokenEvent{Token: Token{ID: f, Forced: true}}, false)
			r.pending = append(r.pending, f)
		}
	}
	return false
}
