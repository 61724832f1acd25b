package dsv4

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/dsv4go/dsv4go/kernels"
)

// tensorSource hands the model builder the float32 (dequantized) data of a tensor by its
// HF name, checking its shape; int32s is for integer tables (tid2eid).
type tensorSource interface {
	float32s(name string, shape ...int) ([]float32, error)
	int32s(name string, shape ...int) ([]int32, error)
}

// wbind reads tensors under a name prefix, keeping the first error (later reads
// return nil once one failed).
type wbind struct {
	src    tensorSource
	prefix string
	err    error
}

func (b *wbind) f32(name string, shape ...int) []float32 {
	if b.err != nil {
		return nil
	}
	t, err := b.src.float32s(b.prefix+name, shape...)
	b.err = err
	return t
}

// network is the float32 CPU form of a DeepSeek-V4 model: weights dequantized at load,
// laid out as nn.Linear [out][in], plus the RoPE tables. It is immutable after build and
// safe for concurrent forwards over distinct sequences.
type network struct {
	cfg     *Config
	eps     float32 // rms_norm_eps
	hcEps   float32
	ropeDim int

	embed  []float32 // [V][D]
	lmHead []float32 // [V][D]
	norm   []float32 // [D]
	head   hcHead
	layers []*layer

	ropeMain, ropeCompress *ropeTable
}

// hcSite is one mHC mixing site (attn_hc / ffn_hc): fn [(2+hc)·hc][hc·D], base, scale[3].
type hcSite struct {
	fn    []float32
	base  []float32
	scale []float32
}

// hcHead is the final stream collapse (hc_head): fn [hc][hc·D], base [hc], scale [1].
type hcHead struct {
	fn, base, scale []float32
}

type layer struct {
	idx      int
	typ      LayerType
	mlpType  MLPType
	attnHC   hcSite
	ffnHC    hcSite
	inNorm   []float32
	postNorm []float32
	attn     attention
	moe      moe
}

// build binds the tensors of src to a network for cfg, with HF names
// (model.layers.N.self_attn.q_a_proj.weight, ...). Errors wrap the source's errors.
func build(cfg *Config, src tensorSource) (*network, error) {
	n := &network{cfg: cfg, eps: float32(cfg.RMSNormEps), hcEps: float32(cfg.HCEps), ropeDim: cfg.QKRopeHeadDim}
	D, V, hc := cfg.HiddenSize, cfg.VocabSize, cfg.HCMult
	g := &wbind{src: src}
	get := g.f32
	n.embed = get("embed_tokens.weight", V, D)
	if cfg.TieWordEmbeddings {
		n.lmHead = n.embed
	} else {
		n.lmHead = get("lm_head.weight", V, D)
	}
	n.norm = get("norm.weight", D)
	n.head = hcHead{fn: get("hc_head.hc_fn", hc, hc*D), base: get("hc_head.hc_base", hc), scale: get("hc_head.hc_scale", 1)}
	n.ropeMain = newRopeTable(cfg.RopeMain, cfg.QKRopeHeadDim, cfg.MaxPositionEmbeddings)
	n.ropeCompress = newRopeTable(cfg.RopeCompress, cfg.QKRopeHeadDim, cfg.MaxPositionEmbeddings)
	mix := cfg.HCMixDim()
	for i := 0; i < cfg.NumHiddenLayers && g.err == nil; i++ {
		p := fmt.Sprintf("layers.%d.", i)
		l := &layer{idx: i, typ: cfg.LayerTypes[i], mlpType: cfg.MLPLayerTypes[i]}
		l.attnHC = hcSite{fn: get(p+"attn_hc.fn", mix, hc*D), base: get(p+"attn_hc.base", mix), scale: get(p+"attn_hc.scale", 3)}
		l.ffnHC = hcSite{fn: get(p+"ffn_hc.fn", mix, hc*D), base: get(p+"ffn_hc.base", mix), scale: get(p+"ffn_hc.scale", 3)}
		l.inNorm = get(p+"input_layernorm.weight", D)
		l.postNorm = get(p+"post_attention_layernorm.weight", D)
		if g.err == nil {
			g.err = l.attn.bind(n, cfg, i, src)
		}
		if g.err == nil {
			g.err = l.moe.bind(cfg, i, src)
		}
		n.layers = append(n.layers, l)
	}
	if g.err != nil {
		return nil, g.err
	}
	return n, nil
}

