package dsv4

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsv4go/dsv4go/template"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// Errors of the Engine. Servers map ErrQueueFull and ErrEngineClosed to HTTP
// 503, ErrRequestTooLarge, ErrContextLength and ErrTemplateLimit to 400.
var (
	// ErrQueueFull: EngineOptions.MaxWaiting requests are already queued.
	ErrQueueFull = errors.New("dsv4: engine queue is full")
	// ErrEngineClosed: the engine was closed before or while the request ran.
	ErrEngineClosed = errors.New("dsv4: engine closed")
	// ErrRequestTooLarge: the request's worst-case state (prompt plus
	// max_tokens) exceeds EngineOptions.StateMemory, so it could never be
	// admitted.
	ErrRequestTooLarge = errors.New("dsv4: request can never fit the state-memory budget")
	// ErrContextLength: the prompt leaves no room to generate within the
	// model's context length.
	ErrContextLength = errors.New("dsv4: prompt exceeds the context length")
	// ErrTemplateLimit: the chat template supplied as EngineOptions.Renderer
	// (e.g. a Jinja file) hit one of its sandbox limits (loop iterations,
	// render time, recursion, value or output size: template.ErrLimit,
	// which the error also wraps) on this request. It is not reported as
	// ErrContextLength, since the template, not the prompt's token count, is
	// at fault; servers answer it with 400 invalid_request_error (the
	// request's messages drive the render; other requests may succeed) and
	// code "template_limit_exceeded". The built-in DeepSeek encodings have
	// no loops: their only limit is output size, still ErrContextLength.
	ErrTemplateLimit = errors.New("dsv4: chat template limit exceeded")
	// ErrUnreadTimeout: the request's consumer left EngineOptions.MaxUnread
	// tokens unread for longer than EngineOptions.UnreadTimeout (e.g. an
	// iterator that is never ranged), so the engine ended the request and
	// freed its state. The consumer still gets the tokens generated before.
	ErrUnreadTimeout = errors.New("dsv4: request output left unread, request ended")
	// ErrIteratorReused: the iterator of Generate, ChatStream or
	// CompleteStream is single-use; ranging over it a second time yields
	// only (zero value, ErrIteratorReused), whether or not the first range
	// ran to the end. It never starts a new request.
	ErrIteratorReused = errors.New("dsv4: iterator already ranged over (single-use)")
)

