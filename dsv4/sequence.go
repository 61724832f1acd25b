package dsv4

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
)

// ErrSequence reports misuse of a Sequence: used after Release, passed twice to one
// Decode, belonging to another Model, or a SequenceState that does not fit the Model.
var ErrSequence = errors.New("dsv4: invalid sequence")

// ErrEmptySequence reports a Decode of a sequence that holds no tokens (never
// prefilled): a sequence's first tokens go through Prefill. It wraps ErrSequence.
var ErrEmptySequence = fmt.Errorf("%w: no tokens yet (Prefill the prompt before Decode)", ErrSequence)

// ErrTokenID reports a token id outside [0, vocab_size).
var ErrTokenID = errors.New("dsv4: token id out of range")

// Sequence is the per-request state of the forward pass: the KV cache of every layer
// (sliding-window ring, compressor buffers, overlap and compressed entries, the
// lightning indexer's own) and the number of tokens processed. Create it with
// Model.NewSequence or Model.Restore; feed it with Model.Prefill and Model.Decode.
//
// One call at a time: Prefill, Decode and Snapshot take the Sequence for their whole
// duration (an atomic in-use flag); a second call on it meanwhile (another goroutine,
// or the same Sequence twice in one Decode batch) fails at once with an error wrapping
// ErrSequence ("in use by another call") and changes nothing. Len, Bytes and Release
// may be called at any time from any goroutine; see Release for a Release during a call.
// Distinct Sequences are independent.
type Sequence struct {
	net *network
	st  SequenceState
	// released is true once the state is freed; read and written only by the holder
	// of the sequence (use == useBusy) or after the transition to useReleased.
	released bool
	use      atomic.Int32 // useIdle, useBusy, useBusyReleased or useReleased
	// pos and nbytes mirror st.Position and st.Bytes() as of the end of the last call
	// (or internal Prefill step), for Len and Bytes while a call runs.
	pos, nbytes atomic.Int64
}

// States of Sequence.use.
const (
	useIdle         = iota // no call runs
	useBusy                // a call runs
	useBusyReleased        // a call runs and Release was called: the call frees the state at its end
	useReleased            // released, state freed
	usePeek                // Len or Bytes reads the idle state (a few microseconds)
)

// errInUse and errReleased are the ErrSequence errors of acquire.
var (
	errInUse    = fmt.Errorf("%w: sequence in use by another call", ErrSequence)
	errReleased = fmt.Errorf("%w: sequence was released", ErrSequence)
)

// acquire takes the sequence for one call: errInUse while another call holds it,
// errReleased after Release (also one still pending on a running call).
func (s *Sequence) acquire() error {
	if s == nil {
		return fmt.Errorf("%w: nil sequence", ErrSequence)
	}
	for !s.use.CompareAndSwap(useIdle, useBusy) {
		switch s.use.Load() {
		case usePeek:
			runtime.Gosched()
		case useBusy:
			return errInUse
		case useBusyReleased, useReleased:
			return errReleased
		}
	}
	if s.released { // released without the flag (e.g. moved by TransferKV)
		s.free()
		s.use.Store(useReleased)
		return errReleased
	}
	s.sync()
	return nil
}

// peek runs f with the sequence idle and held against calls; false (f not run) while
// a call holds it, after Release, or during another peek.
func (s *Sequence) peek(f func()) bool {
	if !s.use.CompareAndSwap(useIdle, usePeek) {
		return false
	}
	f()
	s.use.Store(useIdle)
	return true
}

// releasing reports whether Release was called during the current call (the holder
// may stop early).
func (s *Sequence) releasing() bool { return s.use.Load() == useBusyReleased }

// sync publishes the state's length and size for Len and Bytes; holder only.
func (s *Sequence) sync() {
	s.pos.Store(int64(s.st.Position))
	s.nbytes.Store(s.st.Bytes())
}

// done ends the call that acquired s. When Release was called meanwhile it frees the
// state now and reports true.
func (s *Sequence) done() bool {
	s.sync()
	if s.use.CompareAndSwap(useBusy, useIdle) {
		return false
	}
	// useBusyReleased: only this goroutine may move it on.
	s.free()
	s.use.Store(useReleased)
	return true
}

// free drops the state; holder only.
func (s *Sequence) free() {
	s.released = true
	s.st = SequenceState{}
	s.pos.Store(0)
	s.nbytes.Store(0)
}

