package dsv4

import (
	"math"

	"github.com/dsv4go/dsv4go/kernels"
)

// mhcMix holds, per row, the mHC weights of one site: pre [hc], post [hc], comb [hc][hc].
type mhcMix struct {
	hc              int
	pre, post, comb []float32
	flat, logits    []float32
}

func newMHC(rows, hc int) *mhcMix {
	return &mhcMix{hc: hc, pre: make([]float32, rows*hc), post: make([]float32, rows*hc), comb: make([]float32, rows*hc*hc)}
}

// mhcPre computes the site's pre/post/comb weights for every row of streams
// ([rows][hc][D]) and collapses the streams into u ([rows][D]): u = Σ_j pre_j S_j.
// Source: DeepseekV4HyperConnection.forward (paper §2.2): the mixing logits are
// fn · rms(flatten(S)); pre = σ(·scale0 + base) + eps, post = 2σ(·scale1 + base),
// comb = Sinkhorn(softmax_rows(·scale2 + base) + eps) with hc_sinkhorn_iters steps
// (columns first, then rows and columns alternately).
func (n *network) mhcPre(site *hcSite, streams []float32, rows int, m *mhcMix, u []float32) {
	cfg := n.cfg
	hc, D := cfg.HCMult, cfg.HiddenSize
	mix := cfg.HCMixDim()
	if len(m.flat) < rows*hc*D {
		m.flat = make([]float32, rows*hc*D)
		m.logits = make([]float32, rows*mix)
	}
	kernels.RMSNorm(m.flat, streams, nil, rows, hc*D, n.eps)
	kernels.MatMul(m.logits, m.flat, site.fn, rows, mix, hc*D)
	eps := float64(n.hcEps)
	c := make([]float64, hc*hc)
	for r := 0; r < rows; r++ {
		lg := m.logits[r*mix : (r+1)*mix]
		pre, post, comb := m.pre[r*hc:(r+1)*hc], m.post[r*hc:(r+1)*hc], m.comb[r*hc*hc:(r+1)*hc*hc]
		for j := 0; j < hc; j++ {
			pre[j] = sigmoid(lg[j]*site.scale[0]+site.base[j]) + n.hcEps
			post[j] = 2 * sigmoid(lg[hc+j]*site.scale[1]+site.base[hc+j])
		}
		for j := 0; j < hc*hc; j++ {
			c[j] = float64(lg[2*hc+j]*site.scale[2] + site.base[2*hc+j])
		}
		sinkhorn(c, hc, cfg.HCSinkhornIters, eps)
		for j := range comb {
			comb[j] = float32(c[j])
		}
		ur := u[r*D : (r+1)*D]
		clear(ur)
		s := streams[r*hc*D : (r+1)*hc*D]
		for j := 0; j < hc; j++ {
			p := pre[j]
			sj := s[j*D : (j+1)*D]
			for d := range ur {
				ur[d] += p * sj[d]
			}
		}
	}
}

// sinkhorn turns the logits c ([hc][hc], row j, column k) into the comb matrix: softmax
// over each row, + eps, columns normalised, then iters-1 rounds of rows then columns
// (each divided by its sum + eps), as DeepseekV4HyperConnection does.
func sinkhorn(c []float64, hc, iters int, eps float64) {
	for j := 0; j < hc; j++ {
		row := c[j*hc : (j+1)*hc]
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float64
		for k := range row {
			row[k] = math.Exp(row[k] - mx)
			s += row[k]
		}
		for k := range row {
			row[k] = row[k]/s + eps
		}
	}
	cols := func() {
		for k := 0; k < hc; k++ {
			var s float64
			for j := 0; j < hc; j++ {
				s += c[j*hc+k]
			}
			for j := 0; j < hc; j++ {
				c[j*hc+k] /= s + eps
			}
		}
	}
	cols()
	for it := 1; it < iters; it++ {
		for j := 0; j < hc; j++ {
			var s float64
			for k := 0; k < hc; k++ {
				s += c[j*hc+k]
			}
			for k := 0; k < hc; k++ {
				c[j*hc+k] /= s + eps
			}
		}
		cols()
	}
}

// mhcPost writes the new streams: S'_k = post_k · y + Σ_j comb[j][k] · S_j (comb is
// applied transposed, as DeepseekV4DecoderLayer does).
func (n *network) mhcPost(streams, y []float32, rows int, m *mhcMix) {
	hc, D := n.cfg.HCMult, n.cfg.HiddenSize
	old := make([]float32, hc*D)
	for r := 0; r < rows; r++ {
		s := streams[r*hc*D : (r+1)*hc*D]
		copy(old, s)
		yr := y[r*D : (r+1)*D]
		post, comb := m.post[r*hc:(r+1)*hc], m.comb[r*hc*hc:(r+1)*hc*hc]
		for k := 0; k < hc; k++ {
			sk := s[k*D : (k+1)*D]
			pk := post[k]
			for d := range sk {
				sk[d] = pk * yr[d]
			}
			for j := 0; j < hc; j++ {
				cjk := comb[j*hc+k]
				oj := old[j*D : (j+1)*D]
				for d := range sk {
					sk[d] += cjk * oj[d]
				}
			}
		}
	}
}
