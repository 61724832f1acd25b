package dsv4

import (
	"context"
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
	var err error
	get := func(name string, shape ...int) []float32 {
		if err != nil {
			return nil
		}
		var t []float32
		t, err = src.float32s(name, shape...)
		return t
	}
	n.embed = get("embed_tokens.weight", V, D)
	if cfg.TieWordEmbeddings {
		n.lmHead = n.embed
	} else {
		n.lmHead = get("lm_head.weight", V, D)
	}
	n.norm = get("norm.weight", D)
	n.head = hcHead{fn: get("hc_head.hc_fn", hc, hc*D), base: get("hc_head.hc_base", hc), scale: get("hc_head.hc_scale", 1)}
	n.ropeMain = newRopeTable(cfg.RopeMain, cfg.QKRopeHeadDim)
	n.ropeCompress = newRopeTable(cfg.RopeCompress, cfg.QKRopeHeadDim)
	mix := cfg.HCMixDim()
	for i := 0; i < cfg.NumHiddenLayers && err == nil; i++ {
		p := fmt.Sprintf("layers.%d.", i)
		l := &layer{idx: i, typ: cfg.LayerTypes[i], mlpType: cfg.MLPLayerTypes[i]}
		l.attnHC = hcSite{fn: get(p+"attn_hc.fn", mix, hc*D), base: get(p+"attn_hc.base", mix), scale: get(p+"attn_hc.scale", 3)}
		l.ffnHC = hcSite{fn: get(p+"ffn_hc.fn", mix, hc*D), base: get(p+"ffn_hc.base", mix), scale: get(p+"ffn_hc.scale", 3)}
		l.inNorm = get(p+"input_layernorm.weight", D)
		l.postNorm = get(p+"post_attention_layernorm.weight", D)
		if err == nil {
			err = l.attn.bind(n, cfg, i, src)
		}
		if err == nil {
			err = l.moe.bind(cfg, i, src)
		}
		n.layers = append(n.layers, l)
	}
	if err != nil {
		return nil, err
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
	for _, l := range n.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
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