// SequenceState is the complete, transferable state of a Sequence, as typed
// components in exported fields (the contract between the forward pass, the engine and
// disaggregation). All float32 slices are row-major. A state taken by Snapshot is a deep
// copy: later use of the Sequence does not change it.
type SequenceState struct {
	// Position is the number of tokens processed; the next token has this position.
	Position int
	// Layers holds one entry per decoder layer, in order.
	Layers []LayerState
}

// LayerState is one decoder layer's share of a SequenceState.
type LayerState struct {
	// Type is the layer's attention type (must match the Model's config on Restore).
	Type LayerType
	// Window holds the shared K=V vectors (after kv_norm and RoPE) of the last
	// min(Position, sliding_window-1) tokens, oldest first: [n][head_dim].
	Window []float32
	// Compressor is the CSA/HCA compressor's state (nil for sliding_attention layers).
	Compressor *CompressorState
	// Indexer is the lightning indexer's compressor state (CSA layers only, else nil).
	Indexer *CompressorState
}

// CompressorState is the state of one compressor (the layer's KV compressor, or the
// lightning indexer's key compressor). Width is d (head_dim, or index_head_dim for the
// indexer); the per-token projections are coff·d wide, coff = 2 for the overlapping CSA
// scheme and 1 for HCA. Source: transformers DeepseekV4HCACache / DeepseekV4CSACache.
type CompressorState struct {
	// Width is the entry width d.
	Width int
	// Rate is the compression rate m (tokens per entry).
	Rate int
	// Overlap is true for the CSA scheme (coff = 2).
	Overlap bool
	// BufferKV and BufferGate hold the projections c and z (z with the position bias
	// already added) of the tokens of the unclosed window: [Position mod Rate][coff·d].
	BufferKV, BufferGate []float32
	// OverlapKV and OverlapGate hold the first halves (Ca, za + bias) of the last
	// closed window, [Rate][d]; nil before the first window closes or for HCA.
	OverlapKV, OverlapGate []float32
	// Entries holds the compressed entries so far (after kv_norm and RoPE at w·Rate):
	// [Position / Rate][d].
	Entries []float32
}

// NumEntries returns the number of compressed entries.
func (c *CompressorState) NumEntries() int {
	if c.Width == 0 {
		return 0
	}
	return len(c.Entries) / c.Width
}

func (c *CompressorState) bytes() int64 {
	if c == nil {
		return 0
	}
	return 4 * int64(len(c.BufferKV)+len(c.BufferGate)+len(c.OverlapKV)+len(c.OverlapGate)+len(c.Entries))
}

func (c *CompressorState) clone() *CompressorState {
	if c == nil {
		return nil
	}
	d := *c
	d.BufferKV = cloneF(c.BufferKV, c.Rate*c.coff()*c.Width)
	d.BufferGate = cloneF(c.BufferGate, c.Rate*c.coff()*c.Width)
	d.OverlapKV = cloneF(c.OverlapKV, 0)
	d.OverlapGate = cloneF(c.OverlapGate, 0)
	d.Entries = cloneF(c.Entries, 0)
	return &d
}

func (c *CompressorState) coff() int {
	if c.Overlap {
		return 2
	}
	return 1
}

// cloneF copies s into a new slice of capacity max(len(s), capacity); nil stays nil
// unless capacity > 0.
func cloneF(s []float32, capacity int) []float32 {
	if s == nil && capacity == 0 {
		return nil
	}
	d := make([]float32, len(s), max(len(s), capacity))
	copy(d, s)
	return d
}

// Bytes returns the bytes of float32 data the state holds (4 per value; slice headers
// and struct overhead excluded). For a Model's config this equals
// Model.SequenceBytes(Position). A nil state holds 0.
func (s *SequenceState) Bytes() int64 {
	if s == nil {
		return 0
	}
	var n int64
	for i := range s.Layers {
		l := &s.Layers[i]
		n += 4*int64(len(l.Window)) + l.Compressor.bytes() + l.Indexer.bytes()
	}
	return n
}

