package dsv4

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// quantGolden is a golden of an upstream-named quantized form of quant-src (written by
// tools/gen_forward_goldens.py through examples/convert).
type quantGolden struct {
	Tokens     []int32           `json:"tokens"`
	Full       [][]float64       `json:"full"`
	QuantError float64           `json:"quant_error"`
	SHA256     map[string]string `json:"safetensors_sha256"`
}

// TestQuantizedForms loads the HF-named float32 quant-src and its upstream-named
// quantized forms (FP8 128x128-block dense weights with MXFP4 or NVFP4 routed experts).
// Each form must match the float64 oracle run on its own dequantized weights to 1e-4,
// and differ from the float32 form by no more than the quantization error the oracle
// measures between the two (quant_error, recorded in the golden) plus that tolerance.
func TestQuantizedForms(t *testing.T) {
	ctx := context.Background()
	src, sg := loadGoldenModel(t, "quant-src")
	ref, err := src.PrefillAll(ctx, src.NewSequence(), sg.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(t, ref, sg.Full); d > goldenTol {
		t.Fatalf("quant-src vs oracle: %g", d)
	}
	for _, name := range []string{"quant-fp8-mxfp4", "quant-nvfp4"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "forward", name)
			var g quantGolden
			readGzJSON(t, filepath.Join(dir, "golden.json.gz"), &g)
			for file, want := range g.SHA256 {
				b, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != want {
					t.Fatalf("%s changed since the golden was made: rerun tools/gen_forward_goldens.py quant-src quant", file)
				}
			}
			m, err := Load(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			got, err := m.PrefillAll(ctx, m.NewSequence(), g.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			dOracle := maxDiff(t, got, g.Full)
			var dSrc float64
			for i := range got {
				for j := range got[i] {
					dSrc = math.Max(dSrc, math.Abs(float64(got[i][j]-ref[i][j])))
				}
			}
			t.Logf("vs oracle on dequantized weights: %.2g; vs float32 form: %.3g (oracle's quantization error %.3g)", dOracle, dSrc, g.QuantError)
			if dOracle > goldenTol {
				t.Errorf("vs oracle: %g > %g", dOracle, goldenTol)
			}
			if dSrc > g.QuantError+goldenTol {
				t.Errorf("vs float32 form: %g > quantization error %g + %g", dSrc, g.QuantError, goldenTol)
			}
		})
	}
}