// EngineOptions configures an Engine's scheduler. Zero fields take the
// defaults given beside them.
type EngineOptions struct {
	// MaxBatch is the most sequences running at once (admitted, prefilling
	// or decoding). Default 64.
	MaxBatch int
	// StepTokens is the per-step token budget: each decoding sequence costs
	// one token, and prefill chunks use the rest (chunked prefill, in FIFO
	// order). Default 512.
	StepTokens int
	// StateMemory is the budget in bytes for the state of running sequences.
	// A request reserves the state of its worst case (prompt + max_tokens
	// tokens) when admitted and returns it when it ends; requests wait in
	// FIFO order until their reservation fits. 0 means no limit.
	StateMemory int64
	// MaxWaiting is the most requests queued for admission; more get
	// ErrQueueFull. Default 4096.
	MaxWaiting int
	// DefaultMaxTokens applies when a request sets no MaxTokens. 0 means
	// the rest of the context.
	DefaultMaxTokens int
	// MaxContext caps the context length in tokens below the model's
	// (config max_position_embeddings): a longer prompt, or prompt +
	// max_tokens beyond it, gets ErrContextLength, and generation stops
	// there. 0 (or a value above the model's) means the model's.
	MaxContext int

	// MaxUnread bounds the generated tokens a request may hold that its
	// consumer (the Generate / ChatStream iterator) has not read yet. A
	// request that reaches it pauses: it keeps its batch slot and state but
	// is not stepped until the consumer reads. Default 1024; negative: no
	// bound (an unread request runs to its end).
	MaxUnread int
	// UnreadTimeout is how long a request may stay paused on MaxUnread
	// before the engine ends it with ErrUnreadTimeout and frees its slot
	// and state: the rule that keeps an abandoned iterator (never ranged,
	// nor its ctx cancelled) from pinning a slot for up to the whole
	// context. Default 30 s; negative: wait for ever.
	UnreadTimeout time.Duration

	// PrefixCacheBytes is the byte budget of automatic prefix caching: the
	// engine saves whole sequence states (SequenceState: a DeepSeek-V4
	// state is windows, compressed entries and partial compressor buffers,
	// not per-token blocks that prompts could share) after prefixes of the
	// prompts it prefills: the whole prompt, with its last logits; the
	// point, in 16-token units, where a prompt leaves one already cached
	// (so a shared system prompt is saved the second time it is seen); and
	// checkpoints at 64, 128, 256, ... tokens. A later request whose prompt
	// starts with a saved prefix restores a copy of the longest one and
	// prefills only the rest; the output is the same as without the cache
	// (the forward pass gives the same bits however a prompt is chunked). A
	// repeated prompt samples from the saved logits without running the
	// model. Keys are the prefixes' tokens (a chained hash, then a full
	// comparison). Saved states are charged here, not to StateMemory, and
	// the least recently used ones are evicted to stay within the budget; a
	// state larger than the budget is not saved. 0 means
	// DefaultPrefixCacheBytes: on by default, as in vLLM V1 (whose
	// --enable-prefix-caching defaults to on); negative turns prefix
	// caching off (vLLM's --no-enable-prefix-caching). It is off, whatever
	// the value, on a Backend that does not implement SnapshotBackend.
	// Usage.PromptTokensDetails and EngineStats report what it served.
	PrefixCacheBytes int64

	// ConstraintCacheBytes is the byte budget of the compiled structured
	// outputs constraints the engine keeps (response_format json_schema
	// and json_object, structured_outputs json / regex / choice, the
	// schemas tool_choice named and required enforce), keyed by their kind
	// and canonical text, as vLLM's xgrammar backend keeps compiled
	// grammars (VLLM_XGRAMMAR_CACHE_MB): a request that repeats a schema
	// skips its compilation (up to about 0.4 s for a schema at the
	// limits) and shares the masks cached for its automaton's states. At
	// most MaxConstraintCacheEntries are kept; the least recently used go
	// first; the memory counted (the automata, their cached DFA states and
	// masks, which grow while requests decode) is checked each time the
	// cache is used and when a constrained request ends (it may exceed
	// the budget while requests decode, by what they add: at most 256
	// masks per constraint, 16 KiB each over DeepSeek-V4's vocabulary,
	// and a regex's DFA states); a constraint larger than the budget alone
	// is served but not kept. A failed compilation is not kept. 0 means
	// DefaultConstraintCacheBytes; negative turns the cache off (every
	// request compiles its constraint, once).
	ConstraintCacheBytes int64

	// Tokenizer enables Chat and Complete. NewEngine loads tokenizer.json
	// from the model's directory when it is nil; NewEngineWithBackend
	// leaves the engine token-only.
	Tokenizer *tokenizer.Tokenizer
	// Encoding is the chat prompt encoding: EncodingV4 (default) or
	// EncodingV32.
	Encoding string
	// Renderer, when set, renders prompts instead of Encoding's encoder
	// (e.g. a template.JinjaRenderer for a HF chat template, or
	// template.LoadRenderer's choice for a model directory).
	Renderer template.Renderer
	// ReasoningParser and ToolCallParser name the output parsers (package
	// parse; SGLang's --reasoning-parser / --tool-call-parser names:
	// "deepseek-v4", "deepseek-v3", "deepseek-r1"; "deepseek-v4",
	// "deepseekv32", "deepseekv31", "deepseekv3"). "" picks the
	// encoding's own; "none" disables one.
	ReasoningParser, ToolCallParser string
}

func (o *EngineOptions) fill() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	if o.StepTokens <= 0 {
		o.StepTokens = 512
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = 4096
	}
	if o.MaxUnread == 0 {
		o.MaxUnread = 1024
	}
	if o.UnreadTimeout == 0 {
		o.UnreadTimeout = 30 * time.Second
	}
	if o.PrefixCacheBytes == 0 {
		o.PrefixCacheBytes = DefaultPrefixCacheBytes
	}
	if o.ConstraintCacheBytes == 0 {
		o.ConstraintCacheBytes = DefaultConstraintCacheBytes
	}
}

// Token is one generated token.
type Token struct {
	ID int32
	// Logprob is the token's log-probability under the raw model
	// distribution (masked by SamplingParams.Constraint, if any); set when
	// SamplingParams.Logprobs or TopLogprobs asks.
	Logprob float32
	// TopLogprobs are the most likely tokens at this position, best first.
	TopLogprobs []TokenLogprob
	// Forced tokens were inserted by the engine (e.g. a tool call forced by
	// tool_choice), not sampled; their Logprob is 0.
	Forced bool
	// FinishReason is "" until the last token, then "stop" (EOS, a stop
	// token id, or a stop string found by the caller) or "length".
	FinishReason string
	// StopToken marks a last token that is the EOS or a stop token id: it
	// ends the output and is not part of its text.
	StopToken bool
	// PromptLogprobs, on the first token of a generation whose
	// SamplingParams.PromptLogprobs asked, holds one entry per prompt
	// token: nil for the first (nothing comes before it), then the
	// PromptLogprob of each later one. Nil on every other token.
	PromptLogprobs []*PromptLogprob
}

