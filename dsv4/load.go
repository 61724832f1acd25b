package dsv4

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Option configures Load and OpenCheckpoint.
type Option func(*loadOptions)

type loadOptions struct {
	progress        func(Progress)
	allowUnexpected bool
}

func newLoadOptions(opts []Option) *loadOptions {
	o := &loadOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o
}

func (o *loadOptions) report(p Progress) {
	if o.progress != nil {
		o.progress(p)
	}
}

// Load stages reported through WithProgress.
const (
	StageOpen = "open" // opening and validating shard headers; Done/Total count shards
	StageBind = "bind" // binding tensors to the model; Done/Total count layers
)

// Progress is one progress report of Load: Done of Total units of Stage.
// Reports of a stage start with Done = 0 and end with Done = Total.
type Progress struct {
	Stage string
	Done  int64
	Total int64
}

// WithProgress makes Load call fn (from the loading goroutine) as it opens
// shards and binds layers. fn must be quick; it must not call back into the
// model.
func WithProgress(fn func(Progress)) Option {
	return func(o *loadOptions) { o.progress = fn }
}

// WithAllowUnexpected makes Load ignore tensors the model does not use
// instead of failing with ErrUnexpectedTensor. (MTP tensors, "mtp.*", are
// never unexpected: they are kept in Weights.MTP.)
func WithAllowUnexpected() Option {
	return func(o *loadOptions) { o.allowUnexpected = true }
}

// Load opens a DeepSeek-V4 checkpoint directory (config.json plus one
// safetensors file or a sharded model.safetensors.index.json), validates it
// against its config and returns a Model ready for inference.
//
// Both naming schemes are read (HF "model.layers.N.self_attn.q_a_proj.weight"
// and DeepSeek's "layers.N.attn.wq_a.weight"), in every published form:
// BF16/F32/F16; FP8 E4M3 with 128x128 UE8M0 or F32 block scales; MXFP4 routed
// experts (UE8M0 per 32); NVFP4 routed experts (E4M3 per 16 + F32 global).
// Every weight is dequantized to float32 while loading (plan on 4 bytes per
// parameter of resident memory; package doc, "Memory"); the safetensors files
// are memory-mapped and read once for that.
//
// Errors: *ConfigError (ErrConfig) for config.json; *ValidationError listing
// every missing (ErrMissingTensor), unexpected (ErrUnexpectedTensor),
// mis-shaped (ErrTensorShape) or mis-typed (ErrTensorDType) tensor by name;
// *TensorError with ErrCheckpoint for malformed files; ctx.Err() when ctx is
// cancelled. Close the Model to unmap the files.
func Load(ctx context.Context, dir string, opts ...Option) (*Model, error) {
	o := newLoadOptions(opts)
	ck, err := OpenCheckpoint(ctx, dir, opts...)
	if err != nil {
		return nil, err
	}
	m, err := newModel(ctx, ck, o)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return m, nil
}

// binder binds stored tensors to the Weights structs, collecting problems.
type binder struct {
	ck   *Checkpoint
	cfg  *Config
	errs []*TensorError
}

func (b *binder) add(kind error, name, file, detail string) {
	b.errs = append(b.errs, &TensorError{Kind: kind, Name: name, File: file, Detail: detail})
}

func (b *binder) lookup(canonical string) *entry {
	e := b.ck.entries[canonical]
	if e != nil {
		e.used = true
	}
	return e
}

func (b *binder) raw(e *entry) *Tensor {
	t, err := b.ck.rawTensor(e)
	if err != nil {
		b.errs = append(b.errs, &TensorError{Kind: ErrCheckpoint, Name: e.info.Name, Err: err})
		return nil
	}
	return t
}

func isFloat(d DType) bool { return d == F32 || d == BF16 || d == F16 || d == F64 }

