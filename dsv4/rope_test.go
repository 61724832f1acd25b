package dsv4

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestRopeFlash compares the inverse frequencies of the V4-Flash main and compress
// (YaRN, factor 16) RoPE with DeepseekV4RotaryEmbedding's (testdata/forward/rope_flash.json,
// written by tools/gen_forward_goldens.py rope): equal to 1 float32 ulp.
func TestRopeFlash(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "forward", "rope_flash.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Config  json.RawMessage `json:"config"`
		Main    []float32       `json:"main"`
		Comp    []float32       `json:"compress"`
		CompAtt float64         `json:"compress_attention_scaling"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(g.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    RopeParameters
		want []float32
	}{{"main", cfg.RopeMain, g.Main}, {"compress", cfg.RopeCompress, g.Comp}} {
		rt := newRopeTable(c.p, cfg.QKRopeHeadDim, cfg.MaxPositionEmbeddings)
		if len(rt.invFreq) != len(c.want) {
			t.Fatalf("%s: %d frequencies, want %d", c.name, len(rt.invFreq), len(c.want))
		}
		for i, w := range c.want {
			got := rt.invFreq[i]
			if got != w && math.Nextafter32(got, w) != w {
				t.Errorf("%s: inv_freq[%d] = %v, want %v", c.name, i, got, w)
			}
		}
	}
	if rt := newRopeTable(cfg.RopeCompress, cfg.QKRopeHeadDim, cfg.MaxPositionEmbeddings); rt.scale != g.CompAtt {
		t.Errorf("compress attention factor %v, want %v", rt.scale, g.CompAtt)
	}
}
