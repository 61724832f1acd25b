//go:build cuda && cgo

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/dsv4go/dsv4go/internal/numfmt"
	"github.com/dsv4go/dsv4go/kernels"
)

// moeStacks packs e random experts of hidden size h and intermediate size inter and uploads
// them as Stream.MoE takes them (w13: every w1, then every w3; w2). r1, r3 and r2 hold each
// expert's dequantized weights (packRandom's float64 values, times the per-matrix factor for
// NVFP4; w1 / w3 [inter+pad][h], w2 [h][inter]): what a launch with the packed alphas computes
// from. a1, a3 and a2 are the packed alphas, which checkMoERef divides out when the launches ran
// with NULL alphas.
type moeStacks struct {
	w13, w2    *WeightStack
	r1, r3, r2 [][]float64
	a1, a3, a2 []float32
}

func newMoEStacks(t *testing.T, d *Device, r *rand.Rand, f Format, e, h, inter int) *moeStacks {
	return newMoEStacksPad(t, d, r, f, e, h, inter, 0)
}

// newMoEStacksPad is newMoEStacks whose w1 / w3 matrices carry pad more rows of random
// weights past inter (w13.NPad = inter + pad rounded up to 64, w13.N = inter): rows Stream.MoE
// must compute nothing from, which only C callers of dsv4c_moe (npad13 > I) can otherwise reach.
func newMoEStacksPad(t *testing.T, d *Device, r *rand.Rand, f Format, e, h, inter, pad int) *moeStacks {
	t.Helper()
	var p1, p3, p2 []*Packed // w1, w3, w2
	s := &moeStacks{}
	for i := 0; i < e; i++ {
		a, ra := packRandom(t, r, qcase{f, inter + pad, h})
		b, rb := packRandom(t, r, qcase{f, inter + pad, h})
		c, rc := packRandom(t, r, qcase{f, h, inter})
		if f == NVFP4 { // distinct global scales per matrix
			for _, u := range []struct {
				p   *Packed
				ref []float64
				k   float32
			}{{a, ra, float32(i + 1)}, {b, rb, float32(2*i + 1)}, {c, rc, float32(e - i)}} {
				u.p.Alpha *= u.k
				for j := range u.ref {
					u.ref[j] *= float64(u.k)
				}
			}
		}
		p1, p3, p2 = append(p1, a), append(p3, b), append(p2, c)
		s.r1, s.r3, s.r2 = append(s.r1, ra), append(s.r3, rb), append(s.r2, rc)
		s.a1, s.a3, s.a2 = append(s.a1, a.Alpha), append(s.a3, b.Alpha), append(s.a2, c.Alpha)
	}
	var err error
	for _, u := range []struct {
		dst **WeightStack
		ps  []*Packed
	}{{&s.w13, append(p1, p3...)}, {&s.w2, p2}} {
		*u.dst, err = d.UploadWeightStack(u.ps)
		must(t, err)
	}
	s.w13.N = inter        // (NPad stays inter + pad)
	w13, w2 := s.w13, s.w2 // (not s: its float64 references are freed with the case)
	t.Cleanup(func() { w13.Free(); w2.Free() })
	return s
}

