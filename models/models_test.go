package models

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxTinyBytes is the size budget of the embedded model (issue 9: ≤ 40 MB in all).
const maxTinyBytes = 40_000_000

func TestTinyFilesAndBudget(t *testing.T) {
	var total int64
	for _, name := range TinyFiles {
		info, err := fs.Stat(TinyFS(), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		total += info.Size()
	}
	if total > maxTinyBytes {
		t.Errorf("embedded model is %d bytes, over the %d budget", total, maxTinyBytes)
	}
	t.Logf("embedded model: %d bytes", total)
}

func TestTinyConfig(t *testing.T) {
	b, err := fs.ReadFile(TinyFS(), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ModelType     string         `json:"model_type"`
		VocabSize     int            `json:"vocab_size"`
		HCMult        int            `json:"hc_mult"`
		IndexNHeads   int            `json:"index_n_heads"`
		LayerTypes    []string       `json:"layer_types"`
		MLPLayerTypes []string       `json:"mlp_layer_types"`
		CompressRates map[string]int `json:"compress_rates"`
		EOS           int            `json:"eos_token_id"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.ModelType != "deepseek_v4" || c.VocabSize != 129280 || c.HCMult != 4 || c.IndexNHeads < 16 || c.EOS != 1 {
		t.Errorf("config: %+v", c)
	}
	// Every block kind of DeepSeek-V4 must be present.
	for _, want := range []string{"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"} {
		if !strings.Contains(strings.Join(c.LayerTypes, ","), want) {
			t.Errorf("layer_types %v lack %s", c.LayerTypes, want)
		}
	}
	for _, want := range []string{"hash_moe", "moe"} {
		found := false
		for _, l := range c.MLPLayerTypes {
			found = found || l == want
		}
		if !found {
			t.Errorf("mlp_layer_types %v lack %s", c.MLPLayerTypes, want)
		}
	}
}

// TestTinySafetensorsHeader reads the header of model.safetensors and checks the
// dtypes the checkpoint promises: BF16 matrices, F32 norms and mHC, I64 tid2eid.
func TestTinySafetensorsHeader(t *testing.T) {
	b, err := fs.ReadFile(TinyFS(), "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"model.embed_tokens.weight":                                   "BF16",
		"lm_head.weight":                                              "BF16",
		"model.layers.0.mlp.gate.tid2eid":                             "I64",
		"model.layers.1.mlp.gate.e_score_correction_bias":             "F32",
		"model.layers.2.self_attn.compressor.indexer.q_b_proj.weight": "BF16",
		"model.layers.3.self_attn.compressor.position_bias":           "F32",
		"model.layers.0.attn_hc.fn":                                   "F32",
		"model.norm.weight":                                           "F32",
	}
	for name, dt := range want {
		raw, ok := hdr[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		var e struct {
			DType string `json:"dtype"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.DType != dt {
			t.Errorf("%s: dtype %q, want %s (%v)", name, e.DType, dt, err)
		}
	}
}

func TestTinyDir(t *testing.T) {
	// Keep the test's copy out of the real cache.
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	t.Setenv("LocalAppData", cache)
	dir, err := TinyDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, cache) {
		t.Logf("cache dir %s is outside %s (platform default)", dir, cache)
	}
	for _, name := range TinyFiles {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := fs.ReadFile(TinyFS(), name)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the embedded file", name)
		}
	}
	again, err := TinyDir()
	if err != nil || again != dir {
		t.Errorf("second TinyDir = %q, %v; want %q", again, err, dir)
	}
	// A damaged copy (a truncated file) is not reused but written again.
	if err := os.Truncate(filepath.Join(dir, "config.json"), 1); err != nil {
		t.Fatal(err)
	}
	if complete(dir) {
		t.Error("truncated copy reported complete")
	}
	if again, err := TinyDir(); err != nil || again != dir || !complete(dir) {
		t.Errorf("TinyDir after damage = %q, %v (complete %v)", again, err, complete(dir))
	}
}

func TestTinyVersionStable(t *testing.T) {
	v := TinyVersion()
	if len(v) != 16 || v != TinyVersion() {
		t.Errorf("TinyVersion = %q", v)
	}
}
