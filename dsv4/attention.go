package dsv4

import (
	"fmt"
	"math"
	"sync"

	"github.com/dsv4go/dsv4go/kernels"
)

// attention is one layer's attention block (DeepseekV4Attention): low-rank query with
// a weighted norm on the rank and an unweighted RMS per head, one shared K=V head,
// interleaved partial RoPE on the last qk_rope_head_dim channels, a sliding window,
// per-head sink logits, compressed entries (CSA with the lightning indexer's top-k, or
// all visible HCA entries), inverse RoPE on the output and a grouped output projection.
type attention struct {
	H, hd, qlora, G, olr, D int
	qA, qANorm, qB          []float32
	kv, kvNorm              []float32
	oA, oB                  []float32 // o_a_proj [G·olr][H·hd/G], o_b_proj [D][G·olr]
	sinks                   []float32
	rope                    *ropeTable
	comp                    *compressor
	idx                     *indexer
	window                  int
}

func (a *attention) bind(n *network, cfg *Config, i int, src tensorSource) error {
	p := fmt.Sprintf("layers.%d.self_attn.", i)
	a.H, a.hd, a.qlora, a.G, a.olr, a.D = cfg.NumAttentionHeads, cfg.HeadDim, cfg.QLoraRank, cfg.OGroups, cfg.OLoraRank, cfg.HiddenSize
	a.window = cfg.SlidingWindow
	if a.H%a.G != 0 {
		return &ConfigError{Field: "o_groups", Value: fmt.Sprint(a.G), Expected: fmt.Sprintf("a divisor of num_attention_heads (%d)", a.H)}
	}
	g := &wbind{src: src, prefix: p}
	get := g.f32
	a.qA = get("q_a_proj.weight", a.qlora, a.D)
	a.qANorm = get("q_a_norm.weight", a.qlora)
	a.qB = get("q_b_proj.weight", a.H*a.hd, a.qlora)
	a.kv = get("kv_proj.weight", a.hd, a.D)
	a.kvNorm = get("kv_norm.weight", a.hd)
	a.oA = get("o_a_proj.weight", a.G*a.olr, a.H*a.hd/a.G)
	a.oB = get("o_b_proj.weight", a.D, a.G*a.olr)
	a.sinks = get("sinks", a.H)
	if g.err != nil {
		return g.err
	}
	a.rope = n.ropeMain
	switch cfg.LayerTypes[i] {
	case LayerSliding:
	case LayerHCA, LayerCSA:
		if err := checkRate(cfg, i); err != nil {
			return err
		}
		a.rope = n.ropeCompress
		csa := cfg.LayerTypes[i] == LayerCSA
		a.comp = &compressor{}
		if err := a.comp.bind(src, p+"compressor.", a.D, a.hd, cfg.CompressRate(i), csa); err != nil {
			return err
		}
		if csa {
			a.idx = &indexer{}
			if err := a.idx.bind(cfg, src, p+"compressor.indexer."); err != nil {
				return err
			}
		}
	default:
		return &ConfigError{Field: fmt.Sprintf("layer_types[%d]", i), Value: string(cfg.LayerTypes[i]), Expected: "a DeepSeek-V4 attention layer type"}
	}
	return nil
}

// ropeAt rotates x (a [2·half] rope slice) at position pos; sign -1 is the inverse.
func (n *network) ropeAt(t *ropeTable, x []float32, pos int, sign float32) {
	half := len(t.invFreq)
	var buf [256]float32
	cs := buf[:]
	if 2*half > len(buf) {
		cs = make([]float32, 2*half)
	}
	t.fill(cs[:half], cs[half:2*half], pos)
	kernels.RoPEInterleaved(x, cs[:half], cs[half:2*half], 1, half, sign)
}

// ropeHeads rotates the last ropeDim channels of each of the heads heads ([heads][hd])
// of every row of x ([rows][heads·hd]) at that row's position.
func (n *network) ropeHeads(t *ropeTable, x []float32, rows, heads, hd int, pos []int, sign float32) {
	half := len(t.invFreq)
	cos := make([]float32, half)
	sin := make([]float32, half)
	for r := 0; r < rows; r++ {
		t.fill(cos, sin, pos[r])
		for h := 0; h < heads; h++ {
			o := (r*heads+h)*hd + hd - 2*half
			kernels.RoPEInterleaved(x[o:o+2*half], cos, sin, 1, half, sign)
		}
	}
}

