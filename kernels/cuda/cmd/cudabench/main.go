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
	groups := flag.String("groups", "12,6", "matrices per grouped launch: w1/w3, w2 (6 experts: 12 w1/w3 matrices, 6 w2; at most 512)")
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
	if _, err := fmt.Sscanf(s, "%d,%d", &a, &b); err != nil || a <= 0 || b <= 0 || a > 512 || b > 512 {
		return 0, 0, fmt.Errorf("bad -groups %q (want two counts in 1..512, e.g. 12,6)", s)
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
	routedFormats := formats
	if !grouped {
		formats = nil
	}
	fmt.Println("\nMoE decode: routed experts of one layer in one grouped launch (expert ids read on the device,")
	fmt.Println("chosen at random per call from a stack of max(64, groups) experts, >= 300 MB; M = tokens per expert; \"ids ready\": the")
	fmt.Println("launch declares the ids written before the previous launch began, GroupedOptions.IDsReady):")
	fmt.Println("| weights | format | groups | M | time (us) | GB/s | % of copy BW | TFLOP/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, f := range formats {
		for _, gc := range []struct {
			name string
			sh   shape
			g    int
		}{{fmt.Sprintf("%d expert matrices w1/w3", groupW13), expertW13, groupW13}, {fmt.Sprintf("%d expert matrices w2", groupW2), expertW2, groupW2}} {
			ws, err := uploadStack(d, r, f, gc.sh, max(64, gc.g))
			if err != nil {
				return err
			}
			for _, m := range ms {
				if m > 16 { // grouped launches are a decode form: M = tokens per expert <= 16
					continue
				}
				for _, ready := range []bool{false, true} {
					res, err := timeGrouped(d, st, r, ws, gc.sh, gc.g, m, ready)
					if err != nil {
						ws.Free()
						return fmt.Errorf("grouped %v %s M=%d: %w", f, gc.name, m, err)
					}
					name := gc.name
					if ready {
						name += ", ids ready"
					}
					fmt.Printf("| %s (%dx%d) | %v | %d | %d | %.2f | %.0f | %.1f | %.2f |\n", name, gc.sh.n, gc.sh.k, f, gc.g, m,
						res.us, res.gbs, 100*res.gbs*1e9/copyBW, res.tflops)
				}
			}
			ws.Free()
		}
	}
	if routedMoE && len(routedFormats) > 0 {
		fmt.Println("\nMoE decode, routed: M tokens, each routed to 6 of a layer's 256 experts at random (one draw per M, the")
		fmt.Println("same for every call; the experts relabelled at random per call): one grouped launch for the w1 and w3 of every")
		fmt.Println("expert that got a token, one for their w2; m = the most tokens any expert got (the others padded to it);")
		fmt.Println("pair: the two launches back to back per call (+ SwiGLU: with the SwiGLU kernel that makes w2's x between")
		fmt.Println("them; staging SwiGLU: w2 makes it from w1/w3's float32 rows, GroupedOptions.SwiGLU; its bytes count w2's")
		fmt.Println("x as bf16 though it reads the float32 rows: compare times); \"ids ready\":")
		fmt.Println("GroupedOptions.IDsReady, the form of a decode step, where the router")
		fmt.Println("runs at least one launch earlier. Bytes: weights of the launched matrices, their x and y:")
		fmt.Println("| weights | format | tokens | experts | m | time (us) | GB/s | % of copy BW |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for _, f := range routedFormats {
			if err := timeRoutedRows(d, st, r, f, ms, copyBW); err != nil {
				return err
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
	x, err := randomX(d, r, m*sh.k)
	if err != nil {
		return result{}, err
	}
	defer x.Free()
	y, err := d.Alloc(int64(4 * m * sh.n))
	if err != nil {
		return result{}, err
	}
	defer y.Free()
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

// Forms of timeMoEPair's w1/w3 -> w2 chain: nothing between them (w2's x given), a SwiGLU
// launch between them, or the SwiGLU staged by w2 itself.
const (
	swigluNone = iota
	swigluOp
	swigluFused
)

// routedStack is the number of experts of one MoE layer (V4-Flash: 256).
const routedStack = 256

// timeRoutedRows prints the routed rows of format f: for each M <= 16 of ms, with the ids read
// after the wait and declared ready, the w1/w3 launch, the w2 launch, and the two back to back
// with nothing, a SwiGLU launch, or w2's staged SwiGLU between them (timeMoEPair). The
// 256-expert stacks are uploaded once for all M.
func timeRoutedRows(d *cuda.Device, st *cuda.Stream, r *rand.Rand, f cuda.Format, ms []int, copyBW float64) error {
	w13, err := uploadStack(d, r, f, expertW13, 2*routedStack)
	if err != nil {
		return err
	}
	defer w13.Free()
	w2, err := uploadStack(d, r, f, expertW2, routedStack)
	if err != nil {
		return err
	}
	defer w2.Free()
	for _, m := range ms {
		if m > 16 {
			continue
		}
		counts := routeTopK(r, m, 6, routedStack)
		mm := 0
		for _, c := range counts {
			mm = max(mm, c)
		}
		experts := len(counts)
		ids13, s13 := routedIDs(r, experts, 2)
		calls, s2 := len(ids13)/s13, 4*((experts+3)/4) // w2: the same experts, 16-byte aligned slices
		ids2 := make([]int32, calls*s2)
		for c := 0; c < calls; c++ {
			for z := 0; z < experts; z++ {
				ids2[c*s2+z] = ids13[c*s13+2*z] / 2
			}
		}
		row := func(name string, res result) {
			fmt.Printf("| %s | %v | %d | %d | %d | %.2f | %.0f | %.1f |\n", name, f, m, experts, mm, res.us, res.gbs, 100*res.gbs*1e9/copyBW)
		}
		for _, ready := range []bool{false, true} {
			sfx := ""
			if ready {
				sfx = ", ids ready"
			}
			res, err := timeStack(d, st, r, w13, expertW13, ids13, s13, 2*experts, mm, ready)
			if err != nil {
				return fmt.Errorf("routed %v w1/w3 M=%d: %w", f, m, err)
			}
			row(fmt.Sprintf("w1/w3 (%dx%d)%s", expertW13.n, expertW13.k, sfx), res)
			if res, err = timeStack(d, st, r, w2, expertW2, ids2, s2, experts, mm, ready); err != nil {
				return fmt.Errorf("routed %v w2 M=%d: %w", f, m, err)
			}
			row(fmt.Sprintf("w2 (%dx%d)%s", expertW2.n, expertW2.k, sfx), res)
			if res, err = timeMoEPair(d, st, r, w13, w2, ids13, s13, ids2, s2, experts, mm, ready, ready, swigluNone); err != nil {
				return fmt.Errorf("routed %v pair M=%d: %w", f, m, err)
			}
			row("pair w1/w3 + w2"+sfx, res)
			if res, err = timeMoEPair(d, st, r, w13, w2, ids13, s13, ids2, s2, experts, mm, ready, ready, swigluOp); err != nil {
				return fmt.Errorf("routed %v pair+SwiGLU M=%d: %w", f, m, err)
			}
			row("w1/w3 + SwiGLU + w2"+sfx, res)
			if res, err = timeMoEPair(d, st, r, w13, w2, ids13, s13, ids2, s2, experts, mm, ready, ready, swigluFused); err != nil {
				return fmt.Errorf("routed %v pair, SwiGLU in w2 M=%d: %w", f, m, err)
			}
			row("w1/w3 + w2 staging SwiGLU"+sfx, res)
			if res, err = timeMoE(d, st, r, w13, w2, ids2, s2, experts, mm, ready); err != nil {
				return fmt.Errorf("routed %v Stream.MoE M=%d: %w", f, m, err)
			}
			row("Stream.MoE"+sfx, res)
			if ready { // which launch's declaration pays in the chain with a SwiGLU launch
				for _, w13ready := range []bool{true, false} {
					if res, err = timeMoEPair(d, st, r, w13, w2, ids13, s13, ids2, s2, experts, mm, w13ready, !w13ready, swigluOp); err != nil {
						return fmt.Errorf("routed %v pair+SwiGLU M=%d: %w", f, m, err)
					}
					which := "w1/w3"
					if !w13ready {
						which = "w2"
					}
					row("w1/w3 + SwiGLU + w2, ids ready on "+which+" only", res)
				}
			}
		}
	}
	return nil
}

// routedIDs draws, for each of 64 calls, `experts` distinct experts of routedStack and
// returns the ids of their matrices (per each: expert e's j-th is e*per+j), each call's
// slice stride int32s from the previous one (16-byte aligned).
func routedIDs(r *rand.Rand, experts, per int) ([]int32, int) {
	const calls = 64
	groups := experts * per
	stride := 4 * ((groups + 3) / 4)
	ids := make([]int32, calls*stride)
	for c := 0; c < calls; c++ {
		for z, e := range r.Perm(routedStack)[:experts] {
			for j := 0; j < per; j++ {
				ids[c*stride+z*per+j] = int32(e*per + j)
			}
		}
	}
	return ids, stride
}

// timeMoEPair times, per call c, the grouped w1/w3 launch of ids13[c*s13:][:2*experts]
// followed by the grouped w2 launch of ids2[c*s2:][:experts] (m tokens per matrix), their ids
// declared ready when ready13 / ready2; with swiglu == swigluOp the SwiGLU kernel between them
// makes w2's x from w1/w3's y (a launch without programmatic dependent launch), with swigluFused
// w2 makes it as it stages x (GroupedOptions.SwiGLU). Bytes: both launches' weights, x and y
// (w2's x counted as bf16).
func timeMoEPair(d *cuda.Device, st *cuda.Stream, r *rand.Rand, w13, w2 *cuda.WeightStack, ids13 []int32, s13 int, ids2 []int32, s2, experts, m int, ready13, ready2 bool, swiglu int) (result, error) {
	if swiglu == swigluFused { // w1/w3's groups: every w1, then every w3 (w2 reads [2][experts] rows)
		h := make([]int32, len(ids13))
		for c := 0; c < len(ids13)/s13; c++ {
			for z := 0; z < experts; z++ {
				h[c*s13+z], h[c*s13+experts+z] = ids13[c*s13+2*z], ids13[c*s13+2*z+1]
			}
		}
		ids13 = h
	}
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	alloc := func(n int64) (*cuda.Buffer, error) {
		b, err := d.Alloc(n)
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	ib13, err := alloc(int64(4 * len(ids13)))
	if err != nil {
		return result{}, err
	}
	ib2, err := alloc(int64(4 * len(ids2)))
	if err != nil {
		return result{}, err
	}
	if err := firstErr(ib13.UploadI32(ids13), ib2.UploadI32(ids2)); err != nil {
		return result{}, err
	}
	g13 := 2 * experts
	x13, err := randomX(d, r, g13*m*expertW13.k)
	if err != nil {
		return result{}, err
	}
	bufs = append(bufs, x13)
	x2, err := randomX(d, r, experts*m*expertW2.k)
	if err != nil {
		return result{}, err
	}
	bufs = append(bufs, x2)
	y13, err := alloc(int64(4 * g13 * m * expertW13.n))
	if err != nil {
		return result{}, err
	}
	y2, err := alloc(int64(4 * experts * m * expertW2.n))
	if err != nil {
		return result{}, err
	}
	t, err := timeGraph(st, len(ids13)/s13, func(c int) error {
		v13, err := ib13.Slice(int64(4*c*s13), int64(4*g13))
		if err != nil {
			return err
		}
		v2, err := ib2.Slice(int64(4*c*s2), int64(4*experts))
		if err != nil {
			return err
		}
		if err := st.QGEMMGroupedOpts(w13, v13, x13, y13, m, g13, cuda.GroupedOptions{IDsReady: ready13}); err != nil {
			return err
		}
		if swiglu == swigluOp { // the decode step's data flow: w2's x is the SwiGLU of w1/w3's outputs
			half := int64(2 * g13 * m * expertW13.n) // bytes of one half of y13
			g, err1 := y13.Slice(0, half)
			u, err2 := y13.Slice(half, half)
			if err := firstErr(err1, err2); err != nil {
				return err
			}
			if err := st.SwiGLU(nil, x2, g, u, experts*m*expertW13.n, 10); err != nil {
				return err
			}
		}
		if swiglu == swigluFused { // w2 stages the SwiGLU of w1/w3's float32 rows itself
			return st.QGEMMGroupedOpts(w2, v2, y13, y2, m, experts, cuda.GroupedOptions{IDsReady: ready2, SwiGLU: true, SwiGLULimit: 10})
		}
		return st.QGEMMGroupedOpts(w2, v2, x2, y2, m, experts, cuda.GroupedOptions{IDsReady: ready2})
	})
	if err != nil {
		return result{}, err
	}
	return result{us: t * 1e6, gbs: moeBytes(w13, w2, experts, m) / t / 1e9}, nil
}

// moeBytes is the byte count of a routed MoE layer's rows: the weights of experts w1/w3 pairs
// and w2 matrices, and both launches' x (bf16) and y (float32), m rows per matrix.
func moeBytes(w13, w2 *cuda.WeightStack, experts, m int) float64 {
	g13 := 2 * experts
	return float64(g13)*float64(w13.Bytes()) + float64(experts)*float64(w2.Bytes()) +
		float64(g13*m*(2*expertW13.k+4*expertW13.n)) + float64(experts*m*(2*expertW2.k+4*expertW2.n))
}

// timeMoE times, per call c, Stream.MoE over the slots' experts ids2[c*s2:][:experts] (w13:
// every w1, then every w3, as timeRoutedRows uploads them: 2 x 256 matrices), m tokens per
// slot, the ids declared ready when ready. Bytes: moeBytes, as timeMoEPair's, so that the rows compare.
func timeMoE(d *cuda.Device, st *cuda.Stream, r *rand.Rand, w13, w2 *cuda.WeightStack, ids2 []int32, s2, experts, m int, ready bool) (result, error) {
	ib, err := d.Alloc(int64(4 * len(ids2)))
	if err != nil {
		return result{}, err
	}
	defer ib.Free()
	x, err := randomX(d, r, experts*m*expertW13.k)
	if err != nil {
		return result{}, err
	}
	defer x.Free()
	y, err := d.Alloc(int64(4 * experts * m * expertW2.n))
	if err != nil {
		return result{}, err
	}
	defer y.Free()
	ws, err := d.NewMoEWorkspace(m, experts, expertW13.n)
	if err != nil {
		return result{}, err
	}
	defer ws.Free()
	if err := ib.UploadI32(ids2); err != nil {
		return result{}, err
	}
	t, err := timeGraph(st, len(ids2)/s2, func(c int) error {
		v, err := ib.Slice(int64(4*c*s2), int64(4*experts))
		if err != nil {
			return err
		}
		return st.MoE(w13, w2, v, x, y, ws, m, experts, cuda.MoEOptions{IDsReady: ready, SwiGLULimit: 10})
	})
	if err != nil {
		return result{}, err
	}
	return result{us: t * 1e6, gbs: moeBytes(w13, w2, experts, m) / t / 1e9}, nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// timeGrouped times one grouped launch of `groups` matrices of the stack ws (shape sh) chosen at
// random per call, m tokens per matrix, the ids declared ready when ready.
func timeGrouped(d *cuda.Device, st *cuda.Stream, r *rand.Rand, ws *cuda.WeightStack, sh shape, groups, m int, ready bool) (result, error) {
	const calls = 256
	stride := 4 * ((groups + 3) / 4) // keep each call's slice 16-byte aligned
	ids := make([]int32, calls*stride)
	for c := 0; c < calls; c++ {
		perm := r.Perm(ws.E)
		for z := 0; z < groups; z++ {
			ids[c*stride+z] = int32(perm[z])
		}
	}
	return timeStack(d, st, r, ws, sh, ids, stride, groups, m, ready)
}

// uploadStack uploads a stack of n copies of one random matrix of shape sh.
func uploadStack(d *cuda.Device, r *rand.Rand, f cuda.Format, sh shape, n int) (*cuda.WeightStack, error) {
	p := randomPacked(r, f, sh)
	ps := make([]*cuda.Packed, n)
	for i := range ps {
		ps[i] = p
	}
	return d.UploadWeightStack(ps)
}

// randomX allocates n bf16 values in [-2, 2) (never zero exponents).
func randomX(d *cuda.Device, r *rand.Rand, n int) (*cuda.Buffer, error) {
	x, err := d.Alloc(int64(2 * n))
	if err != nil {
		return nil, err
	}
	xb := make([]byte, 2*n)
	for i := 0; i < len(xb); i += 2 {
		xb[i] = byte(r.Uint32())
		xb[i+1] = byte(0x3f+r.IntN(2)) | byte(r.IntN(2))<<7
	}
	if err := x.Upload(xb); err != nil {
		x.Free()
		return nil, err
	}
	return x, nil
}

// timeStack times a CUDA graph of grouped launches over the stack ws (shape sh), call c
// using ids[c*stride:][:groups], m tokens per group (x and y random, shared by the calls),
// the ids declared ready (GroupedOptions.IDsReady) when ready.
// Bytes: the launched matrices' weights, x and y.
func timeStack(d *cuda.Device, st *cuda.Stream, r *rand.Rand, ws *cuda.WeightStack, sh shape, ids []int32, stride, groups, m int, ready bool) (result, error) {
	ib, err := d.Alloc(int64(4 * len(ids)))
	if err != nil {
		return result{}, err
	}
	defer ib.Free()
	if err := ib.UploadI32(ids); err != nil {
		return result{}, err
	}
	x, err := randomX(d, r, groups*m*sh.k)
	if err != nil {
		return result{}, err
	}
	defer x.Free()
	y, err := d.Alloc(int64(4 * groups * m * sh.n))
	if err != nil {
		return result{}, err
	}
	defer y.Free()
	t, err := timeGraph(st, len(ids)/stride, func(c int) error {
		v, err := ib.Slice(int64(4*c*stride), int64(4*groups))
		if err != nil {
			return err
		}
		return st.QGEMMGroupedOpts(ws, v, x, y, m, groups, cuda.GroupedOptions{IDsReady: ready})
	})
	if err != nil {
		return result{}, err
	}
	bytes := float64(groups)*float64(ws.Bytes()) + float64(groups*m*(2*sh.k+4*sh.n))
	flops := 2 * float64(groups*m) * float64(sh.n) * float64(sh.k)
	return result{us: t * 1e6, gbs: bytes / t / 1e9, tflops: flops / t / 1e12}, nil
}
