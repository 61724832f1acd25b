// Command cudabench times the CUDA backend's quantized GEMM/GEMV on DeepSeek-V4-Flash
// shapes and prints a markdown table: time per call, achieved GB/s (weight + activation
// bytes: packed weight and scales, bf16 x, float32 y), percent of the device-to-device copy
// bandwidth measured in the same run, and TFLOP/s.
//
// Method: each (shape, M) is captured into a CUDA graph of R back-to-back calls that rotate
// over enough copies of the weight to exceed 4x the L2 cache, so weights stream from HBM
// as they would in a decode step; the graph is replayed (one cgo call), timed with CUDA
// events, and the median of 5 replays is reported per call. Inputs are random (never zeros).
//
// Usage (on the GPU machine): cudabench [-formats NVFP4,MXFP4,FP8] [-m 1,4,16,64,256,2048]
// Build: make cuda-bins (needs -tags cuda; without it the program reports ErrNoCUDA).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/dsv4go/dsv4go/kernels/cuda"
)

type shape struct {
	name string
	n, k int
}

// V4-Flash shapes: routed expert w1/w3 [2048][4096] and w2 [4096][2048]; attention
// q_b_proj (wq_b) [32768][1024], o_b_proj (wo_b) [4096][8192], kv_proj (wkv) [512][4096].
var shapes = []shape{
	{"expert w1/w3", 2048, 4096},
	{"expert w2", 4096, 2048},
	{"attn wq_b", 32768, 1024},
	{"attn wo_b", 4096, 8192},
	{"attn wkv", 512, 4096},
}

// expertW13 and expertW2 are the routed-expert shapes of the grouped MoE launches.
var expertW13, expertW2 shape

func main() {
	fmtList := flag.String("formats", "NVFP4,MXFP4,FP8", "weight formats to time")
	mList := flag.String("m", "1,4,16,64,256,2048", "token counts M")
	sweep := flag.Bool("sweep", true, "also sweep the split-K factor for NVFP4 at M=1")
	grouped := flag.Bool("grouped", true, "also time the grouped MoE decode launches (at the M <= 16 of -m)")
	only := flag.String("shapes", "", "time only the shapes whose name contains this text (e.g. wq_b; empty: all)")
	single := flag.Bool("single", true, "time the single-matrix launches (false: only the grouped MoE launches)")
	extra := flag.String("extra", "", "more single-matrix shapes to time, NxK,... (e.g. 33792x1024; N a multiple of 64, K of 128)")
	groups := flag.String("groups", "12,6", "matrices per grouped launch: w1/w3, w2 (6 experts: 12 w1/w3 matrices, 6 w2)")
	routed := flag.Bool("routed", true, "also time a layer's MoE launches for M tokens routed top-6 over 256 experts (at the M <= 16 of -m)")
	flag.Parse()
	expertW13, expertW2 = shapes[0], shapes[1] // the grouped launches' shapes, whatever -shapes keeps
	var err error
	if groupW13, groupW2, err = parseGroups(*groups); err != nil {
		fmt.Fprintln(os.Stderr, "cudabench:", err)
		os.Exit(2)
	}
	if !*single {
		shapes = nil
	} else if *only != "" {
		var keep []shape
		for _, sh := range shapes {
			if strings.Contains(sh.name, *only) {
				keep = append(keep, sh)
			}
		}
		shapes = keep
	}
	for _, f := range strings.Split(*extra, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var n, k int
		if _, err := fmt.Sscanf(f, "%dx%d", &n, &k); err != nil || n <= 0 || k <= 0 || n%64 != 0 || k%128 != 0 {
			fmt.Fprintf(os.Stderr, "cudabench: bad -extra shape %q\n", f)
			os.Exit(2)
		}
		shapes = append(shapes, shape{"extra " + f, n, k})
	}
	routedMoE = *routed
	if err := run(*fmtList, *mList, *sweep, *grouped); err != nil {
		fmt.Fprintln(os.Stderr, "cudabench:", err)
		os.Exit(1)
	}
}

// groupW13 and groupW2 are the matrix counts of the two grouped MoE launches (-groups).
var groupW13, groupW2 int

// routedMoE: time the routed form of the MoE launches as well (-routed).
var routedMoE bool