// parallel runs fn(i) for i in [0, n) over kernels.Workers goroutines.
func parallel(n int, fn func(i int)) {
	w := min(kernels.Workers, n)
	if w <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// forward computes the attention output y ([rows][D]) of the normalised input h for
// every row of the batch, updating each segment's layer state li.
func (a *attention) forward(n *network, li int, b *batch, h, y []float32) {
	R, D, H, hd := b.rows, a.D, a.H, a.hd
	eps := n.eps
	qr := make([]float32, R*a.qlora)
	kernels.MatMul(qr, h, a.qA, R, a.qlora, D)
	kernels.RMSNorm(qr, qr, a.qANorm, R, a.qlora, eps)
	q := make([]float32, R*H*hd)
	kernels.MatMul(q, qr, a.qB, R, H*hd, a.qlora)
	kernels.RMSNorm(q, q, nil, R*H, hd, eps)
	n.ropeHeads(a.rope, q, R, H, hd, b.pos, 1)
	kv := make([]float32, R*hd)
	kernels.MatMul(kv, h, a.kv, R, hd, D)
	kernels.RMSNorm(kv, kv, a.kvNorm, R, hd, eps)
	n.ropeHeads(a.rope, kv, R, 1, hd, b.pos, 1)

	var ckv, cz, ikv, iz, qI, wI []float32
	if a.comp != nil {
		ckv, cz = a.comp.project(h, R, D)
	}
	if a.idx != nil {
		x := a.idx
		ikv, iz = x.comp.project(h, R, D)
		qI = make([]float32, R*x.nh*x.hd)
		kernels.MatMul(qI, qr, x.qB, R, x.nh*x.hd, a.qlora)
		n.ropeHeads(n.ropeCompress, qI, R, x.nh, x.hd, b.pos, 1)
		wI = make([]float32, R*x.nh)
		kernels.MatMul(wI, h, x.wProj, R, x.nh, D)
		s := float32(1 / math.Sqrt(float64(x.nh)))
		for i := range wI {
			wI[i] *= s
		}
	}

	// Phase 1, per segment in order: compressor updates and the key buffer
	// (window-1 cached keys followed by the segment's new ones).
	type segKeys struct {
		keys []float32
		base int // position of keys[0]
	}
	sk := make([]segKeys, len(b.segs))
	for si, seg := range b.segs {
		ls := &seg.st.Layers[li]
		r0, T := b.first[si], len(seg.ids)
		if a.comp != nil {
			w := a.comp.coff() * a.comp.d
			a.comp.update(n, ls.Compressor, ckv[r0*w:(r0+T)*w], cz[r0*w:(r0+T)*w], T)
		}
		if a.idx != nil {
			w := 2 * a.idx.hd
			a.idx.comp.update(n, ls.Indexer, ikv[r0*w:(r0+T)*w], iz[r0*w:(r0+T)*w], T)
		}
		nOld := len(ls.Window) / hd
		keys := make([]float32, 0, (nOld+T)*hd)
		keys = append(keys, ls.Window...)
		keys = append(keys, kv[r0*hd:(r0+T)*hd]...)
		sk[si] = segKeys{keys, seg.st.Position - nOld}
	}

	// Phase 2, all rows in parallel: the compressed entries each query sees, all valid
	// ones (HCA) or the lightning indexer's top-k of them (CSA).
	nc := make([]int, R)
	sel := make([][]int32, R)
	if a.comp != nil {
		split := max(1, kernels.Workers/R) // few queries: split each one's scoring
		parallel(R, func(r int) {
			valid := (b.pos[r] + 1) / a.comp.m
			if a.idx == nil || valid == 0 {
				nc[r] = valid
				return
			}
			x := a.idx
			ls := &b.segs[b.seg[r]].st.Layers[li]
			sel[r] = make([]int32, min(valid, x.topk))
			nc[r] = x.selectTopK(sel[r], make([]float32, valid), qI[r*x.nh*x.hd:(r+1)*x.nh*x.hd], wI[r*x.nh:(r+1)*x.nh], ls.Indexer.Entries, valid, split)
		})
	}

	// Phase 3, all (row, head group) pairs in parallel: attention over the window keys,
	// the selected compressed entries and the sink.
	o := make([]float32, R*H*hd)
	scale := float32(1 / math.Sqrt(float64(hd)))
	groups := min(H, max(1, (kernels.Workers+R-1)/R)) // split heads when rows are few
	per := (H + groups - 1) / groups
	parallel(R*groups, func(job int) {
		r, g := job/groups, job%groups
		si := b.seg[r]
		ls := &b.segs[si].st.Layers[li]
		p, keys, base := b.pos[r], sk[si].keys, sk[si].base
		lo := max(p-a.window+1, base)
		win := keys[(lo-base)*hd : (p-base+1)*hd]
		var ents []float32
		if a.comp != nil {
			ents = ls.Compressor.Entries
		}
		entry := func(j int) []float32 {
			if sel[r] != nil {
				j = int(sel[r][j])
			}
			return ents[j*hd : (j+1)*hd]
		}
		nw, ncr := len(win)/hd, nc[r]
		sc := make([]float32, nw+ncr+1)
		for hh := g * per; hh < min(H, (g+1)*per); hh++ {
			qh := q[(r*H+hh)*hd : (r*H+hh+1)*hd]
			for j := 0; j < nw; j++ {
				sc[j] = kernels.Dot(qh, win[j*hd:(j+1)*hd]) * scale
			}
			for j := 0; j < ncr; j++ {
				sc[nw+j] = kernels.Dot(qh, entry(j)) * scale
			}
			sc[nw+ncr] = a.sinks[hh]
			kernels.Softmax(sc, 1, len(sc))
			oh := o[(r*H+hh)*hd : (r*H+hh+1)*hd]
			for j := 0; j < nw; j++ {
				axpy(oh, sc[j], win[j*hd:(j+1)*hd])
			}
			for j := 0; j < ncr; j++ {
				axpy(oh, sc[nw+j], entry(j))
			}
		}
	})

	// Phase 4: each segment keeps its last window-1 keys.
	for si, seg := range b.segs {
		ls := &seg.st.Layers[li]
		keys := sk[si].keys
		keep := min(len(keys)/hd, a.window-1)
		if cap(ls.Window) < keep*hd {
			// Capacity grows with the keys kept (doubling, up to the window),
			// not to the window at once: sliding_window may be up to 1<<30,
			// and a window allocated whole made a short prompt die of a fatal
			// out of memory.
			nw := make([]float32, keep*hd, min(a.window-1, max(2*keep, 128))*hd)
			copy(nw, keys[len(keys)-keep*hd:])
			ls.Window = nw
		} else {
			ls.Window = ls.Window[:keep*hd]
			copy(ls.Window, keys[len(keys)-keep*hd:])
		}
	}
	n.ropeHeads(a.rope, o, R, H, hd, b.pos, -1)

	// grouped output projection: group g of each row ([gw] = H·hd/G) through its own
	// [olr][gw] block of o_a_proj, then o_b_proj over the G·olr concatenation.
	G, olr := a.G, a.olr
	gw := H * hd / G
	xg := make([]float32, R*gw)
	yg := make([]float32, R*olr)
	oa := make([]float32, R*G*olr)
	for g := 0; g < G; g++ {
		for r := 0; r < R; r++ {
			copy(xg[r*gw:(r+1)*gw], o[r*H*hd+g*gw:r*H*hd+(g+1)*gw])
		}
		kernels.MatMul(yg, xg, a.oA[g*olr*gw:(g+1)*olr*gw], R, olr, gw)
		for r := 0; r < R; r++ {
			copy(oa[r*G*olr+g*olr:r*G*olr+(g+1)*olr], yg[r*olr:(r+1)*olr])
		}
	}
	kernels.MatMul(y, oa, a.oB, R, D, G*olr)
}

func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