// EngineStats is a snapshot of an Engine's counters, for metrics.
type EngineStats struct {
	Running, Waiting int   // requests admitted / queued
	LiveSequences    int   // sequences holding backend state
	StateBytes       int64 // state memory reserved by running requests
	StateBudget      int64 // EngineOptions.StateMemory (0: unlimited)
	PromptTokens     int64 // prompt tokens prefilled by the model, total (restored ones excluded)
	GeneratedTokens  int64 // tokens generated, total
	DecodeSteps      int64 // batched decode calls, total
	DecodeTime       time.Duration
	PrefillTime      time.Duration

	// Prefix caching (EngineOptions.PrefixCacheBytes), as vLLM's
	// prefix_cache_queries / prefix_cache_hits: PrefixCacheQueries counts
	// the prompt tokens of the requests admitted with the cache on, and
	// PrefixCacheHits those of them restored from the cache instead of
	// prefilled (their ratio is the hit rate). PrefixCacheBytes and
	// PrefixCacheEntries are the cache's size now; PrefixCacheBudget is its
	// budget (0: prefix caching off).
	PrefixCacheQueries, PrefixCacheHits int64
	PrefixCacheBytes, PrefixCacheBudget int64
	PrefixCacheEntries                  int

	// The cache of compiled structured-output constraints
	// (EngineOptions.ConstraintCacheBytes), as xgrammar's GrammarCompiler
	// cache that vLLM sizes with VLLM_XGRAMMAR_CACHE_MB:
	// ConstraintCacheHits counts the constraints requests got without
	// compiling them (kept, or being compiled by a concurrent request),
	// ConstraintCacheMisses the compilations started through the cache
	// (failed ones included). ConstraintCacheEntries and
	// ConstraintCacheBytes are the compiled constraints kept now and the
	// memory they hold (automata, cached DFA states and masks, measured
	// when Stats is called; it may exceed the budget while requests
	// decode, until one ends or uses the cache);
	// ConstraintCacheBudget is the byte budget (0: the cache is off).
	ConstraintCacheHits, ConstraintCacheMisses  int64
	ConstraintCacheBytes, ConstraintCacheBudget int64
	ConstraintCacheEntries                      int
}

type statsCounters struct {
	running, waiting, liveSeqs, stateBytes atomic.Int64
	prefillTokens, genTokens, decodeSteps  atomic.Int64
	decodeNanos, prefillNanos              atomic.Int64
	cacheQueries, cacheHits                atomic.Int64
	cacheBytes, cacheEntries               atomic.Int64
}

// Engine serves many concurrent generation requests on one model with
// continuous batching: one goroutine runs steps of a batched Decode over all
// decoding sequences plus chunked prefill of new ones under a per-step token
// budget; requests join and leave between steps. Admission is FIFO under a
// state-memory budget. Cancelling a request's context frees its state before
// the next step.
//
// An Engine is safe for concurrent use. Close it to stop the loop.
type Engine struct {
	b      Backend
	s      *scheduler
	cancel context.CancelFunc
	chat   *chatCodec // nil when the engine has no tokenizer (token API only)
	seedMu sync.Mutex
	seeds  *rand.Rand
	closed sync.Once
	// vocab is the tokenizer's vocabulary prepared for structured outputs,
	// built on first use (constraintVocab).
	vocabOnce sync.Once
	vocab     *constraintVocab
	// cons keeps the compiled constraints of requests
	// (EngineOptions.ConstraintCacheBytes; nil: off).
	cons *constraintCache
}

// NewEngineWithBackend starts an Engine on any Backend. With
// opts.Tokenizer set, Chat and Complete work too. Errors: an unknown
// encoding or parser name.
func NewEngineWithBackend(b Backend, opts EngineOptions) (*Engine, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidParams)
	}
	var codec *chatCodec
	if opts.Tokenizer != nil {
		c, err := newTokenizerCodec(&opts)
		if err != nil {
			return nil, err
		}
		codec = c
	}
	e := newEngine(b, opts)
	e.chat = codec
	return e, nil
}