// param binds a non-linear parameter (norm weight, bias, sinks, mHC, ...):
// a float tensor of exactly the given shape.
func (b *binder) param(canonical string, shape ...int) *Tensor {
	e := b.lookup(canonical)
	if e == nil {
		b.add(ErrMissingTensor, canonical, "", fmt.Sprintf("want shape %v", shape))
		return nil
	}
	t := b.raw(e)
	if t == nil {
		return nil
	}
	if !isFloat(t.DType) {
		b.add(ErrTensorDType, t.Name, t.File, fmt.Sprintf("dtype %s, want F32, BF16 or F16", t.DType))
		return nil
	}
	if !slices.Equal(t.Shape, shape) {
		b.add(ErrTensorShape, t.Name, t.File, fmt.Sprintf("shape %v, want %v", t.Shape, shape))
		return nil
	}
	return t
}

// linear binds a linear weight [rows, cols] (canonical name ending in
// ".weight") in any storage form, with its scale siblings.
func (b *binder) linear(canonical string, rows, cols int) *Tensor {
	e := b.lookup(canonical)
	if e == nil {
		b.add(ErrMissingTensor, canonical, "", fmt.Sprintf("want shape [%d %d]", rows, cols))
		return nil
	}
	return b.linearEntry(e, []int{rows, cols})
}

// linearEntry decides the storage form of e from its dtype and siblings and
// checks it against the logical shape want (nil: infer it).
func (b *binder) linearEntry(e *entry, want []int) *Tensor {
	t := b.raw(e)
	if t == nil {
		return nil
	}
	base := strings.TrimSuffix(e.canonical, ".weight")
	sInv := b.lookup(base + ".weight_scale_inv")
	sNV := b.lookup(base + ".weight_scale")
	s2 := b.lookup(base + ".weight_scale_2")
	in := b.lookup(base + ".input_scale")
	stored := t.Shape
	bad := func(kind error, format string, args ...any) *Tensor {
		b.add(kind, t.Name, t.File, fmt.Sprintf(format, args...))
		return nil
	}
	if len(stored) != 2 {
		return bad(ErrTensorShape, "rank %d, want a 2-D weight", len(stored))
	}
	switch {
	case isFloat(t.DType) && sInv == nil && sNV == nil:
		t.Format = FormatFloat
	case t.DType == F8E4M3 && sInv == nil && sNV == nil:
		// Every published FP8 weight has block scales; without them the
		// values would be silently off by the missing factor.
		b.add(ErrMissingTensor, UpstreamName(base+".weight_scale_inv"), t.File,
			fmt.Sprintf("FP8 weight %s has no block scale (.scale / .weight_scale_inv)", t.Name))
		return nil
	case t.DType == F8E4M3 && sInv != nil:
		t.Format = FormatFP8Block
		br, bc := 128, 128
		if q := b.cfg.Quantization; q != nil {
			br, bc = q.WeightBlockSize[0], q.WeightBlockSize[1]
		}
		t.BlockRows, t.BlockCols = br, bc
		t.Scale = b.raw(sInv)
		if t.Scale == nil {
			return nil
		}
		if t.Scale.DType != F8E8M0 && t.Scale.DType != F32 && t.Scale.DType != BF16 && t.Scale.DType != U8 {
			return bad(ErrTensorDType, "FP8 block scale %s has dtype %s, want F8_E8M0 or F32", t.Scale.Name, t.Scale.DType)
		}
	case (t.DType == I8 || t.DType == U8) && sInv != nil && sNV == nil:
		t.Format = FormatMXFP4
		t.Shape = []int{stored[0], 2 * stored[1]}
		t.BlockRows, t.BlockCols = 1, 32
		t.Scale = b.raw(sInv)
		if t.Scale == nil {
			return nil
		}
		if t.Scale.DType != F8E8M0 && t.Scale.DType != U8 {
			return bad(ErrTensorDType, "MXFP4 scale %s has dtype %s, want F8_E8M0", t.Scale.Name, t.Scale.DType)
		}
	case (t.DType == U8 || t.DType == I8) && sNV != nil:
		t.Format = FormatNVFP4
		t.Shape = []int{stored[0], 2 * stored[1]}
		t.BlockRows, t.BlockCols = 1, 16
		t.Scale = b.raw(sNV)
		if t.Scale == nil {
			return nil
		}
		if t.Scale.DType != F8E4M3 {
			return bad(ErrTensorDType, "NVFP4 scale %s has dtype %s, want F8_E4M3", t.Scale.Name, t.Scale.DType)
		}
		if s2 == nil {
			return bad(ErrMissingTensor, "NVFP4 weight without %s", UpstreamName(base+".weight_scale_2"))
		}
		g, ok := b.scalar(s2)
		if !ok {
			return nil
		}
		if !(g > 0) || math.IsInf(float64(g), 0) {
			return bad(ErrTensorValue, "NVFP4 global scale %s = %g, want a positive finite value", s2.info.Name, g)
		}
		t.GlobalScale = g
		if in != nil {
			if v, ok := b.scalar(in); ok {
				t.InputScale = v
			}
		}
	default:
		return bad(ErrTensorDType, "dtype %s with scales [%v %v]: not a float, FP8-block, MXFP4 or NVFP4 weight", t.DType, sInv != nil, sNV != nil)
	}
	if want != nil && !slices.Equal(t.Shape, want) {
		return bad(ErrTensorShape, "logical shape %v (stored %v, %v), want %v", t.Shape, stored, t.Format, want)
	}
	if err := t.check(); err != nil {
		b.errs = append(b.errs, err.(*TensorError))
		return nil
	}
	return t
}