// segment is one sequence's share of a forward batch: its state and new token ids.
type segment struct {
	st  *SequenceState
	ids []int32
}

// batch describes the rows of one forward: row r is token ids[r] of segment seg[r] at
// absolute position pos[r].
type batch struct {
	segs  []segment
	rows  int
	ids   []int32
	pos   []int
	seg   []int
	first []int // first row of each segment
}

func newBatch(segs []segment) *batch {
	b := &batch{segs: segs}
	for si, s := range segs {
		b.first = append(b.first, b.rows)
		for i, id := range s.ids {
			b.ids = append(b.ids, id)
			b.pos = append(b.pos, s.st.Position+i)
			b.seg = append(b.seg, si)
		}
		b.rows += len(s.ids)
	}
	return b
}

// forward runs the model over the batch, updating every segment's state, and returns
// the logits of every row ([rows][V]) when all is true, else of the last row of each
// segment ([len(segs)][V]). Source: DeepseekV4ForCausalLM.forward.
func (n *network) forward(ctx context.Context, segs []segment, all bool) ([][]float32, error) {
	cfg := n.cfg
	b := newBatch(segs)
	D, hc := cfg.HiddenSize, cfg.HCMult
	R := b.rows
	streams := make([]float32, R*hc*D)
	for r := 0; r < R; r++ {
		e := n.embed[int(b.ids[r])*D : int(b.ids[r]+1)*D]
		for j := 0; j < hc; j++ {
			copy(streams[(r*hc+j)*D:], e)
		}
	}
	u := make([]float32, R*D)
	h := make([]float32, R*D)
	y := make([]float32, R*D)
	mixes := newMHC(R, hc)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// No cancellation check inside: a forward step updates the sequences' state layer by
	// layer and must run to the end to leave it consistent.
	for _, l := range n.layers {
		n.mhcPre(&l.attnHC, streams, R, mixes, u)
		kernels.RMSNorm(h, u, l.inNorm, R, D, n.eps)
		l.attn.forward(n, l.idx, b, h, y)
		n.mhcPost(streams, y, R, mixes)

		n.mhcPre(&l.ffnHC, streams, R, mixes, u)
		kernels.RMSNorm(h, u, l.postNorm, R, D, n.eps)
		l.moe.forward(n, b, h, y)
		n.mhcPost(streams, y, R, mixes)
	}
	for _, s := range segs {
		s.st.Position += len(s.ids)
	}
	var rows []int
	if all {
		for r := 0; r < R; r++ {
			rows = append(rows, r)
		}
	} else {
		for si, s := range segs {
			rows = append(rows, b.first[si]+len(s.ids)-1)
		}
	}
	return n.logits(streams, rows), nil
}