func parseGroups(s string) (int, int, error) {
	var a, b int
	if _, err := fmt.Sscanf(s, "%d,%d", &a, &b); err != nil || a <= 0 || b <= 0 || a > 64 || b > 64 {
		return 0, 0, fmt.Errorf("bad -groups %q (want two counts in 1..64, e.g. 12,6)", s)
	}
	return a, b, nil
}

func parseMs(s string) ([]int, error) {
	var ms []int
	for _, f := range strings.Split(s, ",") {
		m, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || m <= 0 {
			return nil, fmt.Errorf("bad M %q", f)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func run(fmtList, mList string, sweep, grouped bool) error {
	ms, err := parseMs(mList)
	if err != nil {
		return err
	}
	var formats []cuda.Format
	for _, f := range strings.Split(fmtList, ",") {
		switch strings.ToUpper(strings.TrimSpace(f)) {
		case "NVFP4":
			formats = append(formats, cuda.NVFP4)
		case "MXFP4":
			formats = append(formats, cuda.MXFP4)
		case "FP8", "FP8-BLOCK":
			formats = append(formats, cuda.FP8Block)
		default:
			return fmt.Errorf("unknown format %q", f)
		}
	}
	d, err := cuda.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	maj, min := d.ComputeCapability()
	fmt.Printf("device: %s (sm_%d%d, %d SMs, %.0f GiB)\n", d.Name(), maj, min, d.SMs(), float64(d.Memory())/(1<<30))
	st := d.Stream()

	copyBW, err := copyBandwidth(d, st)
	if err != nil {
		return err
	}
	fmt.Printf("device-to-device copy: %.0f GB/s (read + write bytes of a 1 GiB cudaMemcpyAsync)\n\n", copyBW/1e9)

	r := rand.New(rand.NewPCG(7, 11))
	if len(shapes) > 0 {
		fmt.Println("| weight | N x K | format | M | time (us) | GB/s | % of copy BW | TFLOP/s |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
	}
	type sweepRow struct {
		name   string
		splits int
		us     float64
		gbs    float64
	}
	var sweeps []sweepRow
	for _, f := range formats {
		for _, sh := range shapes {
			ws, err := uploadCopies(d, r, f, sh)
			if err != nil {
				return err
			}
			for _, m := range ms {
				res, err := timeGEMM(d, st, r, ws, sh, m, 0)
				if err != nil {
					return fmt.Errorf("%v %s M=%d: %w", f, sh.name, m, err)
				}
				fmt.Printf("| %s | %dx%d | %v | %d | %.2f | %.0f | %.1f | %.2f |\n", sh.name, sh.n, sh.k, f, m,
					res.us, res.gbs, 100*res.gbs*1e9/copyBW, res.tflops)
			}
			if sweep && f == cuda.NVFP4 {
				for _, sp := range []int{1, 2, 4, 8, 16, 32} {
					res, err := timeGEMM(d, st, r, ws, sh, 1, sp)
					if err != nil {
						return err
					}
					sweeps = append(sweeps, sweepRow{sh.name, sp, res.us, res.gbs})
				}
			}
			for _, w := range ws {
				w.Free()
			}
		}
	}
	if !grouped {
		formats = nil
	}
	fmt.Println("\nMoE decode: routed experts of one layer in one grouped launch (expert ids read on the device,")
	fmt.Println("chosen at random per call from a stack of 64 experts = 300 MB; M = tokens per expert):")
	fmt.Println("| weights | format | groups | M | time (us) | GB/s | % of copy BW | TFLOP/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, f := range formats {
		for _, gc := range []struct {
			name string
			sh   shape
			g    int
		}{{fmt.Sprintf("%d expert matrices w1/w3", groupW13), expertW13, groupW13}, {fmt.Sprintf("%d expert matrices w2", groupW2), expertW2, groupW2}} {
			for _, m := range ms {
				if m > 16 { // grouped launches are a decode form: M = tokens per expert <= 16
					continue
				}
				res, err := timeGrouped(d, st, r, f, gc.sh, gc.g, m)
				if err != nil {
					return fmt.Errorf("grouped %v %s M=%d: %w", f, gc.name, m, err)
				}
				fmt.Printf("| %s (%dx%d) | %v | %d | %d | %.2f | %.0f | %.1f | %.2f |\n", gc.name, gc.sh.n, gc.sh.k, f, gc.g, m,
					res.us, res.gbs, 100*res.gbs*1e9/copyBW, res.tflops)
			}
		}
	}
	if routedMoE && len(formats) > 0 {
		fmt.Println("\nMoE decode, routed: M tokens, each routed to 6 of a layer's 256 experts at random (one draw per M, the")
		fmt.Println("same for every call; the experts relabelled at random per call): one grouped launch for the w1 and w3 of every")
		fmt.Println("expert that got a token, one for their w2; m = the most tokens any expert got (the others padded to it):")
		fmt.Println("| weights | format | tokens | experts | m | time (us) | GB/s | % of copy BW |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for _, f := range formats {
			for _, m := range ms {
				if m > 16 {
					continue
				}
				counts := routeTopK(r, m, 6, 256)
				mm := 0
				for _, c := range counts {
					mm = max(mm, c)
				}
				for _, gc := range []struct {
					name string
					sh   shape
					per  int
				}{{"w1/w3", expertW13, 2}, {"w2", expertW2, 1}} {
					res, err := timeRouted(d, st, r, f, gc.sh, len(counts), gc.per, mm)
					if err != nil {
						return fmt.Errorf("routed %v %s M=%d: %w", f, gc.name, m, err)
					}
					fmt.Printf("| %s (%dx%d) | %v | %d | %d | %d | %.2f | %.0f | %.1f |\n", gc.name, gc.sh.n, gc.sh.k, f, m,
						len(counts), mm, res.us, res.gbs, 100*res.gbs*1e9/copyBW)
				}
			}
		}
	}
	if len(sweeps) > 0 {
		fmt.Println("\nsplit-K sweep, NVFP4, M=1:")
		fmt.Println("| weight | splits | time (us) | GB/s | % of copy BW |")
		fmt.Println("|---|---|---|---|---|")
		for _, s := range sweeps {
			fmt.Printf("| %s | %d | %.2f | %.0f | %.1f |\n", s.name, s.splits, s.us, s.gbs, 100*s.gbs*1e9/copyBW)
		}
	}
	return nil
}

func copyBandwidth(d *cuda.Device, st *cuda.Stream) (float64, error) {
	const n = 1 << 30
	a, err := d.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer a.Free()
	b, err := d.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer b.Free()
	// fill with non-zero bytes
	fill := make([]byte, n)
	for i := range fill {
		fill[i] = byte(i*131 + 7)
	}
	if err := a.Upload(fill); err != nil {
		return 0, err
	}
	for i := 0; i < 2; i++ {
		if err := st.CopyDtoD(b, a, n); err != nil {
			return 0, err
		}
	}
	const reps = 10
	var times []float64
	for rep := 0; rep < 3; rep++ {
		e0, err := st.Record()
		if err != nil {
			return 0, err
		}
		for i := 0; i < reps; i++ {
			if err := st.CopyDtoD(b, a, n); err != nil {
				return 0, err
			}
		}
		e1, err := st.Record()
		if err != nil {
			return 0, err
		}
		ms, err := cuda.Elapsed(e0, e1)
		if err != nil {
			return 0, err
		}
		e0.Close()
		e1.Close()
		times = append(times, float64(ms)/1e3)
	}
	sort.Float64s(times)
	return 2 * n * reps / times[1], nil
}

func randomPacked(r *rand.Rand, f cuda.Format, sh shape) *cuda.Packed {
	npad := (sh.n + 63) / 64 * 64
	kt := sh.k / 64
	p := &cuda.Packed{Format: f, N: sh.n, K: sh.k, NPad: npad, Alpha: 1}
	var scale int
	switch f {
	case cuda.NVFP4:
		p.Data = make([]byte, npad/16*kt*512)
		scale = npad / 16 * kt * 64
	case cuda.MXFP4:
		p.Data = make([]byte, npad/16*kt*512)
		scale = npad / 16 * kt * 32
	default:
		p.Data = make([]byte, npad/16*kt*1024)
		scale = (sh.n + 127) / 128 * (sh.k / 128)
	}
	for i := range p.Data {
		p.Data[i] = byte(r.Uint32())
		if f == cuda.FP8Block && p.Data[i]&0x7f == 0x7f {
			p.Data[i] = 0x3f
		}
	}
	p.Scales = make([]byte, scale)
	for i := range p.Scales {
		if f == cuda.NVFP4 {
			p.Scales[i] = byte(r.IntN(144)) // (E+9)<<3|f codes of finite positive E4M3
		} else {
			p.Scales[i] = byte(110 + r.IntN(30))
		}
	}
	return p
}

// uploadCopies uploads enough copies of a random packed weight that they span >= 240 MB
// (4x the H200's 60 MB L2), at most 64.
func uploadCopies(d *cuda.Device, r *rand.Rand, f cuda.Format, sh shape) ([]*cuda.Weight, error) {
	p := randomPacked(r, f, sh)
	n := int((240e6 + float64(p.Bytes()) - 1) / float64(p.Bytes()))
	n = max(1, min(n, 64))
	ws := make([]*cuda.Weight, 0, n)
	for i := 0; i < n; i++ {
		w, err := d.UploadWeight(p)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

type result struct{ us, gbs, tflops float64 }

func timeGEMM(d *cuda.Device, st *cuda.Stream, r *rand.Rand, ws []*cuda.Weight, sh shape, m, splits int) (result, error) {
	x, err := d.Alloc(int64(2 * m * sh.k))
	if err != nil {
		return result{}, err
	}
	defer x.Free()
	y, err := d.Alloc(int64(4 * m * sh.n))
	if err != nil {
		return result{}, err
	}
	defer y.Free()
	xb := make([]byte, 2*m*sh.k)
	for i := 0; i < len(xb); i += 2 { // bf16 in [-2, 2): exponent 126..128
		xb[i] = byte(r.Uint32())
		xb[i+1] = byte(0x3f+r.IntN(2)) | byte(r.IntN(2))<<7
	}
	if err := x.Upload(xb); err != nil {
		return result{}, err
	}
	wbytes := float64(ws[0].Bytes())
	bytes := wbytes + float64(2*m*sh.k+4*m*sh.n)
	flops := 2 * float64(m) * float64(sh.n) * float64(sh.k)
	est := max(bytes/3e12, flops/3e14) + 3e-6
	reps := int(3e-3 / est)
	reps = max(len(ws), min(reps, 4000))
	reps = (reps + len(ws) - 1) / len(ws) * len(ws)

	t, err := timeGraph(st, reps, func(i int) error {
		return st.QGEMMSplit(ws[i%len(ws)], x, y, m, false, splits)
	})
	if err != nil {
		return result{}, err
	}
	return result{us: t * 1e6, gbs: bytes / t / 1e9, tflops: flops / t / 1e12}, nil
}

// timeGraph runs issue(0) eagerly (warm-up, and launch errors outside capture), captures
// issue(0..calls-1) into one CUDA graph, replays it once, then returns the median over 5
// timed replays of the seconds per call.
func timeGraph(st *cuda.Stream, calls int, issue func(i int) error) (float64, error) {
	if err := issue(0); err != nil {
		return 0, err
	}
	if err := st.Sync(); err != nil {
		return 0, err
	}
	if err := st.BeginCapture(); err != nil {
		return 0, err
	}
	for i := 0; i < calls; i++ {
		if err := issue(i); err != nil {
			st.EndCapture()
			return 0, err
		}
	}
	g, err := st.EndCapture()
	if err != nil {
		return 0, err
	}
	defer g.Close()
	if err := g.Launch(st, 1, true); err != nil {
		return 0, err
	}
	var per []float64
	for i := 0; i < 5; i++ {
		e0, err := st.Record()
		if err != nil {
			return 0, err
		}
		if err := g.Launch(st, 1, false); err != nil {
			return 0, err
		}
		e1, err := st.Record()
		if err != nil {
			return 0, err
		}
		ms, err := cuda.Elapsed(e0, e1)
		if err != nil {
			return 0, err
		}
		e0.Close()
		e1.Close()
		per = append(per, float64(ms)/1e3/float64(calls))
	}
	sort.Float64s(per)
	return per[len(per)/2], nil
}

// routeTopK routes tokens to k distinct experts of n each, uniformly at random, and returns
// the token count of every expert that got one (in no particular order).
func routeTopK(r *rand.Rand, tokens, k, n int) []int {
	cnt := make([]int, n)
	for t := 0; t < tokens; t++ {
		for _, e := range r.Perm(n)[:k] {
			cnt[e]++
		}
	}
	var out []int
	for _, c := range cnt {
		if c > 0 {
			out = append(out, c)
		}
	}
	return out
}

// timeRouted times one grouped launch over the matrices of `experts` distinct experts (per
// matrices each: w1 and w3 are 2) drawn at random per call from a stack of 256 experts, m
// tokens per matrix. Bytes: every launched matrix's weights, x and y.
func timeRouted(d *cuda.Device, st *cuda.Stream, r *rand.Rand, f cuda.Format, sh shape, experts, per, m int) (result, error) {
	const stack, calls = 256, 64
	groups := experts * per
	stride := 4 * ((groups + 3) / 4) // keep each call's slice 16-byte aligned
	ids := make([]int32, calls*stride)
	for c := 0; c < calls; c++ {
		for z, e := range r.Perm(stack)[:experts] {
			for j := 0; j < per; j++ {
				ids[c*stride+z*per+j] = int32(e*per + j)
			}
		}
	}
	return timeStack(d, st, r, f, sh, stack*per, ids, stride, groups, m)
}

// timeGrouped times one grouped launch of `groups` matrices chosen at random per call from a
// stack of 64 experts, m tokens per matrix.
func timeGrouped(d *cuda.Device, st *cuda.Stream, r *rand.Rand, f cuda.Format, sh shape, groups, m int) (result, error) {
	const experts, calls = 64, 256
	stride := 4 * ((groups + 3) / 4) // keep each call's slice 16-byte aligned
	ids := make([]int32, calls*stride)
	for c := 0; c < calls; c++ {
		perm := r.Perm(experts)
		for z := 0; z < groups; z++ {
			ids[c*stride+z] = int32(perm[z])
		}
	}
	return timeStack(d, st, r, f, sh, experts, ids, stride, groups, m)
}

// timeStack uploads a stack of n copies of one random matrix of shape sh and times a CUDA
// graph of grouped launches, call c using ids[c*stride:][:groups], m tokens per group (x and
// y random, shared by the calls). Bytes: the launched matrices' weights, x and y.
func timeStack(d *cuda.Device, st *cuda.Stream, r *rand.Rand, f cuda.Format, sh shape, n int, ids []int32, stride, groups, m int) (result, error) {
	p := randomPacked(r, f, sh)
	ps := make([]*cuda.Packed, n)
	for i := range ps {
		ps[i] = p
	}
	ws, err := d.UploadWeightStack(ps)
	if err != nil {
		return result{}, err
	}
	defer ws.Free()
	ib, err := d.Alloc(int64(4 * len(ids)))
	if err != nil {
		return result{}, err
	}
	defer ib.Free()
	if err := ib.UploadI32(ids); err != nil {
		return result{}, err
	}
	x, err := d.Alloc(int64(2 * groups * m * sh.k))
	if err != nil {
		return result{}, err
	}
	defer x.Free()
	y, err := d.Alloc(int64(4 * groups * m * sh.n))
	if err != nil {
		return result{}, err
	}
	defer y.Free()
	xb := make([]byte, 2*groups*m*sh.k)
	for i := 0; i < len(xb); i += 2 {
		xb[i] = byte(r.Uint32())
		xb[i+1] = byte(0x3f+r.IntN(2)) | byte(r.IntN(2))<<7
	}
	if err := x.Upload(xb); err != nil {
		return result{}, err
	}
	t, err := timeGraph(st, len(ids)/stride, func(c int) error {
		v, err := ib.Slice(int64(4*c*stride), int64(4*groups))
		if err != nil {
			return err
		}
		return st.QGEMMGrouped(ws, v, x, y, m, groups, false)
	})
	if err != nil {
		return result{}, err
	}
	bytes := float64(groups)*float64(ws.Bytes()) + float64(groups*m*(2*sh.k+4*sh.n))
	flops := 2 * float64(groups*m) * float64(sh.n) * float64(sh.k)
	return result{us: t * 1e6, gbs: bytes / t / 1e9, tflops: flops / t / 1e12}, nil
}