// scalar reads a one-element F32 (or BF16) tensor.
func (b *binder) scalar(e *entry) (float32, bool) {
	t := b.raw(e)
	if t == nil {
		return 0, false
	}
	if t.NumElements() != 1 || !isFloat(t.DType) {
		b.add(ErrTensorShape, t.Name, t.File, fmt.Sprintf("%s %v, want one F32 value", t.DType, t.Shape))
		return 0, false
	}
	v, err := t.Float32()
	if err != nil {
		return 0, false
	}
	return v[0], true
}

func bindWeights(ctx context.Context, ck *Checkpoint, o *loadOptions) (*Weights, error) {
	c := ck.cfg
	b := &binder{ck: ck, cfg: c}
	w := &Weights{MTP: map[string]*Tensor{}}
	D, V := c.HiddenSize, c.VocabSize
	hc := c.HCMult
	w.Embed = b.param("embed_tokens.weight", V, D)
	w.Norm = b.param("norm.weight", D)
	if c.TieWordEmbeddings && ck.entries["lm_head.weight"] == nil {
		w.Head = w.Embed
	} else {
		w.Head = b.param("lm_head.weight", V, D)
	}
	w.HCHead = HyperHead{
		Fn:    b.param("hc_head.hc_fn", hc, hc*D),
		Base:  b.param("hc_head.hc_base", hc),
		Scale: b.param("hc_head.hc_scale", 1),
	}
	n := c.NumHiddenLayers
	o.report(Progress{Stage: StageBind, Total: int64(n)})
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w.Layers = append(w.Layers, b.layer(i))
		o.report(Progress{Stage: StageBind, Done: int64(i + 1), Total: int64(n)})
	}
	// MTP tensors are kept as-is; the rest of the unused ones are unexpected.
	names := make([]string, 0, len(ck.entries))
	for name := range ck.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e := ck.entries[name]
		if e.used || !isMTP(name) {
			continue
		}
		if strings.HasSuffix(name, ".weight") && (ck.entries[strings.TrimSuffix(name, ".weight")+".weight_scale_inv"] != nil ||
			ck.entries[strings.TrimSuffix(name, ".weight")+".weight_scale"] != nil) {
			e.used = true
			if t := b.linearEntry(e, nil); t != nil {
				w.MTP[name] = t
			}
		}
	}
	for _, name := range names {
		e := ck.entries[name]
		if e.used {
			continue
		}
		if isMTP(name) {
			e.used = true
			if t := b.raw(e); t != nil {
				w.MTP[name] = t
			}
			continue
		}
		if !o.allowUnexpected {
			b.add(ErrUnexpectedTensor, e.info.Name, e.file.Path(), "not used by a "+describeLayers(c)+" model")
		}
	}
	if len(b.errs) > 0 {
		return nil, &ValidationError{Errs: b.errs}
	}
	return w, nil
}

