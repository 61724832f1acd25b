package dsv4

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/internal/safetensors"
)

// readAll returns every tensor of a single-file checkpoint in file order.
func readAll(t *testing.T, path string) []safetensors.WriteTensor {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []safetensors.WriteTensor
	for _, ti := range f.Tensors() {
		d, err := f.Data(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, safetensors.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: slices.Clone(d)})
	}
	return out
}

// mutated writes a copy of the tiny HF checkpoint with edit applied to its
// tensor list and returns the directory.
func mutated(t *testing.T, edit func([]safetensors.WriteTensor) []safetensors.WriteTensor) string {
	t.Helper()
	return rewritten(t, "testdata/ckpt_hf_bf16", edit)
}

// rewritten copies the single-file checkpoint src with edit applied.
func rewritten(t *testing.T, src string, edit func([]safetensors.WriteTensor) []safetensors.WriteTensor) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	ts := edit(readAll(t, filepath.Join(src, "model.safetensors")))
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func drop(name string) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
	return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == name })
	}
}

func replace(name string, fn func(*safetensors.WriteTensor)) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
	return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i := range ts {
			if ts[i].Name == name {
				fn(&ts[i])
			}
		}
		return ts
	}
}

func TestLoadReportsBadTensors(t *testing.T) {
	const qa = "model.layers.1.self_attn.q_a_proj.weight"
	tests := []struct {
		name string
		edit func([]safetensors.WriteTensor) []safetensors.WriteTensor
		kind error
		want string // tensor named in the error
	}{
		{"missing", drop("model.layers.1.self_attn.compressor.indexer.q_b_proj.weight"), ErrMissingTensor,
			"layers.1.self_attn.compressor.indexer.q_b_proj.weight"},
		{"missing expert", drop("model.layers.2.mlp.experts.down_proj"), ErrMissingTensor, "layers.2.mlp.experts.down_proj"},
		{"missing tid2eid", drop("model.layers.0.mlp.gate.tid2eid"), ErrMissingTensor, "layers.0.mlp.gate.tid2eid"},
		{"unexpected", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			return append(ts, safetensors.WriteTensor{Name: "model.layers.0.self_attn.compressor.kv_norm.weight", DType: safetensors.F32, Shape: []int64{1}, Data: make([]byte, 4)})
		}, ErrUnexpectedTensor, "model.layers.0.self_attn.compressor.kv_norm.weight"},
		{"shape", replace(qa, func(w *safetensors.WriteTensor) { w.Shape = []int64{w.Shape[1], w.Shape[0]} }), ErrTensorShape, qa},
		{"dtype", replace("model.layers.1.self_attn.sinks", func(w *safetensors.WriteTensor) { w.DType = safetensors.I32 }), ErrTensorDType, "model.layers.1.self_attn.sinks"},
		{"tid2eid range", replace("model.layers.0.mlp.gate.tid2eid", func(w *safetensors.WriteTensor) {
			w.Data[8*5] = 200 // expert 200 of 4
		}), ErrTensorValue, "model.layers.0.mlp.gate.tid2eid"},
		{"tid2eid dtype", replace("model.layers.0.mlp.gate.tid2eid", func(w *safetensors.WriteTensor) {
			w.DType = safetensors.F64
		}), ErrTensorDType, "model.layers.0.mlp.gate.tid2eid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := mutated(t, tt.edit)
			_, err := Load(context.Background(), dir)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want %v", err, tt.kind)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("not a *ValidationError: %T", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error does not name %q: %v", tt.want, err)
			}
			var te *TensorError
			if !errors.As(err, &te) || te.Name == "" {
				t.Errorf("errors.As *TensorError: %v", te)
			}
		})
	}
}

