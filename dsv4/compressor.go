package dsv4

import (
	"fmt"
	"math"

	"github.com/dsv4go/dsv4go/kernels"
)

// compressor pools every m source tokens into one compressed KV entry of width d
// (DeepseekV4HCACompressor, DeepseekV4CSACompressor, and the indexer's own compressor in
// DeepseekV4Indexer). For HCA (overlap false) entry w is
//
//	RMSNorm( Σ_{i∈window w} softmax_i(z_i + B_i) ⊙ c_i )
//
// with a per-channel softmax over the window. For CSA (overlap true) c and z are 2d wide
// and entry w pools 2m slots: the first halves (Ca, za) of window w-1 and the second
// halves (Cb, zb) of window w; window 0 (no previous window) has only its m slots. The
// entry is then rotated (RoPE, compress base) at position w·m.
type compressor struct {
	kv, gate []float32 // [coff·d][D]
	bias     []float32 // position_bias [m][coff·d]
	norm     []float32 // kv_norm [d]
	d, m     int
	overlap  bool
}

func (c *compressor) coff() int {
	if c.overlap {
		return 2
	}
	return 1
}

func (c *compressor) bind(src tensorSource, p string, D, d, m int, overlap bool) error {
	c.d, c.m, c.overlap = d, m, overlap
	w := c.coff() * d
	var err error
	if c.kv, err = src.float32s(p+"kv_proj.weight", w, D); err != nil {
		return err
	}
	if c.gate, err = src.float32s(p+"gate_proj.weight", w, D); err != nil {
		return err
	}
	if c.bias, err = src.float32s(p+"position_bias", m, w); err != nil {
		return err
	}
	c.norm, err = src.float32s(p+"kv_norm.weight", d)
	return err
}

// project computes the compressor's c and z for all rows of h ([rows][D]).
func (c *compressor) project(h []float32, rows, D int) (kv, z []float32) {
	w := c.coff() * c.d
	kv = make([]float32, rows*w)
	z = make([]float32, rows*w)
	kernels.MatMul(kv, h, c.kv, rows, w, D)
	kernels.MatMul(z, h, c.gate, rows, w, D)
	return kv, z
}

// update appends the c, z rows of one segment's tokens ([T][coff·d]) to the state,
// closing every window that completes and appending its entry.
func (c *compressor) update(n *network, st *CompressorState, kv, z []float32, T int) {
	w := c.coff() * c.d
	for t := 0; t < T; t++ {
		slot := len(st.BufferKV) / w
		st.BufferKV = append(st.BufferKV, kv[t*w:(t+1)*w]...)
		zs := z[t*w : (t+1)*w]
		b := c.bias[slot*w : (slot+1)*w]
		for i := range zs {
			st.BufferGate = append(st.BufferGate, zs[i]+b[i])
		}
		if slot+1 == c.m {
			c.close(n, st)
		}
	}
}

// close pools the full buffer into entry number len(Entries)/d.
func (c *compressor) close(n *network, st *CompressorState) {
	d, m := c.d, c.m
	w := c.coff() * d
	entry := make([]float32, d)
	off := 0 // channel offset of the current window's pooled half
	if c.overlap {
		off = d
	}
	haveOv := c.overlap && st.OverlapKV != nil
	for ch := 0; ch < d; ch++ {
		mx := math.Inf(-1)
		for i := 0; i < m; i++ {
			mx = math.Max(mx, float64(st.BufferGate[i*w+off+ch]))
			if haveOv {
				mx = math.Max(mx, float64(st.OverlapGate[i*d+ch]))
			}
		}
		var num, den float64
		for i := 0; i < m; i++ {
			e := math.Exp(float64(st.BufferGate[i*w+off+ch]) - mx)
			den += e
			num += e * float64(st.BufferKV[i*w+off+ch])
			if haveOv {
				e := math.Exp(float64(st.OverlapGate[i*d+ch]) - mx)
				den += e
				num += e * float64(st.OverlapKV[i*d+ch])
			}
		}
		entry[ch] = float32(num / den)
	}
	if c.overlap {
		if st.OverlapKV == nil {
			st.OverlapKV = make([]float32, m*d)
			st.OverlapGate = make([]float32, m*d)
		}
		for i := 0; i < m; i++ {
			copy(st.OverlapKV[i*d:(i+1)*d], st.BufferKV[i*w:i*w+d])
			copy(st.OverlapGate[i*d:(i+1)*d], st.BufferGate[i*w:i*w+d])
		}
	}
	kernels.RMSNorm(entry, entry, c.norm, 1, d, n.eps)
	pos := st.NumEntries() * m
	n.ropeAt(n.ropeCompress, entry[d-n.ropeDim:], pos, 1)
	st.Entries = append(st.Entries, entry...)
	st.BufferKV = st.BufferKV[:0]
	st.BufferGate = st.BufferGate[:0]
}