func describeLayers(c *Config) string {
	return fmt.Sprintf("%d-layer", c.NumHiddenLayers)
}

func (b *binder) hyper(prefix string) HyperConnection {
	c := b.cfg
	mix := c.HCMixDim()
	return HyperConnection{
		Fn:    b.param(prefix+".fn", mix, c.HCMult*c.HiddenSize),
		Base:  b.param(prefix+".base", mix),
		Scale: b.param(prefix+".scale", 3),
	}
}

func (b *binder) layer(i int) *Layer {
	c := b.cfg
	D, H, hd := c.HiddenSize, c.NumAttentionHeads, c.HeadDim
	p := fmt.Sprintf("layers.%d.", i)
	l := &Layer{Index: i, Type: c.LayerTypes[i], MLPType: c.MLPLayerTypes[i], CompressRate: c.CompressRate(i)}
	l.InputNorm = b.param(p+"input_layernorm.weight", D)
	l.PostAttentionNorm = b.param(p+"post_attention_layernorm.weight", D)
	l.AttnHC = b.hyper(p + "attn_hc")
	l.FFNHC = b.hyper(p + "ffn_hc")

	a := p + "self_attn."
	l.Attn = Attention{
		QAProj: b.linear(a+"q_a_proj.weight", c.QLoraRank, D),
		QANorm: b.param(a+"q_a_norm.weight", c.QLoraRank),
		QBProj: b.linear(a+"q_b_proj.weight", H*hd, c.QLoraRank),
		KVProj: b.linear(a+"kv_proj.weight", hd, D),
		KVNorm: b.param(a+"kv_norm.weight", hd),
		OAProj: b.linear(a+"o_a_proj.weight", c.OGroups*c.OLoraRank, H*hd/c.OGroups),
		OBProj: b.linear(a+"o_b_proj.weight", D, c.OGroups*c.OLoraRank),
		Sinks:  b.param(a+"sinks", H),
	}
	if l.Type != LayerSliding {
		coff := 1
		if l.Type == LayerCSA {
			coff = 2
		}
		q := a + "compressor."
		cp := &Compressor{
			KVProj:       b.linear(q+"kv_proj.weight", coff*hd, D),
			GateProj:     b.linear(q+"gate_proj.weight", coff*hd, D),
			PositionBias: b.param(q+"position_bias", l.CompressRate, coff*hd),
			KVNorm:       b.param(q+"kv_norm.weight", hd),
		}
		if l.Type == LayerCSA {
			q += "indexer."
			ihd := c.IndexHeadDim
			cp.Indexer = &Indexer{
				KVProj:       b.linear(q+"kv_proj.weight", 2*ihd, D),
				GateProj:     b.linear(q+"gate_proj.weight", 2*ihd, D),
				PositionBias: b.param(q+"position_bias", l.CompressRate, 2*ihd),
				KVNorm:       b.param(q+"kv_norm.weight", ihd),
				QBProj:       b.linear(q+"q_b_proj.weight", c.IndexNHeads*ihd, c.QLoraRank),
				WeightsProj:  b.linear(q+"scorer.weights_proj.weight", c.IndexNHeads, D),
			}
		}
		l.Attn.Compressor = cp
	}

	m := p + "mlp."
	E, I := c.NRoutedExperts, c.MoEIntermediateSize
	l.MLP.Router.Weight = b.linear(m+"gate.weight", E, D)
	if l.MLPType == MLPHashMoE {
		l.MLP.Router.Tid2Eid = b.tid2eid(m+"gate.tid2eid", c.VocabSize, c.NumExpertsPerTok)
	} else {
		l.MLP.Router.Bias = b.param(m+"gate.e_score_correction_bias", E)
	}
	l.MLP.Experts = b.experts(m+"experts.", E, I, D)
	if c.NSharedExperts > 0 {
		q := m + "shared_experts."
		l.MLP.Shared = Expert{
			Gate: b.linear(q+"gate_proj.weight", I, D),
			Up:   b.linear(q+"up_proj.weight", I, D),
			Down: b.linear(q+"down_proj.weight", D, I),
		}
	}
	return l
}

