package dsv4

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLargeSlidingWindowAllocatesByUse: a config with a sliding window far larger than the
// prompt (sliding_window may be up to 1<<30) prefills and decodes a short prompt. Before, the
// first prefill allocated the whole window of every layer at once, which here is 128 GiB per
// layer: a fatal out of memory that no recover catches.
func TestLargeSlidingWindowAllocatesByUse(t *testing.T) {
	src := filepath.Join("testdata", "ckpt_hf_bf16")
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["sliding_window"] = 1 << 30
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := Load(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	seq := m.NewSequence()
	defer seq.Release()
	ids := make([]int32, 300) // past the first capacity of 128 keys
	for i := range ids {
		ids[i] = int32(i % m.Config().VocabSize)
	}
	if _, err := m.Prefill(ctx, seq, ids[:40]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prefill(ctx, seq, ids[40:]); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := m.Decode(ctx, []*Sequence{seq}, []int32{int32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if seq.Len() != len(ids)+3 {
		t.Fatalf("Len %d, want %d", seq.Len(), len(ids)+3)
	}
}