// indexer is the lightning indexer of a CSA layer (DeepseekV4Indexer): its own
// overlapping compressor at index_head_dim, query heads q_I = W_qb^I · qr with RoPE
// (compress base) at the query position, and the score
//
//	score(p, s) = Σ_h w_h · ReLU(q_I,h · k_s) / sqrt(index_head_dim),  w = W_w x / sqrt(n_heads).
//
// A query at p keeps the top index_topk of the entries s < (p+1)/m by score. Equal
// scores are broken towards the lower entry index (kernels.TopK), the same in every
// path (full, chunked, incremental, batched). The oracle's torch.topk leaves tie order
// unspecified: with few indexer heads ReLU makes many scores exactly 0 and its own
// batched and incremental paths then disagree (by up to 3 in logits on the "ties"
// golden); with >= 16 heads exact ties do not occur in practice.
type indexer struct {
	comp   compressor
	qB     []float32 // [nh·hd][q_lora_rank]
	wProj  []float32 // [nh][D]
	nh, hd int
	topk   int
}

func (x *indexer) bind(cfg *Config, src tensorSource, p string) error {
	x.nh, x.hd, x.topk = cfg.IndexNHeads, cfg.IndexHeadDim, cfg.IndexTopK
	if err := x.comp.bind(src, p, cfg.HiddenSize, x.hd, cfg.CompressRateCSA, true); err != nil {
		return err
	}
	var err error
	if x.qB, err = src.float32s(p+"q_b_proj.weight", x.nh*x.hd, cfg.QLoraRank); err != nil {
		return err
	}
	x.wProj, err = src.float32s(p+"scorer.weights_proj.weight", x.nh, cfg.HiddenSize)
	return err
}

// selectTopK writes into idx the chosen entries for one query: q is [nh][hd] (roped),
// w [nh] (already scaled by 1/sqrt(nh)), keys [valid][hd]. It returns the count. With
// split > 1 the scoring of many entries is spread over that many goroutines (a decode
// step at long context has one query and thousands of entries).
func (x *indexer) selectTopK(idx []int32, scores []float32, q, w, keys []float32, valid, split int) int {
	if valid <= 0 {
		return 0
	}
	scale := float32(1 / math.Sqrt(float64(x.hd)))
	score := func(lo, hi int) {
		for s := lo; s < hi; s++ {
			k := keys[s*x.hd : (s+1)*x.hd]
			var acc float32
			for h := 0; h < x.nh; h++ {
				dot := kernels.Dot(q[h*x.hd:(h+1)*x.hd], k)
				if dot > 0 {
					acc += w[h] * (dot * scale)
				}
			}
			scores[s] = acc
		}
	}
	if split > 1 && valid >= 512 {
		chunk := (valid + split - 1) / split
		parallel(split, func(i int) { score(min(i*chunk, valid), min((i+1)*chunk, valid)) })
	} else {
		score(0, valid)
	}
	if valid <= x.topk {
		for s := 0; s < valid; s++ {
			idx[s] = int32(s)
		}
		return valid
	}
	return kernels.TopKN(idx, scores[:valid], x.topk)
}

func checkRate(cfg *Config, i int) error {
	if m := cfg.CompressRate(i); m <= 0 {
		return &ConfigError{Field: fmt.Sprintf("compress_rates (layer %d)", i), Value: fmt.Sprint(m), Expected: "a positive compression rate"}
	}
	return nil
}