func (n *network) newState() SequenceState {
	cfg := n.cfg
	st := SequenceState{Layers: make([]LayerState, len(n.layers))}
	for i, l := range n.layers {
		ls := &st.Layers[i]
		ls.Type = l.typ
		if c := l.attn.comp; c != nil {
			ls.Compressor = &CompressorState{Width: c.d, Rate: c.m, Overlap: c.overlap}
		}
		if x := l.attn.idx; x != nil {
			ls.Indexer = &CompressorState{Width: x.comp.d, Rate: x.comp.m, Overlap: true}
		}
		_ = cfg
	}
	return st
}

// sequenceBytes returns the float32 bytes a sequence holds after n tokens (the
// analytic form of SequenceState.Bytes).
func (nw *network) sequenceBytes(n int) int64 { return StateBytes(nw.cfg, n) }

// StateBytes returns the bytes of KV state (float32 values, 4 bytes each) that one
// sequence of n tokens holds under cfg: per layer the sliding window,
// min(n, sliding_window-1)·head_dim values; for CSA and HCA layers with rate m,
// ⌊n/m⌋ compressed entries of head_dim, the unclosed window's c and z buffers of
// (n mod m)·coff·head_dim values each (coff 2 for CSA, 1 for HCA) and, for CSA once a
// window has closed, the overlap pair of 2·m·head_dim values; CSA layers add the same
// for the lightning indexer at index_head_dim. It equals SequenceState.Bytes of a
// sequence of n tokens. With the default (V4-Flash geometry, 43 layers alternating
// CSA and HCA) config this is about 11 MiB of windows once 127 tokens are in, plus
// 13.5 KiB per token (24 MiB at 1K tokens, 834 MiB at 64K, 12.9 GiB at 1M).
// A nil cfg or n ≤ 0 gives 0; a size past the int64 range gives math.MaxInt64
// (it wrapped: 104960 bytes for dsv4-tiny at n = 2^62).
func StateBytes(cfg *Config, n int) int64 {
	if cfg == nil || n <= 0 {
		return 0
	}
	// A layer holds at most 15·n·width values (window n·w; per compressor
	// n/m entries, buffers 4·(n mod m), overlap 2·m ≤ 2·n, for the cache
	// and the indexer): 60·n·width bytes. Past int64, saturate instead of
	// wrapping.
	w := int64(max(cfg.HeadDim, cfg.IndexHeadDim, 1))
	layers := int64(max(cfg.NumHiddenLayers, 1))
	if w > math.MaxInt64/64/layers || int64(n) > math.MaxInt64/(64*w*layers) {
		return math.MaxInt64
	}
	comp := func(d, m int, overlap bool) int64 {
		if m <= 0 {
			return 0
		}
		coff := 1
		if overlap {
			coff = 2
		}
		v := int64(n/m)*int64(d) + 2*int64(n%m)*int64(coff*d)
		if overlap && n >= m {
			v += 2 * int64(m*d)
		}
		return v
	}
	var b int64
	for i := 0; i < cfg.NumHiddenLayers && i < len(cfg.LayerTypes); i++ {
		b += int64(min(n, cfg.SlidingWindow-1)) * int64(cfg.HeadDim)
		switch cfg.LayerTypes[i] {
		case LayerCSA:
			b += comp(cfg.HeadDim, cfg.CompressRateCSA, true)
			b += comp(cfg.IndexHeadDim, cfg.CompressRateCSA, true)
		case LayerHCA:
			b += comp(cfg.HeadDim, cfg.CompressRateHCA, false)
		}
	}
	return 4 * b
}