// TestQGEMMMoE runs Stream.MoE against its definition: the w1 / w3 grouped launch of 2·groups
// (every w1, then every w3 of the w13 stack; x repeated), Stream.SwiGLU into bf16, and
// QGEMMGrouped on w2, each checked against float64 references by TestQGEMMGrouped and
// TestCPUConformanceOps and, on these stacks (rows past I and NULL alphas included), by
// checkMoERef at m = 1 and 3 (3: without Accumulate). With the default switches the same bits
// where MoE's w1 / w3 launch has the same layout (2·groups groups; its SwiGLU has the same
// operations); where its blocks stream the same rows of w1 and w3 (FP4 where they fit in
// shared memory), they cut a row's float32 sums at other places, so a bf16 rounding of the
// SwiGLU may flip by one ulp (2^-8 relative of one element): y within 1e-3 relative (norm),
// below one bf16 ulp. Under switches
// that change the kernels (DSV4GO_GEMV*: separate w1 and w3 launches, other layouts, float32
// atomics), 1e-2 relative (norm), as in TestGraphMoEIDsReady. Slots with an id outside [0, E)
// keep their y (the earlier split-K kernel zeroes it).
func TestQGEMMMoE(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	defaultEnv := true
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DSV4GO_GEMV") || strings.HasPrefix(kv, "DSV4GO_MOE") {
			defaultEnv = false
		}
	}
	checkForm := defaultEnv && d.SMs() == 132 // the form each case takes on the H200
	const e = 8
	ws, err := d.NewMoEWorkspace(16, 8, 2048)
	must(t, err)
	defer ws.Free()
	for _, c := range []struct {
		f        Format
		h, inter int
		ids      []int32
		pad      int  // w1 / w3 rows past inter (npad13 > I)
		noAlpha  bool // no per-matrix alphas (NULL: 1 each)
	}{
		{NVFP4, 4096, 2048, []int32{5, 2, 7, 0, 3, 6}, 0, false}, // a V4-Flash layer at one token
		{MXFP4, 1024, 512, []int32{5, 2, 7, 0}, 0, false},
		{NVFP4, 512, 1024, []int32{3, -1, 6, 1, 9}, 0, false}, // two slots skipped
		{FP8Block, 1024, 512, []int32{4, 1, 0}, 0, false},
		// REVIEW11 T4: w1 / w3 rows past I (npad13 > I; at 6 slots one block's rows straddle
		// row I) and no alphas, in form 1 and in forms 2 / 3
		{NVFP4, 4096, 2048, []int32{6, 1, 4, 0, 7, 2}, 128, true},
		{FP8Block, 512, 384, []int32{2, 7}, 128, true},
	} {
		s := newMoEStacksPad(t, d, r, c.f, e, c.h, c.inter, c.pad)
		if c.noAlpha { // both sides see NULL alphas; the stacks' own are freed with them
			al13, al2 := s.w13.al, s.w2.al
			s.w13.al, s.w2.al = &Buffer{}, &Buffer{}
			t.Cleanup(func() { al13.Free(); al2.Free() })
		}
		g := len(c.ids)
		ms := []int{1, 3, 5}
		if c.f == MXFP4 {
			ms = append(ms, 9, 16) // two token tiles (m > 8)
		}
		for _, m := range ms {
			alloc := allocator(t, d)
			xb, xv := bf16Acts(r, g*m*c.h)
			n := g * m * c.inter
			x, ib, y, yw := alloc(len(xb)), alloc(4*g), alloc(4*g*m*c.h), alloc(4*g*m*c.h)
			gu, hb := alloc(8*n), alloc(2*n)
			gate, err1 := gu.Slice(0, int64(4*n))
			up, err2 := gu.Slice(int64(4*n), int64(4*n))
			must(t, err1, err2)
			// the reference's w1 / w3 launch: 2g groups of the w13 stack, x repeated
			x2, ib2 := alloc(2*len(xb)), alloc(8*g)
			ids2 := make([]int32, 2*g)
			for z, id := range c.ids {
				ids2[z], ids2[g+z] = id, id+e
				if id < 0 || id >= e {
					ids2[g+z] = -1
				}
			}
			must(t, x.Upload(xb), ib.UploadI32(c.ids), x2.Upload(append(append([]byte{}, xb...), xb...)), ib2.UploadI32(ids2))
			for _, o := range []MoEOptions{{SwiGLULimit: 10}, {Accumulate: true, IDsReady: true}} {
				name := fmt.Sprintf("%v %dx%d m=%d %+v", c.f, c.h, c.inter, m, o)
				init := randF32(r, g*m*c.h, 1)
				must(t, y.UploadF32(init), yw.UploadF32(init))
				must(t, st.QGEMMGrouped(s.w13, ib2, x2, gu, m, 2*g, false), st.SwiGLU(nil, hb, gate, up, n, o.SwiGLULimit),
					st.QGEMMGrouped(s.w2, ib, hb, yw, m, g, o.Accumulate))
				ref := gemvPath()
				must(t, st.MoE(s.w13, s.w2, ib, x, y, ws, m, g, o), st.Sync())
				if checkForm {
					want := 1 // FP4: one block streams the same rows of w1 and w3
					if c.f == FP8Block {
						want = 2 // w2 stages the SwiGLU (m < 3), then a SwiGLU launch
						if m >= 3 {
							want = 3
						}
					}
					if p := moePath(); p != want {
						t.Errorf("%s: form %d, want %d", name, p, want)
					}
				}
				got, want := make([]float32, g*m*c.h), make([]float32, g*m*c.h)
				must(t, y.DownloadF32(got), yw.DownloadF32(want))
				if m == 1 || m == 3 && !o.Accumulate {
					// the launches below against float64 first (the float64 work grows with m)
					gv, hv := make([]float32, 2*n), make([]byte, 2*n)
					must(t, gu.DownloadF32(gv), hb.Download(hv))
					checkMoERef(t, name, s, c.ids, xv, init, gv, hv, want, m, c.h, c.inter, o, c.noAlpha)
				}
				if !defaultEnv || (ref != 2 && ref != 6) {
					if err := relErr(got, want); err > 1e-2 {
						t.Fatalf("%s: y rel err %g (kernel families %d, %d)", name, err, ref, gemvPath())
					}
				} else if moePath() == 1 {
					// the blocks that stream the same rows of w1 and w3 cut a row's float32 sums
					// elsewhere: a bf16 rounding of h may flip by one ulp (2^-8 of one element)
					if err := relErr(got, want); err > 1e-3 {
						t.Fatalf("%s: y rel err %g (w1/w3 rows in one block)", name, err)
					}
				} else {
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: y[%d] = %g, want %g", name, i, got[i], want[i])
						}
					}
				}
				for z, id := range c.ids { // skipped slots keep their y (the earlier kernel zeroes it)
					if (id < 0 || id >= e) && (ref == 2 || ref == 6) {
						for i := z * m * c.h; i < (z+1)*m*c.h; i++ {
							if math.Float32bits(got[i]) != math.Float32bits(init[i]) {
								t.Fatalf("%s: skipped slot %d: y[%d] = %g, want %g", name, z, i, got[i], init[i])
							}
						}
					}
				}
			}
			for _, b := range []*Buffer{x, ib, y, yw, gu, hb, x2, ib2} {
				b.Free()
			}
		}
	}
	// bad arguments, each past the checks before it (ids given)
	s := newMoEStacks(t, d, r, NVFP4, 2, 256, 128)
	one := newMoEStacks(t, d, r, NVFP4, 1, 256, 128) // its w13 holds 2 matrices, s.w2 2 experts
	sm := newMoEStacks(t, d, r, MXFP4, 2, 256, 128)
	alloc := allocator(t, d)
	x, y, ib, short := alloc(2*8*256), alloc(4*8*256), alloc(16), alloc(16)
	defer func() { x.Free(); y.Free(); ib.Free(); short.Free() }()
	must(t, ib.UploadI32([]int32{0, 1, 1, 0}))
	small, err := d.NewMoEWorkspace(1, 2, 64)
	must(t, err)
	defer small.Free()
	tight, err := d.NewMoEWorkspace(1, 2, 128)
	must(t, err)
	defer tight.Free()
	for _, bad := range []struct {
		what      string
		w13, w2   *WeightStack
		ids, x    *Buffer
		m, groups int
		o         MoEOptions
		ws        *MoEWorkspace
	}{
		{"one slot", s.w13, s.w2, ib, x, 1, 1, MoEOptions{}, ws},
		{"w13 not twice w2", one.w13, s.w2, ib, x, 1, 2, MoEOptions{}, ws},
		{"formats differ", s.w13, sm.w2, ib, x, 1, 2, MoEOptions{}, ws},
		{"NaN limit", s.w13, s.w2, ib, x, 1, 2, MoEOptions{SwiGLULimit: float32(math.NaN())}, ws},
		{"no workspace", s.w13, s.w2, ib, x, 1, 2, MoEOptions{}, nil},
		{"I larger than the workspace", s.w13, s.w2, ib, x, 1, 2, MoEOptions{}, small},
		{"more rows than the workspace", s.w13, s.w2, ib, x, 2, 2, MoEOptions{}, tight},
		{"short x", s.w13, s.w2, ib, short, 1, 2, MoEOptions{}, ws},
		{"short ids", s.w13, s.w2, short, x, 1, 5, MoEOptions{}, ws},
	} {
		if err := st.MoE(bad.w13, bad.w2, bad.ids, bad.x, y, bad.ws, bad.m, bad.groups, bad.o); !errors.Is(err, ErrShape) {
			t.Errorf("%s: got %v, want ErrShape", bad.what, err)
		}
	}
	freed, err := d.NewMoEWorkspace(1, 2, 128)
	must(t, err)
	freed.Free()
	if err := st.MoE(s.w13, s.w2, ib, x, y, freed, 1, 2, MoEOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("freed workspace: got %v, want ErrClosed", err)
	}
}

