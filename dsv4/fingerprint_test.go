package dsv4

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/internal/safetensors"
)

// TestWeightsFingerprintSampled: WeightsFingerprint covers every tensor's
// bytes by sampling (it hashed only the norm weights, so two checkpoints
// differing in any other weight looked the same to disagg): a change of one
// byte of a non-norm weight inside a sampled block, in a large tensor or in
// a small one hashed whole, changes it; the same tensors written in two
// shards in another order (with an index) give the same one; and, as its
// doc says, a change confined to unsampled bytes is not seen.
func TestWeightsFingerprintSampled(t *testing.T) {
	src := filepath.Join("..", "models", "dsv4-tiny")
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.WriteTensor
	for _, ti := range f.Tensors() {
		data, err := f.Data(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: slices.Clone(data)})
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	// write saves ts (edited by edit, on a copy) as one shard, or as two
	// shards with an index when split, and returns its fingerprint.
	write := func(split bool, edit func(ts []safetensors.WriteTensor)) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		c := make([]safetensors.WriteTensor, len(ts))
		for i, x := range ts {
			x.Data = slices.Clone(x.Data)
			c[i] = x
		}
		if edit != nil {
			edit(c)
		}
		if !split {
			if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), c, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			slices.Reverse(c)
			wm := map[string]string{}
			var parts [2][]safetensors.WriteTensor
			for i, x := range c {
				parts[i%2] = append(parts[i%2], x)
				wm[x.Name] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i%2]
			}
			for i, p := range parts {
				name := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i]
				if err := safetensors.WriteFile(filepath.Join(dir, name), p, nil); err != nil {
					t.Fatal(err)
				}
			}
			ix, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wm})
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), ix, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ck, err := OpenCheckpoint(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		fp, err := weightsFingerprint(context.Background(), ck)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	// flip XORs the low byte of the BF16 value at byte off of tensor name
	// (a mantissa bit: the value stays finite and valid).
	flip := func(name string, off int64) func([]safetensors.WriteTensor) {
		return func(ts []safetensors.WriteTensor) {
			for i := range ts {
				if ts[i].Name == name {
					if ts[i].DType != safetensors.BF16 || off%2 != 0 || off >= int64(len(ts[i].Data)) {
						t.Fatalf("bad flip of %s at %d", name, off)
					}
					ts[i].Data[off] ^= 1
					return
				}
			}
			t.Fatalf("no tensor %s", name)
		}
	}
	m, err := Load(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	base := m.WeightsFingerprint()
	m.Close()
	if got := write(false, nil); got != base {
		t.Fatalf("rewritten checkpoint: %s, Load of the original: %s", got, base)
	}
	if got := write(true, nil); got != base {
		t.Fatalf("re-sharded checkpoint: %s, want %s", got, base)
	}
	const big = "model.embed_tokens.weight" // 12 MB BF16, sampled
	n := int64(len(ts[slices.IndexFunc(ts, func(x safetensors.WriteTensor) bool { return x.Name == big })].Data))
	offs := fpOffsets(n)
	if n <= fpWholeBytes || offs[2]-offs[1] <= 2*fpBlock {
		t.Fatalf("%s: %d bytes, blocks at %v", big, n, offs)
	}
	small := "" // a non-norm BF16 tensor hashed whole
	for _, x := range ts {
		if x.DType == safetensors.BF16 && len(x.Data) > 64 && len(x.Data) <= fpWholeBytes && !strings.HasSuffix(CanonicalName(x.Name), "norm.weight") {
			small = x.Name
			break
		}
	}
	if small == "" {
		t.Fatal("no small non-norm BF16 tensor")
	}
	for _, c := range []struct {
		name string
		edit func([]safetensors.WriteTensor)
		same bool
	}{
		{"first block of " + big, flip(big, 10), false},
		{"strided block of " + big, flip(big, (offs[2]+fpBlock/2)&^1), false},
		{"last block of " + big, flip(big, n-2), false},
		{"middle of small " + small, flip(small, 32), false},
		{"unsampled byte of " + big + " (not caught)", flip(big, (offs[1]+2*fpBlock)&^1), true},
	} {
		got := write(false, c.edit)
		if (got == base) != c.same {
			t.Errorf("%s: fingerprint %s, unchanged %s: same=%t, want %t", c.name, got, base, got == base, c.same)
		}
	}
}
