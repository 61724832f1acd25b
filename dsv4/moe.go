package dsv4

import (
	"fmt"
	"math"

	"github.com/dsv4go/dsv4go/kernels"
)

// moe is one layer's mixture of experts (DeepseekV4SparseMoeBlock).
type moe struct {
	hash    bool
	E, K, I int
	gate    []float32   // router [E][D]
	bias    []float32   // e_score_correction_bias [E] (top-k layers only)
	tid2eid []int32     // [V][K] (hash layers only)
	gateUp  [][]float32 // per expert [2I][D]: rows 0..I-1 gate (w1), I..2I-1 up (w3)
	down    [][]float32 // per expert [D][I] (w2)
	shared  bool
	sGate   []float32 // [I][D]
	sUp     []float32 // [I][D]
	sDown   []float32 // [D][I]
	limit   float32
	scale   float32
	score   string
}

func (m *moe) bind(cfg *Config, i int, src tensorSource) error {
	p := fmt.Sprintf("layers.%d.mlp.", i)
	D, V := cfg.HiddenSize, cfg.VocabSize
	m.E, m.K, m.I = cfg.NRoutedExperts, cfg.NumExpertsPerTok, cfg.MoEIntermediateSize
	m.hash = cfg.MLPLayerTypes[i] == MLPHashMoE
	m.limit, m.scale, m.score = float32(cfg.SwigluLimit), float32(cfg.RoutedScalingFactor), cfg.ScoringFunc
	g := &wbind{src: src, prefix: p}
	get := g.f32
	m.gate = get("gate.weight", m.E, D)
	if m.hash {
		if g.err == nil {
			m.tid2eid, g.err = src.int32s(p+"gate.tid2eid", V, m.K)
		}
		for j, e := range m.tid2eid {
			if e < 0 || int(e) >= m.E {
				return &TensorError{Name: p + "gate.tid2eid", Kind: ErrCheckpoint, Err: fmt.Errorf("entry %d is expert %d, outside [0, %d)", j, e, m.E)}
			}
		}
	} else {
		m.bias = get("gate.e_score_correction_bias", m.E)
	}
	// routed experts, packed: gateUp[e] = [w1 rows; w3 rows], down[e] = w2
	I := m.I
	m.gateUp = make([][]float32, m.E)
	m.down = make([][]float32, m.E)
	for e := 0; e < m.E && g.err == nil; e++ {
		q := fmt.Sprintf("experts.%d.", e)
		gw := get(q+"gate_proj.weight", I, D)
		uw := get(q+"up_proj.weight", I, D)
		m.down[e] = get(q+"down_proj.weight", D, I)
		if g.err == nil {
			m.gateUp[e] = append(gw[:len(gw):len(gw)], uw...)
		}
	}
	if cfg.NSharedExperts > 0 {
		m.shared = true
		m.sGate = get("shared_experts.gate_proj.weight", m.I, D)
		m.sUp = get("shared_experts.up_proj.weight", m.I, D)
		m.sDown = get("shared_experts.down_proj.weight", D, m.I)
	}
	return g.err
}

// scoreFn applies the router's scoring function to logits in place (sqrtsoftplus:
// sqrt(softplus(x)) with torch's softplus threshold 20; sigmoid; softmax over the row).
func (m *moe) scoreFn(x []float32) {
	switch m.score {
	case "softmax":
		kernels.Softmax(x, 1, len(x))
	case "sigmoid":
		for i, v := range x {
			x[i] = sigmoid(v)
		}
	default:
		for i, v := range x {
			sp := float64(v)
			if sp <= 20 {
				sp = math.Log1p(math.Exp(sp))
			}
			x[i] = float32(math.Sqrt(sp))
		}
	}
}

// forward computes y = Σ_e w_e·expert_e(h) + shared(h) for every row of h ([rows][D]).
// Routing (DeepseekV4TopKRouter / DeepseekV4HashRouter): s = score(W_gate h); top-k of
// s + bias (ties to the lower expert index), or tid2eid[token] for hash layers; weights
// s_sel / (Σ s_sel + 1e-20) · routed_scaling_factor. Experts: clamped SwiGLU
// (DeepseekV4Experts). Rows are grouped by expert so that each expert runs one MatMul.
func (m *moe) forward(n *network, b *batch, h, y []float32) {
	D := n.cfg.HiddenSize
	R := b.rows
	logits := make([]float32, R*m.E)
	kernels.MatMul(logits, h, m.gate, R, m.E, D)
	sel := make([]int32, R*m.K)
	wts := make([]float32, R*m.K)
	biased := make([]float32, m.E)
	for r := 0; r < R; r++ {
		s := logits[r*m.E : (r+1)*m.E]
		m.scoreFn(s)
		idx := sel[r*m.K : (r+1)*m.K]
		if m.hash {
			copy(idx, m.tid2eid[int(b.ids[r])*m.K:])
		} else {
			for e := range biased {
				biased[e] = s[e] + m.bias[e]
			}
			kernels.TopK(idx, biased, m.K)
		}
		var sum float32
		for _, e := range idx {
			sum += s[e]
		}
		for j, e := range idx {
			wts[r*m.K+j] = s[e] / (sum + 1e-20) * m.scale
		}
	}
	clear(y[:R*D])
	// group rows by expert
	rowsOf := make([][]int, m.E)
	wOf := make([][]float32, m.E)
	for r := 0; r < R; r++ {
		for j := 0; j < m.K; j++ {
			e := sel[r*m.K+j]
			rowsOf[e] = append(rowsOf[e], r)
			wOf[e] = append(wOf[e], wts[r*m.K+j])
		}
	}
	I := m.I
	var x, gu, act, out []float32
	for e := 0; e < m.E; e++ {
		rs := rowsOf[e]
		if len(rs) == 0 {
			continue
		}
		nr := len(rs)
		x = grow(x, nr*D)
		for i, r := range rs {
			copy(x[i*D:(i+1)*D], h[r*D:(r+1)*D])
		}
		gu = grow(gu, nr*2*I)
		kernels.MatMul(gu, x, m.gateUp[e], nr, 2*I, D)
		act = grow(act, nr*I)
		for i := 0; i < nr; i++ {
			kernels.SwiGLU(act[i*I:(i+1)*I], gu[i*2*I:i*2*I+I], gu[i*2*I+I:(i+1)*2*I], m.limit)
		}
		out = grow(out, nr*D)
		kernels.MatMul(out, act, m.down[e], nr, D, I)
		for i, r := range rs {
			w := wOf[e][i]
			yr := y[r*D : (r+1)*D]
			for d, v := range out[i*D : (i+1)*D] {
				yr[d] += w * v
			}
		}
	}
	if m.shared {
		g := make([]float32, R*I)
		u := make([]float32, R*I)
		kernels.MatMul(g, h, m.sGate, R, I, D)
		kernels.MatMul(u, h, m.sUp, R, I, D)
		kernels.SwiGLU(g, g, u, m.limit)
		o := make([]float32, R*D)
		kernels.MatMul(o, g, m.sDown, R, D, I)
		for i, v := range o {
			y[i] += v
		}
	}
}

// grow returns s resized to n, reusing its storage when large enough.
func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n)
}