// checkMoERef checks the launches TestQGEMMMoE compares Stream.MoE with against float64
// references (that comparison alone would pass a bug that both sides share, such as the store
// path of a w13 stack whose rows run past I), for every slot with a valid id:
//   - gate and up (gu, float32 [2][groups][m][inter], the grouped w1 / w3 launch) against the
//     float64 rows, within 2^-14 of sum_k |w x| as in TestQGEMMGrouped;
//   - h (hb, bf16 [groups][m][inter], Stream.SwiGLU) against the CPU backend's SwiGLU of that
//     gate and up rounded to bf16, within one bf16 ulp (expf against Go's exp);
//   - y (yw, the grouped w2 launch, plus init with o.Accumulate) against the float64 sum over
//     that h, within 2^-14 of sum_j |w2 h|.
//
// The one ulp: swiglu.cuh and kernels.Silu evaluate the same float32 formula, expf (no fast
// math in NVCC_FLAGS) against math.Exp, so the two float32 values lie a few ulps apart and
// their bf16 roundings at most one code. References that start from float64 gate and up
// instead would differ by whole bf16 ulps of h wherever the GPU's float32 sums round h the
// other way, which one large h_j can make exceed any tight tolerance (seen on the H200). noAlpha:
// the launches ran with every alpha 1, so the references are divided by the packed alphas.
func checkMoERef(t *testing.T, name string, s *moeStacks, ids []int32, xv []float64, init, gu []float32, hb []byte, yw []float32, m, h, inter int, o MoEOptions, noAlpha bool) {
	t.Helper()
	// The slots are independent: checked in parallel (about 4 s per TestQGEMMMoE run on one
	// core), the first failing slot in slot order reported.
	errs := make([]error, len(ids))
	var eg errgroup.Group
	eg.SetLimit(runtime.GOMAXPROCS(0))
	for z, id := range ids {
		if id < 0 || int(id) >= len(s.r1) {
			continue
		}
		eg.Go(func() error {
			errs[z] = checkMoESlot(name, s, z, int(id), len(ids), xv, init, gu, hb, yw, m, h, inter, o, noAlpha)
			return nil
		})
	}
	eg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkMoESlot is checkMoERef for slot z (expert id) of g slots.
func checkMoESlot(name string, s *moeStacks, z, id, g int, xv []float64, init, gu []float32, hb []byte, yw []float32, m, h, inter int, o MoEOptions, noAlpha bool) error {
	n := g * m * inter
	d1, d3, d2 := 1.0, 1.0, 1.0
	if noAlpha {
		d1, d3, d2 = float64(s.a1[id]), float64(s.a3[id]), float64(s.a2[id])
	}
	for i := 0; i < m; i++ {
		row := (z*m + i) * inter
		x := xv[(z*m+i)*h : (z*m+i+1)*h]
		for j := 0; j < inter; j++ {
			for _, u := range []struct {
				what string
				ref  []float64
				d    float64
				got  float32
			}{{"gate", s.r1[id], d1, gu[row+j]}, {"up", s.r3[id], d3, gu[n+row+j]}} {
				var sum, sa float64
				for k, xk := range x {
					p := u.ref[j*h+k] * xk
					sum += p
					sa += math.Abs(p)
				}
				sum, sa = sum/u.d, sa/u.d // (d > 0)
				if gv := float64(u.got); math.IsNaN(gv) || math.Abs(gv-sum) > sa*0x1p-14+1e-30 {
					return fmt.Errorf("%s: slot %d (expert %d) %s[%d][%d] = %g, float64 reference %g", name, z, id, u.what, i, j, gv, sum)
				}
			}
		}
		want := make([]float32, inter)
		kernels.SwiGLU(want, gu[row:row+inter], gu[n+row:n+row+inter], o.SwiGLULimit)
		hv := make([]float64, inter)
		for j := range hv {
			gb := uint16(hb[2*(row+j)]) | uint16(hb[2*(row+j)+1])<<8
			wb := numfmt.F32ToBF16(want[j])
			// equal, or one ulp apart with the same sign (expf against exp at a rounding boundary)
			if d := int(gb) - int(wb); gb != wb && ((gb^wb)&0x8000 != 0 || d != 1 && d != -1) {
				return fmt.Errorf("%s: slot %d h[%d][%d] = %#04x, SwiGLU of its gate and up %#04x", name, z, i, j, gb, wb)
			}
			hv[j] = float64(numfmt.BF16ToF32(gb))
		}
		r2 := s.r2[id]
		for oi := 0; oi < h; oi++ {
			var ys, ya float64
			for j, hj := range hv {
				p := r2[oi*inter+j] * hj
				ys += p
				ya += math.Abs(p)
			}
			ys, ya = ys/d2, ya/d2
			at := (z*m+i)*h + oi
			if o.Accumulate {
				ys += float64(init[at])
				ya += math.Abs(float64(init[at]))
			}
			if gv := float64(yw[at]); math.IsNaN(gv) || math.Abs(gv-ys) > ya*0x1p-14+1e-30 {
				return fmt.Errorf("%s: slot %d (expert %d) y[%d][%d] = %g, float64 reference %g (sum |w2 h| %g)", name, z, id, i, oi, gv, ys, ya)
			}
		}
	}
	return nil
}

// TestGraphMoE captures Stream.MoE (ids declared ready) in a CUDA graph and replays it with ids
// that change between replays, several launches per replay: each replay must reproduce the
// eager result for its ids bit for bit (the streaming kernel is deterministic; 1e-2 relative
// under the earlier kernel's float32 atomics).
func TestGraphMoE(t *testing.T) {
	d := device(t)
	r := rng(t)
	st := newStream(t, d)
	for _, c := range []struct {
		f Format
		m int
	}{{NVFP4, 1}, {FP8Block, 1}, {FP8Block, 3}} { // forms 1, 2 and 3 with the default switches
		graphMoE(t, d, r, st, c.f, c.m)
	}
}

func graphMoE(t *testing.T, d *Device, r *rand.Rand, st *Stream, f Format, m int) {
	const e, h, inter = 8, 1024, 512
	s := newMoEStacks(t, d, r, f, e, h, inter)
	ids := [][]int32{{5, 2, 7, 0, 3, 6}, {1, 4, 2, 6, 0, 7}}
	g := len(ids[0])
	ws, err := d.NewMoEWorkspace(m, g, inter)
	must(t, err)
	defer ws.Free()
	alloc := allocator(t, d)
	xb, _ := bf16Acts(r, g*m*h)
	x, ib, y := alloc(len(xb)), alloc(4*g), alloc(4*g*m*h)
	defer func() { x.Free(); ib.Free(); y.Free() }()
	must(t, x.Upload(xb))
	o := MoEOptions{IDsReady: true, SwiGLULimit: 10}
	eager := make([][]float32, len(ids))
	for i, v := range ids {
		must(t, ib.UploadI32(v), st.MoE(s.w13, s.w2, ib, x, y, ws, m, g, o), st.Sync())
		eager[i] = make([]float32, g*m*h)
		must(t, y.DownloadF32(eager[i]))
	}
	p := gemvPath()
	bits := p == 2 || p == 6
	must(t, st.BeginCapture())
	if err := st.MoE(s.w13, s.w2, ib, x, y, ws, m, g, o); err != nil {
		st.EndCapture()
		t.Fatal(err)
	}
	gr, err := st.EndCapture()
	must(t, err)
	defer gr.Close()
	for i, k := range []int{0, 1, 1, 0, 1, 0, 0} {
		must(t, ib.UploadI32(ids[k]), gr.Launch(st, 3, true))
		got := make([]float32, g*m*h)
		must(t, y.DownloadF32(got))
		if !bits {
			if err := relErr(got, eager[k]); err > 1e-2 {
				t.Fatalf("%v m=%d replay %d (ids %v): rel err %g", f, m, i, ids[k], err)
			}
			continue
		}
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(eager[k][j]) {
				t.Fatalf("%v m=%d replay %d (ids %v): y[%d] = %g, want %g", f, m, i, ids[k], j, got[j], eager[k][j])
			}
		}
	}
}