func (b *binder) tid2eid(canonical string, vocab, k int) *Tensor {
	e := b.lookup(canonical)
	if e == nil {
		b.add(ErrMissingTensor, canonical, "", fmt.Sprintf("hash_moe layer needs tid2eid [%d %d]", vocab, k))
		return nil
	}
	t := b.raw(e)
	if t == nil {
		return nil
	}
	if t.DType != I64 && t.DType != I32 {
		b.add(ErrTensorDType, t.Name, t.File, fmt.Sprintf("dtype %s, want I64 or I32", t.DType))
		return nil
	}
	if !slices.Equal(t.Shape, []int{vocab, k}) {
		b.add(ErrTensorShape, t.Name, t.File, fmt.Sprintf("shape %v, want [%d %d]", t.Shape, vocab, k))
		return nil
	}
	// The table is small (vocab x k ids): check every id names an expert, so
	// that routing can index experts without bounds surprises.
	ids, err := t.Int32s()
	if err != nil {
		b.add(ErrTensorValue, t.Name, t.File, err.Error())
		return nil
	}
	for i, id := range ids {
		if id < 0 || int(id) >= b.cfg.NRoutedExperts {
			b.add(ErrTensorValue, t.Name, t.File, fmt.Sprintf("token %d routes to expert %d, want [0, %d)", i/k, id, b.cfg.NRoutedExperts))
			return nil
		}
	}
	return t
}

// experts binds routed experts, per expert (upstream and per-expert HF
// names) or merged (HF gate_up_proj [E, 2I, D] / down_proj [E, D, I]).
func (b *binder) experts(prefix string, E, I, D int) []Expert {
	out := make([]Expert, E)
	if gu := b.lookup(prefix + "gate_up_proj"); gu != nil {
		dn := b.lookup(prefix + "down_proj")
		if dn == nil {
			b.add(ErrMissingTensor, prefix+"down_proj", "", fmt.Sprintf("want shape [%d %d %d]", E, D, I))
			return out
		}
		gt, dt := b.raw(gu), b.raw(dn)
		if gt == nil || dt == nil {
			return out
		}
		ok := true
		for _, x := range []struct {
			t    *Tensor
			want []int
		}{{gt, []int{E, 2 * I, D}}, {dt, []int{E, D, I}}} {
			if !isFloat(x.t.DType) {
				b.add(ErrTensorDType, x.t.Name, x.t.File, fmt.Sprintf("merged experts in %s, want a float dtype", x.t.DType))
				ok = false
			} else if !slices.Equal(x.t.Shape, x.want) {
				b.add(ErrTensorShape, x.t.Name, x.t.File, fmt.Sprintf("shape %v, want %v", x.t.Shape, x.want))
				ok = false
			}
		}
		if !ok {
			return out
		}
		for e := range E {
			g, _ := gt.SliceRows(e*2*I, e*2*I+I)
			u, _ := gt.SliceRows(e*2*I+I, (e+1)*2*I)
			d, _ := dt.SliceRows(e*D, (e+1)*D)
			out[e] = Expert{Gate: g, Up: u, Down: d}
		}
		return out
	}
	for e := range E {
		q := fmt.Sprintf("%s%d.", prefix, e)
		out[e] = Expert{
			Gate: b.linear(q+"gate_proj.weight", I, D),
			Up:   b.linear(q+"up_proj.weight", I, D),
			Down: b.linear(q+"down_proj.weight", D, I),
		}
	}
	return out
}
