package convert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/numfmt"
)

var update = flag.Bool("update", false, "rewrite the converted test checkpoints in ../testdata")

const (
	srcHF     = "../testdata/ckpt_hf_bf16"
	dstMXFP4  = "../testdata/ckpt_fp8_mxfp4"
	dstNVFP4  = "../testdata/ckpt_nvfp4"
	testInput = 0.5 // NVFP4 input_scale written into the test checkpoint
)

var forms = []struct {
	dir  string
	opts Options
}{
	{dstMXFP4, Options{Experts: MXFP4}},
	{dstNVFP4, Options{Experts: NVFP4, NVFP4InputScale: testInput}},
}

// TestConvertDeterministic converts the tiny HF checkpoint to both forms and
// checks the bytes equal the committed checkpoints (-update rewrites them;
// then run tools/gen_checkpoints.py --goldens for the Python dequant goldens).
func TestConvertDeterministic(t *testing.T) {
	for _, f := range forms {
		out := t.TempDir()
		if *update {
			out = f.dir
			os.RemoveAll(out)
		}
		if err := Convert(context.Background(), srcHF, out, f.opts); err != nil {
			t.Fatal(err)
		}
		if *update {
			continue
		}
		for _, name := range []string{"model.safetensors", "config.json"} {
			got, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(f.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s differs from the committed conversion (run go test ./dsv4/convert -update)", f.dir, name)
			}
		}
	}
}