func newEngine(b Backend, opts EngineOptions) *Engine {
	opts.fill()
	snap, _ := b.(SnapshotBackend) // before cappedBackend hides it
	if opts.MaxContext > 0 && opts.MaxContext < b.MaxContext() {
		b = cappedBackend{b, opts.MaxContext}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &scheduler{b: b, all: allLogitsOf(b), opts: opts, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e := &Engine{b: b, s: s, cancel: cancel, seeds: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	if opts.ConstraintCacheBytes > 0 {
		e.cons = newConstraintCache(opts.ConstraintCacheBytes, MaxConstraintCacheEntries)
		s.cons = e.cons
	}
	if snap != nil && opts.PrefixCacheBytes > 0 {
		s.snap = snap
		s.cache = newPrefixCache(opts.PrefixCacheBytes, e.newSeed())
	}
	go s.loop(ctx)
	return e
}

// Close stops accepting requests, fails the queued ones with
// ErrEngineClosed, lets running ones finish until ctx is done, then cancels
// them. It returns ctx's error if it had to cancel. A nil ctx waits for the
// running requests as context.Background() does. A nil Engine's Close does
// nothing.
func (e *Engine) Close(ctx context.Context) error {
	if e == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	e.s.mu.Lock()
	e.s.closed = true
	e.s.mu.Unlock()
	e.s.signal()
	var err error
	select {
	case <-e.s.done:
	case <-ctx.Done():
		// "had to cancel": requests were running (admitted, state live)
		// when ctx ended, or the loop ended some. An idle engine's loop
		// may simply not have exited yet: that is no cancellation (it
		// returned ctx's error every time, e.g. from an already-expired ctx).
		busy := e.s.stats.liveSeqs.Load() > 0
		e.cancel()
		<-e.s.done
		if busy || e.s.killed.Load() {
			err = ctx.Err()
		}
	}
	e.cancel()
	return err
}

// Stats returns current counters (zero for a nil Engine).
func (e *Engine) Stats() EngineStats {
	if e == nil {
		return EngineStats{}
	}
	c := &e.s.stats
	s := EngineStats{
		Running:         int(c.running.Load()),
		Waiting:         int(c.waiting.Load()),
		LiveSequences:   int(c.liveSeqs.Load()),
		StateBytes:      c.stateBytes.Load(),
		StateBudget:     e.s.opts.StateMemory,
		PromptTokens:    c.prefillTokens.Load(),
		GeneratedTokens: c.genTokens.Load(),
		DecodeSteps:     c.decodeSteps.Load(),
		DecodeTime:      time.Duration(c.decodeNanos.Load()),
		PrefillTime:     time.Duration(c.prefillNanos.Load()),

		PrefixCacheQueries: c.cacheQueries.Load(),
		PrefixCacheHits:    c.cacheHits.Load(),
		PrefixCacheBytes:   c.cacheBytes.Load(),
		PrefixCacheBudget:  e.s.cacheBudget(),
		PrefixCacheEntries: int(c.cacheEntries.Load()),
	}
	e.cons.fill(&s)
	return s
}

// VocabSize is the number of logits per position (0 for a nil Engine).
func (e *Engine) VocabSize() int {
	if e == nil {
		return 0
	}
	return e.b.VocabSize()
}

// MaxContext is the context length in tokens: the model's, or
// EngineOptions.MaxContext when smaller (0 for a nil Engine).
func (e *Engine) MaxContext() int {
	if e == nil {
		return 0
	}
	return e.b.MaxContext()
}

// errNilEngine is returned by the request methods of a nil *Engine.
var errNilEngine = fmt.Errorf("%w: nil engine", ErrInvalidParams)

func (e *Engine) newSeed() uint64 {
	e.seedMu.Lock()
	defer e.seedMu.Unlock()
	return e.seeds.Uint64()
}

// start validates and queues one generation. With p.Constraint, after is
// the token that activates it (-1: from the first token).
func (e *Engine) start(ctx context.Context, prompt []int32, p SamplingParams, forcer func(int32) []int32, after int32) (*request, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if err := p.Validate(e.b.VocabSize()); err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, paramErr("prompt", "empty prompt")
	}
	vocab := e.b.VocabSize()
	for _, t := range prompt {
		if t < 0 || int(t) >= vocab {
			return nil, paramErr("prompt", "token id %d out of range [0, %d)", t, vocab)
		}
	}
	var con *constrained
	if p.Constraint != nil {
		v := e.constraintVocab()
		if v == nil {
			return nil, &ParamError{Param: "response_format", Msg: errNoConstraintVocab.Error()}
		}
		con = newConstrained(p.Constraint, v, after, e.b.EOS())
	}
	if p.PromptLogprobs != nil && e.s.all == nil {
		return nil, paramErr("prompt_logprobs", "not supported: the engine's backend does not give every position's logits (dsv4.AllLogitsBackend)")
	}
	ctxLen := e.b.MaxContext()
	if len(prompt) >= ctxLen {
		return nil, &ContextLengthError{PromptTokens: len(prompt), Context: ctxLen}
	}
	maxTok := p.MaxTokens
	if maxTok == 0 {
		maxTok = e.s.opts.DefaultMaxTokens
	}
	if maxTok == 0 || len(prompt)+maxTok > ctxLen {
		if p.MaxTokens > 0 {
			return nil, &ContextLengthError{PromptTokens: len(prompt), MaxTokens: p.MaxTokens, Context: ctxLen}
		}
		maxTok = ctxLen - len(prompt)
	}
	r := &request{
		ctx: ctx,
		// A copy: the scheduler appends sampled tokens to a slice of the
		// prompt's array (pending), which must not be the caller's (it wrote
		// past len(prompt) into a caller's spare capacity, and requests
		// sharing one prompt slice, such as the n choices of a chat request,
		// overwrote each other's next token).
		prompt:    slices.Clone(prompt),
		samp:      newSampler(p, prompt, e.b.EOS(), e.newSeed()),
		maxTokens: maxTok,
		reserve:   e.b.StateBytes(len(prompt) + maxTok),
		forcer:    forcer,
		enqueued:  time.Now(),
		notify:    make(chan struct{}, 1),
	}
	r.samp.con = con
	if p.PromptLogprobs != nil {
		r.promptLP = make([]*PromptLogprob, len(prompt))
	}
	if b := e.s.opts.StateMemory; b > 0 && r.reserve > b {
		return nil, fmt.Errorf("%w: needs %d bytes, budget %d", ErrRequestTooLarge, r.reserve, b)
	}
	if err := e.s.submit(r); err != nil {
		return nil, err
	}
	r.unwatch = context.AfterFunc(ctx, func() { e.s.stop(r) })
	return r, nil
}

// tokens iterates over r's events until it closes. Breaking out of the loop
// (or an error) stops the request and frees its state.
// A second range yields only ErrIteratorReused.
func (e *Engine) tokens(r *request) iter.Seq2[Token, error] {
	var used atomic.Bool
	return func(yield func(Token, error) bool) {
		if used.Swap(true) {
			yield(Token{}, ErrIteratorReused)
			return
		}
		defer r.unwatch()
		defer e.s.stop(r)
		var buf []tokenEvent
		for {
			var closed bool
			buf, closed = r.take(buf)
			if len(buf) > 0 {
				e.s.signal() // a request paused on MaxUnread may step again
			}
			for _, ev := range buf {
				if ev.err != nil {
					yield(Token{}, ev.err)
					return
				}
				if !yield(ev.Token, nil) {
					return
				}
				if ev.FinishReason != "" {
					return
				}
			}
			if closed {
				if len(buf) == 0 {
					err := r.ctx.Err()
					if err == nil {
						err = ErrEngineClosed
					}
					yield(Token{}, err)
				}
				return
			}
			<-r.notify
		}
	}
}

// Generate runs one completion of prompt (token ids, [0, VocabSize)) and
// returns an iterator over the generated tokens; the last one carries the
// FinishReason. Stop strings are not applied at this level (they need the
// text: see Chat and Complete). Validation errors, ErrQueueFull,
// ErrRequestTooLarge and ErrContextLength are returned at once; errors during
// generation (ctx cancelled, ErrEngineClosed, a backend error) end the
// iteration with a non-nil error. Breaking out of the loop frees the state.
// The iterator is single-use: a second range yields only ErrIteratorReused.
// The request is queued when Generate returns: range over the iterator (or
// cancel ctx). Unread, it pauses once EngineOptions.MaxUnread tokens wait for
// the consumer and ends with ErrUnreadTimeout (state freed) after
// EngineOptions.UnreadTimeout paused. A nil Engine gives ErrInvalidParams.
func (e *Engine) Generate(ctx context.Context, prompt []int32, p SamplingParams) (iter.Seq2[Token, error], error) {
	if e == nil {
		return nil, errNilEngine
	}
	r, err := e.start(ctx, prompt, p, nil, -1)
	if err != nil {
		return nil, err
	}
	return e.tokens(r), nil
}

// cappedBackend is a Backend whose context length is EngineOptions.MaxContext.
type cappedBackend struct {
	Backend
	maxContext int
}

func (b cappedBackend) MaxContext() int { return b.maxContext }