// logits applies hc_head, the final norm and lm_head to the given rows of the streams.
func (n *network) logits(streams []float32, rows []int) [][]float32 {
	cfg := n.cfg
	D, hc, V := cfg.HiddenSize, cfg.HCMult, cfg.VocabSize
	x := make([]float32, len(rows)*D)
	flat := make([]float32, hc*D)
	mix := make([]float32, hc)
	for i, r := range rows {
		s := streams[r*hc*D : (r+1)*hc*D]
		kernels.RMSNorm(flat, s, nil, 1, hc*D, n.eps)
		kernels.MatMul(mix, flat, n.head.fn, 1, hc, hc*D)
		xi := x[i*D : (i+1)*D]
		for j := 0; j < hc; j++ {
			pre := sigmoid(mix[j]*n.head.scale[0]+n.head.base[j]) + n.hcEps
			for d := 0; d < D; d++ {
				xi[d] += pre * s[j*D+d]
			}
		}
	}
	kernels.RMSNorm(x, x, n.norm, len(rows), D, n.eps)
	out := make([]float32, len(rows)*V)
	kernels.MatMul(out, x, n.lmHead, len(rows), V, D)
	res := make([][]float32, len(rows))
	for i := range rows {
		res[i] = out[i*V : (i+1)*V : (i+1)*V]
	}
	return res
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// prefillChunk is the most tokens one internal forward step takes; a longer Prefill
// runs several steps (bounding activation memory) and checks ctx between them. A
// variable so that tests can shrink it.
var prefillChunk = 512

// NewSequence returns an empty Sequence (no tokens) for this model. On a nil Model it
// returns a released Sequence, on which every call fails with ErrSequence.
func (m *Model) NewSequence() *Sequence {
	if m == nil || m.net == nil {
		s := &Sequence{released: true}
		s.free()
		s.use.Store(useReleased)
		return s
	}
	s := &Sequence{net: m.net, st: m.net.newState()}
	s.sync()
	return s
}

// errNilModel is returned by the methods of a nil *Model.
var errNilModel = fmt.Errorf("%w: nil model", ErrInvalidParams)

// errNilContext is what every entry point that takes a context returns for
// a nil one (the standard library's http.NewRequestWithContext refuses it
// likewise), instead of a nil-pointer panic: in Generate or ChatStream that
// panic came from the engine's own goroutine, after the request was queued,
// and took the whole process down.
var errNilContext = fmt.Errorf("%w: nil context (use context.Background())", ErrInvalidParams)

// SequenceBytes returns the KV-state bytes of one sequence after n tokens: per layer
// min(n, sliding_window-1)·head_dim float32 values of the window, and for CSA/HCA
// layers n/m compressed entries of head_dim, the unclosed window's (c, z) buffer
// ((n mod m)·coff·d each) and, for CSA, the [m][d] overlap pair; the lightning
// indexer adds the same at index_head_dim. It equals Sequence.Bytes after n tokens.
func (m *Model) SequenceBytes(n int) int64 {
	if n < 0 || m == nil || m.net == nil {
		return 0
	}
	return m.net.sequenceBytes(n)
}

// acquire takes s for one call of m (see Sequence.acquire) and checks that it belongs
// to m; on success the caller must call s.done.
func (m *Model) acquire(s *Sequence) error {
	if err := s.acquire(); err != nil {
		return err
	}
	if s.net != m.net {
		s.done()
		return fmt.Errorf("%w: sequence belongs to another model", ErrSequence)
	}
	return nil
}

func (m *Model) checkIDs(ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= m.cfg.VocabSize {
			return fmt.Errorf("%w: ids[%d] = %d, vocab size %d", ErrTokenID, i, id, m.cfg.VocabSize)
		}
	}
	return nil
}

func (m *Model) checkLen(s *Sequence, add int) error {
	if s.st.Position+add > m.cfg.MaxPositionEmbeddings {
		return fmt.Errorf("%w: %d + %d tokens > max_position_embeddings %d", ErrContextLength, s.st.Position, add, m.cfg.MaxPositionEmbeddings)
	}
	return nil
}

// Prefill appends ids to seq and returns the logits [vocab] of the last one. It may be
// called repeatedly (chunked prefill): the result is the same as one call over the
// concatenation. Long inputs run in steps of up to 512 tokens with ctx checked between
// steps; when ctx ends, the error is ctx.Err() and seq holds the tokens of the finished
// steps (Len reports them). Errors: ErrSequence (nil, released or foreign seq, seq in
// use by another call; empty ids), ErrTokenID, ErrContextLength; seq is unchanged by
// those; ErrInvalidParams for a nil Model. When seq is released during the call (see
// Sequence.Release), Prefill stops before its next step and returns an error wrapping
// ErrSequence; if its last step had already begun, it returns the logits.
func (m *Model) Prefill(ctx context.Context, seq *Sequence, ids []int32) ([]float32, error) {
	out, err := m.prefill(ctx, seq, ids, false)
	if err != nil {
		return nil, err
	}
	return out[len(out)-1], nil
}

// PrefillAll is Prefill returning the logits of every position of ids: [len(ids)][vocab].
func (m *Model) PrefillAll(ctx context.Context, seq *Sequence, ids []int32) ([][]float32, error) {
	return m.prefill(ctx, seq, ids, true)
}

