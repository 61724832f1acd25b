package dsv4

import "math"

// ropeTable holds the inverse frequencies of one RoPE variant ("main" or "compress") and
// produces the per-position cos/sin rows used by kernels.RoPEInterleaved.
//
// The inverse frequencies follow transformers' DeepseekV4RotaryEmbedding: for the
// default type inv_freq[i] = 1 / theta^(2i/dim) computed in float32; for YaRN,
// _compute_yarn_parameters (interpolation 1/(factor·theta^(2i/dim)) blended with
// extrapolation by a linear ramp between the correction dims of beta_fast and
// beta_slow). dim is the rotary width (qk_rope_head_dim); a pair (2i, 2i+1) rotates by
// pos·inv_freq[i]; cos and sin are scaled by the attention factor (1.0 for V4).
type ropeTable struct {
	invFreq []float32 // [dim/2]
	scale   float64   // attention factor
}

func newRopeTable(p RopeParameters, dim, maxPos int) *ropeTable {
	half := dim / 2
	base := p.RopeTheta
	posFreq := make([]float32, half)
	for i := range posFreq {
		e := float32(2*i) / float32(dim)
		posFreq[i] = float32(math.Pow(base, float64(e)))
	}
	t := &ropeTable{invFreq: make([]float32, half), scale: p.AttentionFactor}
	if t.scale == 0 {
		t.scale = 1
	}
	if p.RopeType != "yarn" {
		for i := range posFreq {
			t.invFreq[i] = 1 / posFreq[i]
		}
		return t
	}
	factor := p.Factor
	if factor == 0 && p.OriginalMaxPositionEmbeddings > 0 {
		// transformers: factor = max_position_embeddings / original_max_position_embeddings
		factor = float64(maxPos) / float64(p.OriginalMaxPositionEmbeddings)
	}
	if factor == 0 {
		factor = 1
	}
	betaFast, betaSlow := p.BetaFast, p.BetaSlow
	if betaFast == 0 {
		betaFast = 32
	}
	if betaSlow == 0 {
		betaSlow = 1
	}
	orig := float64(p.OriginalMaxPositionEmbeddings)
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(orig/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low, high := corr(betaFast), corr(betaSlow)
	if p.Truncate == nil || *p.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low = math.Max(low, 0)
	high = math.Min(high, float64(dim-1))
	if low == high {
		high += 0.001
	}
	for i := range posFreq {
		ramp := (float32(i) - float32(low)) / (float32(high) - float32(low))
		ramp = min(max(ramp, 0), 1)
		extra := 1 - ramp
		interp := 1 / (float32(factor) * posFreq[i])
		t.invFreq[i] = interp*(1-extra) + (1/posFreq[i])*extra
	}
	return t
}

// fill writes the cos and sin rows ([half] each) of position pos.
func (t *ropeTable) fill(cos, sin []float32, pos int) {
	for i, f := range t.invFreq {
		a := float64(f) * float64(pos)
		cos[i] = float32(math.Cos(a) * t.scale)
		sin[i] = float32(math.Sin(a) * t.scale)
	}
}