// validate checks that st fits the network (layer types, widths, rates and the
// lengths implied by Position), so that a restored state cannot make the forward pass
// index out of range.
func (n *network) validate(st *SequenceState) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrSequence, fmt.Sprintf(format, a...))
	}
	if st == nil {
		return bad("nil state")
	}
	if st.Position < 0 {
		return bad("negative position %d", st.Position)
	}
	if len(st.Layers) != len(n.layers) {
		return bad("%d layers, model has %d", len(st.Layers), len(n.layers))
	}
	p := st.Position
	chk := func(i int, what string, c *CompressorState, d, m int, overlap bool) error {
		if c == nil {
			return bad("layer %d: missing %s state", i, what)
		}
		if c.Width != d || c.Rate != m || c.Overlap != overlap {
			return bad("layer %d: %s state is width %d rate %d overlap %v, model has %d, %d, %v", i, what, c.Width, c.Rate, c.Overlap, d, m, overlap)
		}
		w := c.coff() * d
		if len(c.BufferKV) != (p%m)*w || len(c.BufferGate) != len(c.BufferKV) {
			return bad("layer %d: %s buffer holds %d/%d values, want %d", i, what, len(c.BufferKV), len(c.BufferGate), (p%m)*w)
		}
		if len(c.Entries) != (p/m)*d {
			return bad("layer %d: %s holds %d entry values, want %d", i, what, len(c.Entries), (p/m)*d)
		}
		ov := 0
		if overlap && p >= m {
			ov = m * d
		}
		if len(c.OverlapKV) != ov || len(c.OverlapGate) != ov {
			return bad("layer %d: %s overlap holds %d/%d values, want %d", i, what, len(c.OverlapKV), len(c.OverlapGate), ov)
		}
		return nil
	}
	for i, l := range n.layers {
		ls := &st.Layers[i]
		if ls.Type != l.typ {
			return bad("layer %d is %q, model has %q", i, ls.Type, l.typ)
		}
		a := &l.attn
		if want := min(p, a.window-1) * a.hd; len(ls.Window) != want {
			return bad("layer %d: window holds %d values, want %d", i, len(ls.Window), want)
		}
		if c := a.comp; c != nil {
			if err := chk(i, "compressor", ls.Compressor, c.d, c.m, c.overlap); err != nil {
				return err
			}
		} else if ls.Compressor != nil {
			return bad("layer %d: compressor state on a sliding layer", i)
		}
		if x := a.idx; x != nil {
			if err := chk(i, "indexer", ls.Indexer, x.comp.d, x.comp.m, true); err != nil {
				return err
			}
		} else if ls.Indexer != nil {
			return bad("layer %d: indexer state on a non-CSA layer", i)
		}
	}
	return nil
}

func (st *SequenceState) clone() *SequenceState {
	d := &SequenceState{Position: st.Position, Layers: make([]LayerState, len(st.Layers))}
	for i, l := range st.Layers {
		d.Layers[i] = LayerState{Type: l.Type, Window: cloneF(l.Window, 0), Compressor: l.Compressor.clone(), Indexer: l.Indexer.clone()}
	}
	return d
}

// Len returns the number of tokens the sequence has processed (0 after Release).
// While a call runs on the sequence it reports the length at the end of the last call
// or internal Prefill step. Safe for concurrent use.
func (s *Sequence) Len() int {
	if s == nil {
		return 0
	}
	n := 0
	if s.peek(func() {
		if !s.released {
			n = s.st.Position
		}
	}) {
		return n
	}
	return int(s.pos.Load())
}

// Release frees the sequence's state. It is idempotent and safe for concurrent use; a
// released Sequence returns ErrSequence from Prefill, Decode and Snapshot.
//
// Release does not wait for a call running on the sequence: it marks the sequence
// released, and that call frees the state when it ends. A Decode step completes and
// returns its logits (the release then takes effect); a Prefill stops before its next
// internal step (see Prefill) and returns an error wrapping ErrSequence, its finished
// steps discarded. Either way no later call can use the sequence.
func (s *Sequence) Release() {
	if s == nil {
		return
	}
	for {
		switch s.use.Load() {
		case useIdle:
			if s.use.CompareAndSwap(useIdle, useBusy) {
				s.free()
				s.use.Store(useReleased)
				return
			}
		case useBusy:
			if s.use.CompareAndSwap(useBusy, useBusyReleased) {
				return
			}
		case usePeek:
			runtime.Gosched()
		default: // released, or pending on the running call
			return
		}
	}
}

// Bytes returns the bytes of KV state the sequence holds now (see SequenceState.Bytes);
// while a call runs, as of the end of the last call or internal Prefill step. Safe for
// concurrent use.
func (s *Sequence) Bytes() int64 {
	if s == nil {
		return 0
	}
	var n int64
	if s.peek(func() {
		if !s.released {
			n = s.st.Bytes()
		}
	}) {
		return n
	}
	return s.nbytes.Load()
}

// Snapshot returns a deep copy of the sequence's state, to move it to another engine
// (Model.Restore) or to branch a request. Errors wrapping ErrSequence: after Release,
// or while another call (Prefill, Decode) runs on it.
func (s *Sequence) Snapshot() (*SequenceState, error) {
	if err := s.acquire(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer s.done()
	return s.st.clone(), nil
}