func (m *Model) prefill(ctx context.Context, seq *Sequence, ids []int32, all bool) (_ [][]float32, err error) {
	if m == nil || m.net == nil {
		return nil, errNilModel
	}
	if ctx == nil {
		return nil, errNilContext
	}
	if err := m.acquire(seq); err != nil {
		return nil, err
	}
	defer func() {
		if seq.done() && err != nil && !errors.Is(err, ErrSequence) {
			err = fmt.Errorf("%w (released during prefill: %w)", errReleased, err)
		}
	}()
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: prefill of no tokens", ErrSequence)
	}
	if err := m.checkIDs(ids); err != nil {
		return nil, err
	}
	if err := m.checkLen(seq, len(ids)); err != nil {
		return nil, err
	}
	var out [][]float32
	for i := 0; i < len(ids); i += prefillChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if seq.releasing() {
			return nil, fmt.Errorf("%w during prefill", errReleased)
		}
		chunk := ids[i:min(i+prefillChunk, len(ids))]
		last := i+prefillChunk >= len(ids)
		lg, err := m.net.forward(ctx, []segment{{&seq.st, chunk}}, all)
		if err != nil {
			return nil, err
		}
		seq.sync()
		if all || last {
			out = append(out, lg...)
		}
	}
	return out, nil
}

// Decode runs one step for many sequences at once: ids[i] is appended to seqs[i]
// (sequences may have any lengths) and the result holds the logits [vocab] of each.
// The projections and experts run batched over all sequences; attention runs per
// sequence. Decode holds every sequence of the batch for the whole call. An empty
// batch (no sequences, no ids) is a no-op that returns nil logits and no error. Errors
// (nothing changes): ErrSequence for a nil, released, foreign or repeated sequence, one
// in use by another call, or len(ids) != len(seqs); ErrEmptySequence (wrapping
// ErrSequence) for a sequence never prefilled; ErrTokenID, ErrContextLength,
// ctx.Err(); ErrInvalidParams for a nil Model. A sequence released during the call
// still completes the step (see Sequence.Release).
func (m *Model) Decode(ctx context.Context, seqs []*Sequence, ids []int32) ([][]float32, error) {
	if m == nil || m.net == nil {
		return nil, errNilModel
	}
	if ctx == nil {
		return nil, errNilContext
	}
	if len(seqs) != len(ids) {
		return nil, fmt.Errorf("%w: %d sequences, %d ids", ErrSequence, len(seqs), len(ids))
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	if err := m.checkIDs(ids); err != nil {
		return nil, err
	}
	seen := make(map[*Sequence]bool, len(seqs))
	segs := make([]segment, len(seqs))
	held := make([]*Sequence, 0, len(seqs))
	defer func() {
		for _, s := range held {
			s.done()
		}
	}()
	for i, s := range seqs {
		if seen[s] && s != nil {
			return nil, fmt.Errorf("%w: seqs[%d] appears twice", ErrSequence, i)
		}
		if err := m.acquire(s); err != nil {
			return nil, fmt.Errorf("seqs[%d]: %w", i, err)
		}
		held = append(held, s)
		seen[s] = true
		if err := m.checkLen(s, 1); err != nil {
			return nil, err
		}
		if s.st.Position == 0 {
			return nil, fmt.Errorf("seqs[%d]: %w", i, ErrEmptySequence)
		}
		segs[i] = segment{&s.st, ids[i : i+1]}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return m.net.forward(ctx, segs, false)
}

// Restore makes a new Sequence of this model from a state taken by Sequence.Snapshot
// (possibly on another engine with the same checkpoint). The state is validated against
// the model's config (layer types, widths, rates and every length implied by Position)
// and deep-copied. Errors: ErrSequence describing the first mismatch.
func (m *Model) Restore(st *SequenceState) (*Sequence, error) {
	if m == nil || m.net == nil {
		return nil, errNilModel
	}
	if err := m.net.validate(st); err != nil {
		return nil, err
	}
	s := &Sequence{net: m.net, st: *st.clone()}
	s.sync()
	return s, nil
}