func TestLoadUnexpectedAllowedAndMTPKept(t *testing.T) {
	dir := mutated(t, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return append(ts,
			safetensors.WriteTensor{Name: "extra.bias", DType: safetensors.F32, Shape: []int64{1}, Data: make([]byte, 4)},
			safetensors.WriteTensor{Name: "mtp.0.enorm.weight", DType: safetensors.BF16, Shape: []int64{2}, Data: make([]byte, 4)})
	})
	_, err := Load(context.Background(), dir)
	var ve *ValidationError
	if !errors.As(err, &ve) || !slices.Equal(ve.Unexpected(), []string{"extra.bias"}) || len(ve.Missing()) != 0 {
		t.Fatalf("err = %v", err)
	}
	m, err := Load(context.Background(), dir, WithAllowUnexpected())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Weights().MTP["mtp.0.enorm.weight"] == nil {
		t.Errorf("MTP tensor not kept: %v", m.Weights().MTP)
	}
}

func TestLoadMalformedFiles(t *testing.T) {
	copyCkpt := func(t *testing.T) string {
		dir := t.TempDir()
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join("testdata/ckpt_hf_bf16", f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		return dir
	}
	t.Run("truncated", func(t *testing.T) {
		dir := copyCkpt(t)
		p := filepath.Join(dir, "model.safetensors")
		st, _ := os.Stat(p)
		os.Truncate(p, st.Size()-100)
		_, err := Load(context.Background(), dir)
		if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, safetensors.ErrTruncated) || !strings.Contains(err.Error(), "model.safetensors") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad header json", func(t *testing.T) {
		dir := copyCkpt(t)
		p := filepath.Join(dir, "model.safetensors")
		b, _ := os.ReadFile(p)
		b[8] = '['
		os.WriteFile(p, b, 0o644)
		_, err := Load(context.Background(), dir)
		if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, safetensors.ErrHeader) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("out of range offsets", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"deepseek_v4"}`), 0o644)
		hdr := `{"embed.weight":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"norm.weight":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}`
		b := make([]byte, 8)
		b[0] = byte(len(hdr))
		b = append(append(b, hdr...), 1, 2, 3, 4)
		os.WriteFile(filepath.Join(dir, "model.safetensors"), b, 0o644)
		_, err := Load(context.Background(), dir)
		if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, safetensors.ErrTruncated) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		dir := copyCkpt(t)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"deepseek_v4","scoring_func":"tanh"}`), 0o644)
		_, err := Load(context.Background(), dir)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "scoring_func" || !strings.HasSuffix(ce.File, "config.json") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no weights", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{}`), 0o644)
		if _, err := Load(context.Background(), dir); !errors.Is(err, ErrCheckpoint) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("index lists absent tensor", func(t *testing.T) {
		dir := copyCkpt(t)
		os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"),
			[]byte(`{"weight_map":{"model.norm.weight":"model.safetensors","ghost.weight":"model.safetensors"}}`), 0o644)
		_, err := Load(context.Background(), dir)
		if err == nil || !strings.Contains(err.Error(), "ghost.weight") && !strings.Contains(err.Error(), "not listed") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSameWeightsSingleAndSharded(t *testing.T) {
	a, err := OpenCheckpoint(context.Background(), "testdata/ckpt_hf_bf16")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenCheckpoint(context.Background(), "testdata/ckpt_hf_sharded")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ia, ib := a.TensorInfos(), b.TensorInfos()
	if len(ia) != len(ib) || len(ia) == 0 {
		t.Fatalf("%d vs %d tensors", len(ia), len(ib))
	}
	n := 0
	err = a.Weights().Tensors(func(name string, ta *Tensor) error {
		n++
		var tb *Tensor
		b.Weights().Tensors(func(nb string, t *Tensor) error {
			if nb == name {
				tb = t
			}
			return nil
		})
		if tb == nil || string(ta.Data) != string(tb.Data) || !slices.Equal(ta.Shape, tb.Shape) {
			t.Errorf("%s differs", name)
		}
		return nil
	})
	if err != nil || n < 80 {
		t.Fatalf("visited %d tensors: %v", n, err)
	}
}

// TestNamingSchemesAgree loads the converted FP8+MXFP4 checkpoint in
// DeepSeek's naming and the same bytes renamed to HF naming (weight_scale_inv,
// per-expert gate/up/down_proj), and checks every weight dequantizes equally.
func TestNamingSchemesAgree(t *testing.T) {
	src := "testdata/ckpt_fp8_mxfp4"
	dir := rewritten(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i := range ts {
			c := CanonicalName(ts[i].Name)
			if c != "lm_head.weight" {
				c = "model." + c
			}
			ts[i].Name = c
		}
		return ts
	})
	a, err := OpenCheckpoint(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenCheckpoint(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bt := map[string]*Tensor{}
	b.Weights().Tensors(func(n string, x *Tensor) error { bt[n] = x; return nil })
	n := 0
	a.Weights().Tensors(func(name string, x *Tensor) error {
		y := bt[name]
		if y == nil || y.Format != x.Format {
			t.Errorf("%s: %v vs %v", name, x, y)
			return nil
		}
		if x.Format == FormatInt {
			return nil
		}
		xv, _ := x.Float32()
		yv, _ := y.Float32()
		if !slices.Equal(xv, yv) {
			t.Errorf("%s differs", name)
		}
		n++
		return nil
	})
	if !strings.Contains(b.TensorInfos()[0].Name, "model.") && b.TensorInfos()[0].Name != "lm_head.weight" {
		t.Errorf("renaming did not happen: %v", b.TensorInfos()[0].Name)
	}
	if n < 100 {
		t.Errorf("compared %d tensors", n)
	}
}

// TestLoadSavePretrained loads a checkpoint written by transformers'
// save_pretrained (its mixed naming: "model.layers.0.attn.norm.weight").
func TestLoadSavePretrained(t *testing.T) {
	ck, err := OpenCheckpoint(context.Background(), "testdata/ckpt_hf_saved")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	l := ck.Weights().Layers[0]
	if l.Attn.KVNorm == nil || l.Attn.KVNorm.Name != "model.layers.0.attn.norm.weight" {
		t.Errorf("kv_norm bound to %v", l.Attn.KVNorm)
	}
	if g := l.MLP.Experts[1].Gate; g == nil || g.Name != "model.layers.0.ffn.experts.1.w1.weight" {
		t.Errorf("expert gate bound to %v", g)
	}
}

func TestTid2EidInt32(t *testing.T) {
	const name = "model.layers.0.mlp.gate.tid2eid"
	dir := mutated(t, replace(name, func(w *safetensors.WriteTensor) {
		d := make([]byte, len(w.Data)/2)
		for i := range len(w.Data) / 8 {
			copy(d[4*i:4*i+4], w.Data[8*i:8*i+4])
		}
		w.DType, w.Data = safetensors.I32, d
	}))
	a, err := OpenCheckpoint(context.Background(), "testdata/ckpt_hf_bf16")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenCheckpoint(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, err1 := a.Weights().Layers[0].MLP.Router.Tid2Eid.Int32s()
	y, err2 := b.Weights().Layers[0].MLP.Router.Tid2Eid.Int32s()
	if err1 != nil || err2 != nil || !slices.Equal(x, y) || len(x) == 0 {
		t.Fatalf("I64 vs I32 tid2eid: %v %v", err1, err2)
	}
}

func TestFP8WithoutScale(t *testing.T) {
	const name = "layers.1.attn.wq_b.scale"
	dir := rewritten(t, "testdata/ckpt_fp8_mxfp4", drop(name))
	_, err := OpenCheckpoint(context.Background(), dir)
	if !errors.Is(err, ErrMissingTensor) || !strings.Contains(err.Error(), name) {
		t.Fatalf("err = %v", err)
	}
}

func TestNVFP4ZeroGlobalScale(t *testing.T) {
	const name = "layers.2.ffn.experts.3.w2.weight_scale_2"
	found := false
	dir := rewritten(t, "testdata/ckpt_nvfp4", replace(name, func(w *safetensors.WriteTensor) {
		w.Data = make([]byte, 4)
		found = true
	}))
	if !found {
		t.Fatal(name + " not in checkpoint")
	}
	_, err := OpenCheckpoint(context.Background(), dir)
	if !errors.Is(err, ErrTensorValue) || !strings.Contains(err.Error(), name) {
		t.Fatalf("err = %v", err)
	}
}

func TestTensorOddShapesNoPanic(t *testing.T) {
	for _, tn := range []*Tensor{
		{Name: "z", DType: F32, Shape: []int{0, 0}},
		{Name: "z", DType: F32, Shape: []int{3, 0}},
		{Name: "neg", DType: F32, Shape: []int{-1, 4}, Data: make([]byte, 16)},
		{Name: "fp8", DType: F8E4M3, Shape: []int{2, 2}, Data: make([]byte, 4), Format: FormatFP8Block},
		{Name: "fp4", DType: U8, Shape: []int{1, 3}, Data: make([]byte, 2), Format: FormatNVFP4, BlockCols: 16, BlockRows: 1},
		{Name: "int", DType: I8, Shape: []int{2}, Data: make([]byte, 2), Format: FormatFloat},
		{Name: "scalar", DType: F32, Data: make([]byte, 4)},
	} {
		_, _ = tn.Float32()
		_, _ = tn.SliceRows(0, 1)
		_, _ = tn.Int32s()
		_ = tn.DequantizeRows(nil, 0, 0)
	}
}

// TestRandomCorruptionNoPanic rewrites the converted checkpoints with random
// dtype, shape and name edits; OpenCheckpoint must return a typed error or a
// checkpoint whose every tensor dequantizes without panicking.
func TestRandomCorruptionNoPanic(t *testing.T) {
	dtypes := []safetensors.DType{safetensors.F32, safetensors.BF16, safetensors.F8E4M3, safetensors.F8E8M0,
		safetensors.I8, safetensors.U8, safetensors.I32, safetensors.I64}
	rng := rand.New(rand.NewPCG(7, 7))
	n := 60
	if testing.Short() {
		n = 10
	}
	for i := range n {
		src := []string{"testdata/ckpt_fp8_mxfp4", "testdata/ckpt_nvfp4", "testdata/ckpt_hf_bf16"}[i%3]
		dir := rewritten(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for range 1 + rng.IntN(3) {
				w := &ts[rng.IntN(len(ts))]
				switch rng.IntN(4) {
				case 0: // new dtype, data resized to fit
					w.DType = dtypes[rng.IntN(len(dtypes))]
				case 1: // shape permuted or truncated
					if len(w.Shape) > 1 {
						w.Shape[0], w.Shape[1] = w.Shape[1], w.Shape[0]
					} else if len(w.Shape) == 1 {
						w.Shape[0] = int64(rng.IntN(8))
					}
				case 2: // renamed into another tensor's slot or a sibling scale
					w.Name = ts[rng.IntN(len(ts))].Name + []string{".scale", "_scale", ".weight_scale", ".weight_scale_2", ""}[rng.IntN(5)]
				case 3: // garbage bytes
					for j := range w.Data {
						w.Data[j] = byte(rng.Uint32())
					}
				}
				n := int64(w.DType.Size())
				for _, d := range w.Shape {
					n *= d
				}
				w.Data = append(w.Data[:0:0], make([]byte, n)...)
			}
			// Renames may collide; keep the first of each name.
			seen := map[string]bool{}
			return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool {
				dup := seen[w.Name]
				seen[w.Name] = true
				return dup
			})
		})
		ck, err := OpenCheckpoint(context.Background(), dir)
		if err != nil {
			var te *TensorError
			var ce *ConfigError
			if !errors.As(err, &te) && !errors.As(err, &ce) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			continue
		}
		ck.Weights().Tensors(func(name string, x *Tensor) error {
			if x.Format != FormatInt {
				_, _ = x.Float32()
			}
			return nil
		})
		ck.Close()
	}
}