func load(t *testing.T, dir string) *dsv4.Checkpoint {
	t.Helper()
	ck, err := dsv4.OpenCheckpoint(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func tensors(t *testing.T, ck *dsv4.Checkpoint) map[string]*dsv4.Tensor {
	m := map[string]*dsv4.Tensor{}
	if err := ck.Weights().Tensors(func(n string, x *dsv4.Tensor) error { m[n] = x; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// halfStepE2M1 is half the E2M1 grid spacing at magnitude x (x <= 6).
func halfStepE2M1(x float64) float64 {
	switch {
	case x < 2:
		return 0.25
	case x < 4:
		return 0.5
	}
	return 1
}

// TestCrossFormEquivalence loads the same tiny model as HF BF16, upstream
// FP8+MXFP4 and upstream FP8+NVFP4 and checks, tensor by tensor: unquantized
// tensors dequantize bit-identically; quantized ones lie within the format's
// rounding bound of the BF16 source (E4M3: half an ulp, |err| <= max(|w|*2^-4,
// s*2^-10); E2M1: half a grid step times the block scale, plus the NVFP4
// overshoot when the E4M3 block scale rounds down).
func TestCrossFormEquivalence(t *testing.T) {
	ref := tensors(t, load(t, srcHF))
	for _, f := range forms {
		ck := load(t, f.dir)
		got := tensors(t, ck)
		if len(got) != len(ref) {
			t.Fatalf("%s: %d tensors, HF has %d", f.dir, len(got), len(ref))
		}
		counts := map[dsv4.Format]int{}
		for name, r := range ref {
			g := got[name]
			if g == nil {
				t.Errorf("%s: %s missing", f.dir, name)
				continue
			}
			counts[g.Format]++
			if g.Format == dsv4.FormatInt {
				a, _ := r.Int32s()
				b, _ := g.Int32s()
				if len(a) != len(b) || string(int32Bytes(a)) != string(int32Bytes(b)) {
					t.Errorf("%s: %s int data differs", f.dir, name)
				}
				continue
			}
			rv, err := r.Float32()
			if err != nil {
				t.Fatal(err)
			}
			gv, err := g.Float32()
			if err != nil {
				t.Fatal(err)
			}
			if len(rv) != len(gv) {
				t.Fatalf("%s: %s: %d vs %d values", f.dir, name, len(gv), len(rv))
			}
			var scales []float32
			if g.Scale != nil {
				scales, _ = g.Scale.Float32()
			}
			cols := g.Cols()
			var worst float64
			for i := range rv {
				w, q := float64(rv[i]), float64(gv[i])
				var bound float64
				switch g.Format {
				case dsv4.FormatFloat:
					bound = 0
				case dsv4.FormatFP8Block:
					s := float64(scales[(i/cols/g.BlockRows)*ceilDiv(cols, g.BlockCols)+(i%cols)/g.BlockCols])
					bound = math.Max(math.Abs(w)/16, s/1024)
				case dsv4.FormatMXFP4:
					s := float64(scales[i/g.BlockCols])
					bound = s * halfStepE2M1(math.Abs(w)/s)
				case dsv4.FormatNVFP4:
					d := float64(float32(scales[i/g.BlockCols]) * g.GlobalScale)
					x := math.Abs(w) / d
					bound = d*halfStepE2M1(math.Min(x, 6)) + d*math.Max(0, x-6) + 1e-6*math.Abs(w)
				}
				if e := math.Abs(q - w); e > bound {
					t.Fatalf("%s: %s[%d]: %v vs source %v (err %g > bound %g, form %v)", f.dir, name, i, q, w, e, bound, g.Format)
				} else if w != 0 {
					worst = math.Max(worst, e/math.Abs(w))
				}
			}
			if g.Format == dsv4.FormatNVFP4 && g.InputScale != testInput {
				t.Errorf("%s: %s input_scale %v", f.dir, name, g.InputScale)
			}
		}
		t.Logf("%s: forms %v", f.dir, counts)
		if counts[dsv4.FormatFP8Block] == 0 || counts[dsv4.FormatFloat] == 0 ||
			(f.opts.Experts == MXFP4 && counts[dsv4.FormatMXFP4] == 0) || (f.opts.Experts == NVFP4 && counts[dsv4.FormatNVFP4] == 0) {
			t.Errorf("%s: missing forms: %v", f.dir, counts)
		}
	}
}

func int32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	return b
}

// TestDequantMatchesPython checks that our dequantization of every quantized
// tensor of the converted checkpoints equals, bit for bit, the dequantization
// computed in torch by tools/gen_checkpoints.py --goldens (SHA-256 of the
// float32 bytes).
func TestDequantMatchesPython(t *testing.T) {
	for _, f := range forms {
		b, err := os.ReadFile(filepath.Join(f.dir, "dequant_goldens.json"))
		if err != nil {
			t.Fatalf("%v (run tools/gen_checkpoints.py --goldens)", err)
		}
		var g struct {
			Tensors map[string]struct {
				Form   string `json:"form"`
				SHA256 string `json:"sha256"`
			} `json:"tensors"`
		}
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		ck := load(t, f.dir)
		byUpstream := map[string]*dsv4.Tensor{}
		for n, x := range tensors(t, ck) {
			byUpstream[dsv4.UpstreamName(n)] = x
		}
		if len(g.Tensors) < 20 {
			t.Fatalf("%s: only %d goldens", f.dir, len(g.Tensors))
		}
		for name, want := range g.Tensors {
			x := byUpstream[name]
			if x == nil {
				t.Errorf("%s: %s not loaded", f.dir, name)
				continue
			}
			if x.Format.String() != want.Form {
				t.Errorf("%s: %s form %v, python %s", f.dir, name, x.Format, want.Form)
			}
			v, err := x.Float32()
			if err != nil {
				t.Fatal(err)
			}
			raw := make([]byte, 4*len(v))
			numfmt.F32ToBytes(raw, v)
			sum := sha256.Sum256(raw)
			if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
				t.Errorf("%s: %s: dequantization differs from torch's", f.dir, name)
			}
		}
	}
}

func TestQuantizersRejectBadShapes(t *testing.T) {
	if _, _, err := QuantizeFP8Block(make([]float32, 5), 2, 3); err == nil {
		t.Error("FP8: no error")
	}
	if _, _, err := QuantizeMXFP4(make([]float32, 46), 2, 23); err == nil {
		t.Error("MXFP4: odd cols accepted")
	}
	if _, _, _, err := QuantizeNVFP4(make([]float32, 22), 2, 11); err == nil {
		t.Error("NVFP4: odd cols accepted")
	}
	// All-zero input stays zero with unit scales.
	q, s, g, err := QuantizeNVFP4(make([]float32, 16), 1, 16)
	if err != nil || g != 1 || s[0] != numfmt.F32ToE4M3(1) || q[0] != 0 {
		t.Errorf("zeros: %v %v %v %v", q, s, g, err)
	}
}

func TestConvertErrors(t *testing.T) {
	if err := Convert(context.Background(), srcHF, t.TempDir(), Options{Experts: "int4"}); err == nil {
		t.Error("unknown format accepted")
	}
	if err := Convert(context.Background(), srcHF, srcHF, Options{}); err == nil {
		t.Error("in-place conversion accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Convert(ctx, srcHF, t.TempDir(), Options{}); err == nil {
		t.Error("cancelled context ignored")
	}
}

func TestConvertSharded(t *testing.T) {
	out := t.TempDir()
	var calls int
	err := Convert(context.Background(), dstNVFP4, out, Options{Experts: MXFP4, MaxShardBytes: 200 << 10, Progress: func(d, n int) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors.index.json")); err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Error("no progress")
	}
	ck := load(t, out)
	if ck.Weights().Layers[1].MLP.Experts[0].Gate.Format != dsv4.FormatMXFP4 {
		t.Error("NVFP4 -> MXFP4 re-encoding lost")
	}
}

// TestPartialGroups converts a model whose expert input width (48) is not a
// multiple of the MXFP4 group (32): each row's last group holds 16 inputs.
func TestPartialGroups(t *testing.T) {
	w := make([]float32, 2*48)
	for i := range w {
		w[i] = float32(i%48-20) * 0.37
	}
	for _, f := range []ExpertFormat{MXFP4, NVFP4} {
		var packed, scales []byte
		var g float32 = 1
		var err error
		if f == MXFP4 {
			packed, scales, err = QuantizeMXFP4(w, 2, 48)
		} else {
			w = w[:80]
			packed, scales, g, err = QuantizeNVFP4(w, 2, 40) // 40 = 2 groups of 16 + 8
		}
		if err != nil {
			t.Fatal(err)
		}
		cols := len(w) / 2
		tn := &dsv4.Tensor{Name: "w", DType: dsv4.U8, Shape: []int{2, cols}, Data: packed, GlobalScale: g}
		if f == MXFP4 {
			tn.Format, tn.BlockRows, tn.BlockCols = dsv4.FormatMXFP4, 1, 32
			tn.Scale = &dsv4.Tensor{Name: "s", DType: dsv4.F8E8M0, Shape: []int{2, 2}, Data: scales}
		} else {
			tn.Format, tn.BlockRows, tn.BlockCols = dsv4.FormatNVFP4, 1, 16
			tn.Scale = &dsv4.Tensor{Name: "s", DType: dsv4.F8E4M3, Shape: []int{2, 3}, Data: scales}
		}
		v, err := tn.Float32()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range v {
			if d := math.Abs(float64(v[i] - w[i])); d > 0.26*math.Abs(float64(w[i]))+0.5 {
				t.Fatalf("%s: [%d] %g vs %g", f, i, v[i], w[i])
			}
		}
	}
}

// TestNVFP4MatchesModelOpt checks that the converter's NVFP4 experts are,
// byte for byte, what NVIDIA ModelOpt's NVFP4QTensor.quantize (nvidia-modelopt
// 0.47.0, run by tools/gen_checkpoints.py --goldens) makes of the same BF16
// weights: packed E2M1 nibbles, E4M3 block scales and the F32 global scale.
func TestNVFP4MatchesModelOpt(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dstNVFP4, "dequant_goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		ModelOpt map[string]struct {
			Weight  string  `json:"weight_sha256"`
			Scale   string  `json:"weight_scale_sha256"`
			Global2 float64 `json:"weight_scale_2"`
		} `json:"modelopt"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	ck := load(t, dstNVFP4)
	if len(g.ModelOpt) == 0 {
		t.Fatal("no ModelOpt references (run tools/gen_checkpoints.py --goldens)")
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for name, want := range g.ModelOpt {
		x, err := ck.Raw(name + ".weight")
		if err != nil {
			t.Fatal(err)
		}
		s, err := ck.Raw(name + ".weight_scale")
		if err != nil {
			t.Fatal(err)
		}
		g2, err := ck.Raw(name + ".weight_scale_2")
		if err != nil {
			t.Fatal(err)
		}
		gv, _ := g2.Float32()
		if sum(x.Data) != want.Weight {
			t.Errorf("%s: packed weight differs from ModelOpt's", name)
		}
		if sum(s.Data) != want.Scale {
			t.Errorf("%s: E4M3 block scales differ from ModelOpt's", name)
		}
		if gv[0] != float32(want.Global2) {
			t.Errorf("%s: weight_scale_2 %g, ModelOpt %g", name, gv[0], want.Global2)
		}
	}
}

// TestReconvertLossless converts the FP8+MXFP4 checkpoint again: values
// already on the FP8 and MXFP4 grids re-quantize exactly, so every tensor
// dequantizes to the same float32 values, -0 possibly as +0 (the bytes may differ: a block
// whose largest value rounded down to a power of two gets half the scale).
func TestReconvertLossless(t *testing.T) {
	out := t.TempDir()
	if err := Convert(context.Background(), dstMXFP4, out, Options{Experts: MXFP4}); err != nil {
		t.Fatal(err)
	}
	a, b := tensors(t, load(t, dstMXFP4)), tensors(t, load(t, out))
	if len(a) != len(b) {
		t.Fatalf("%d vs %d tensors", len(a), len(b))
	}
	for name, x := range a {
		y := b[name]
		if y == nil || x.Format != y.Format {
			t.Fatalf("%s: %v vs %v", name, x, y)
		}
		if x.Format == dsv4.FormatInt {
			continue
		}
		xv, _ := x.Float32()
		yv, _ := y.Float32()
		for i := range xv {
			if xv[i] != yv[i] { // -0 may come back as +0 (E2M1 sign as ModelOpt)
				t.Fatalf("%s[%d]: %g became %g", name, i, xv[i], yv[i])
			}
		}
	}
}
