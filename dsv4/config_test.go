package dsv4

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// flashRatios is V4-Flash's compress_ratios: 43 layers + 1 MTP entry.
var flashRatios = "[0, 0, " + strings.Repeat("4, 128, ", 20) + "4, 0]"

// flashConfig is V4-Flash's published config.json (legacy keys), as in
// the DeepSeek-V4 checkpoint format (config.json of the HF release).
var flashConfig = `{
 "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "torch_dtype": "bfloat16",
 "bos_token_id": 0, "eos_token_id": 1, "vocab_size": 129280, "tie_word_embeddings": false,
 "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
 "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_lora_rank": 1024, "o_groups": 8, "sliding_window": 128,
 "attention_bias": false, "attention_dropout": 0.0, "hidden_act": "silu", "rms_norm_eps": 1e-06,
 "initializer_range": 0.02, "use_cache": true, "max_position_embeddings": 1048576,
 "rope_theta": 10000, "compress_rope_theta": 160000,
 "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
 "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 6, "moe_intermediate_size": 2048,
 "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": true, "routed_scaling_factor": 1.5,
 "swiglu_limit": 10.0, "num_hash_layers": 3, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
 "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06, "num_nextn_predict_layers": 1, "expert_dtype": "fp4",
 "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
 "compress_ratios": ` + flashRatios + `
}`

// inferenceConfig is DeepSeek's inference/config.json for V4-Flash.
var inferenceConfig = `{"vocab_size": 129280, "dim": 4096, "moe_inter_dim": 2048, "n_layers": 43, "n_hash_layers": 3,
 "n_heads": 64, "n_routed_experts": 256, "n_shared_experts": 1, "n_activated_experts": 6, "score_func": "sqrtsoftplus",
 "route_scale": 1.5, "swiglu_limit": 10.0, "q_lora_rank": 1024, "head_dim": 512, "rope_head_dim": 64, "o_groups": 8,
 "o_lora_rank": 1024, "window_size": 128, "original_seq_len": 65536, "rope_theta": 10000, "rope_factor": 16,
 "beta_fast": 32, "beta_slow": 1, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "hc_mult": 4,
 "hc_sinkhorn_iters": 20, "dtype": "fp8", "scale_fmt": "ue8m0", "expert_dtype": "fp4", "compress_rope_theta": 160000,
 "compress_ratios": ` + flashRatios + `}`

func checkFlash(t *testing.T, c *Config) {
	t.Helper()
	if c.HiddenSize != 4096 || c.NumHiddenLayers != 43 || c.NumAttentionHeads != 64 || c.HeadDim != 512 ||
		c.QKRopeHeadDim != 64 || c.QLoraRank != 1024 || c.OGroups != 8 || c.OLoraRank != 1024 || c.SlidingWindow != 128 ||
		c.NRoutedExperts != 256 || c.NumExpertsPerTok != 6 || c.MoEIntermediateSize != 2048 || c.RoutedScalingFactor != 1.5 ||
		c.ScoringFunc != "sqrtsoftplus" || c.IndexTopK != 512 || c.HCMult != 4 || c.SwigluLimit != 10 || c.VocabSize != 129280 {
		t.Errorf("geometry wrong: %+v", c)
	}
	if len(c.LayerTypes) != 43 || c.LayerTypes[0] != LayerSliding || c.LayerTypes[1] != LayerSliding ||
		c.LayerTypes[2] != LayerCSA || c.LayerTypes[3] != LayerHCA || c.LayerTypes[42] != LayerCSA {
		t.Errorf("layer types %v", c.LayerTypes)
	}
	if c.NumHashLayers() != 3 || c.MLPLayerTypes[2] != MLPHashMoE || c.MLPLayerTypes[3] != MLPMoE {
		t.Errorf("mlp types %v", c.MLPLayerTypes)
	}
	if c.CompressRate(2) != 4 || c.CompressRate(3) != 128 || c.CompressRate(0) != 0 {
		t.Error("compress rates")
	}
	m, r := c.RopeMain, c.RopeCompress
	if m.RopeType != "default" || m.RopeTheta != 10000 || m.PartialRotaryFactor != 0.125 {
		t.Errorf("main rope %+v", m)
	}
	if r.RopeType != "yarn" || r.RopeTheta != 160000 || r.Factor != 16 || r.OriginalMaxPositionEmbeddings != 65536 ||
		r.BetaFast != 32 || r.BetaSlow != 1 || r.AttentionFactor != 1 {
		t.Errorf("compress rope %+v", r)
	}
	if c.Rope(0).RopeTheta != 10000 || c.Rope(2).RopeTheta != 160000 {
		t.Error("Rope(i)")
	}
	if c.ExpertDType != "fp4" {
		t.Errorf("expert dtype %q", c.ExpertDType)
	}
	if c.HCMixDim() != 24 {
		t.Error("HCMixDim")
	}
}

func TestParseConfigFlashLegacy(t *testing.T) {
	c, err := ParseConfig([]byte(flashConfig))
	if err != nil {
		t.Fatal(err)
	}
	checkFlash(t, c)
	if q := c.Quantization; q == nil || q.QuantMethod != "fp8" || q.ScaleFmt != "ue8m0" || q.WeightBlockSize != [2]int{128, 128} {
		t.Errorf("quantization %+v", q)
	}
}

func TestParseConfigInference(t *testing.T) {
	c, err := ParseConfig([]byte(inferenceConfig))
	if err != nil {
		t.Fatal(err)
	}
	checkFlash(t, c)
	if c.TorchDType != "fp8" {
		t.Errorf("dtype %q", c.TorchDType)
	}
}

func TestParseConfigHFModern(t *testing.T) {
	// As written by transformers 5.17 (save_pretrained of DeepseekV4Config).
	c, err := ParseConfig([]byte(`{"model_type":"deepseek_v4","num_hidden_layers":3,"hidden_size":64,"head_dim":32,
	 "partial_rotary_factor":0.25,"index_head_dim":16,
	 "layer_types":["sliding_attention","compressed_sparse_attention","heavily_compressed_attention"],
	 "mlp_layer_types":["hash_moe","moe","moe"],
	 "compress_rates":{"compressed_sparse_attention":4,"heavily_compressed_attention":8},
	 "rope_parameters":{"main":{"rope_type":"default","rope_theta":10000.0,"partial_rotary_factor":0.25},
	   "compress":{"rope_type":"yarn","type":"yarn","rope_theta":160000.0,"factor":16,"original_max_position_embeddings":256,
	   "beta_fast":32,"beta_slow":1,"attention_factor":1.0,"partial_rotary_factor":0.25}},
	 "eos_token_id":[1,2],"pad_token_id":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.QKRopeHeadDim != 8 || c.CompressRate(2) != 8 || c.CompressRate(1) != 4 || c.NumHashLayers() != 1 {
		t.Errorf("%+v", c)
	}
	if c.RopeCompress.OriginalMaxPositionEmbeddings != 256 || c.RopeCompress.RopeType != "yarn" {
		t.Errorf("rope %+v", c.RopeCompress)
	}
	if len(c.EOSTokenIDs) != 2 || c.PadTokenID != -1 {
		t.Errorf("special ids %v %d", c.EOSTokenIDs, c.PadTokenID)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	// transformers defaults: V4-Pro-style schedule, 2 HCA then CSA/HCA interleaved.
	c, err := ParseConfig([]byte(`{"num_hidden_layers": 6}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []LayerType{LayerHCA, LayerHCA, LayerHCA, LayerCSA, LayerHCA, LayerCSA}
	for i := range want {
		if c.LayerTypes[i] != want[i] {
			t.Errorf("layer %d: %s want %s", i, c.LayerTypes[i], want[i])
		}
	}
	if c.NumHashLayers() != 3 || c.RopeCompress.RopeType != "default" {
		t.Errorf("%v %+v", c.MLPLayerTypes, c.RopeCompress)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		json, field string
	}{
		{`{`, "(json)"},
		{`null`, "(json)"},
		{`{"model_type":"llama"}`, "model_type"},
		{`{"hidden_size":"big"}`, "hidden_size"},
		{`{"hidden_size":-4}`, "hidden_size"},
		{`{"dim":1.5}`, "dim"},
		{`{"num_hidden_layers":2,"compress_ratios":[0,5]}`, "compress_ratios[1]"},
		{`{"num_hidden_layers":3,"compress_ratios":[0,4]}`, "compress_ratios"},
		{`{"num_hidden_layers":1,"layer_types":["full_attention"]}`, "layer_types[0]"},
		{`{"num_hidden_layers":1,"mlp_layer_types":["dense"]}`, "mlp_layer_types[0]"},
		{`{"scoring_func":"relu"}`, "scoring_func"},
		{`{"rope_scaling":{"type":"longrope"}}`, "rope_scaling.rope_type"},
		{`{"quantization_config":{"fmt":"e5m2"}}`, "quantization_config.fmt"},
		{`{"quantization_config":{"weight_block_size":[128]}}`, "quantization_config.weight_block_size"},
		{`{"expert_dtype":"int3"}`, "expert_dtype"},
		{`{"num_attention_heads":6,"o_groups":4}`, "o_groups"},
		{`{"num_experts_per_tok":9,"n_routed_experts":8}`, "num_experts_per_tok"},
		{`{"qk_rope_head_dim":7}`, "qk_rope_head_dim"},
		{`{"eos_token_id":"x"}`, "eos_token_id"},
	}
	for _, tt := range tests {
		_, err := ParseConfig([]byte(tt.json))
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want *ConfigError", tt.json, err)
			continue
		}
		if ce.Field != tt.field {
			t.Errorf("%s: field %q, want %q (%v)", tt.json, ce.Field, tt.field, err)
		}
		if !strings.Contains(err.Error(), "expected") {
			t.Errorf("%s: message lacks expectation: %v", tt.json, err)
		}
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	_, err := LoadConfig("testdata/does-not-exist/config.json")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.File == "" {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(flashConfig))
	f.Add([]byte(inferenceConfig))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if len(c.LayerTypes) != c.NumHiddenLayers || len(c.MLPLayerTypes) != c.NumHiddenLayers {
			t.Fatalf("layer lists %d/%d for %d layers", len(c.LayerTypes), len(c.MLPLayerTypes), c.NumHiddenLayers)
		}
	})
}

// TestParseConfigMatchesTransformers parses the raw config dicts of
// tools/gen_checkpoints.py --configs and compares the normalisation with
// transformers' DeepseekV4Config (testdata/ckpt_configs/hf_normalized.json).
func TestParseConfigMatchesTransformers(t *testing.T) {
	b, err := os.ReadFile("testdata/ckpt_configs/hf_normalized.json")
	if err != nil {
		t.Fatal(err)
	}
	type rope struct {
		RopeType            string   `json:"rope_type"`
		RopeTheta           float64  `json:"rope_theta"`
		PartialRotaryFactor float64  `json:"partial_rotary_factor"`
		Factor              *float64 `json:"factor"`
		OriginalMax         *int     `json:"original_max_position_embeddings"`
		BetaFast            *float64 `json:"beta_fast"`
		BetaSlow            *float64 `json:"beta_slow"`
		AttentionFactor     *float64 `json:"attention_factor"`
	}
	var g struct {
		Cases map[string]struct {
			Input         json.RawMessage `json:"input"`
			LayerTypes    []LayerType     `json:"layer_types"`
			MLPLayerTypes []MLPType       `json:"mlp_layer_types"`
			CompressRates map[string]int  `json:"compress_rates"`
			QKRopeHeadDim int             `json:"qk_rope_head_dim"`
			PRF           float64         `json:"partial_rotary_factor"`
			Main          rope            `json:"rope_main"`
			Compress      rope            `json:"rope_compress"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 5 {
		t.Fatalf("%d cases", len(g.Cases))
	}
	for name, want := range g.Cases {
		c, err := ParseConfig(want.Input)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !slices.Equal(c.LayerTypes, want.LayerTypes) || !slices.Equal(c.MLPLayerTypes, want.MLPLayerTypes) {
			t.Errorf("%s: layer types %v %v, transformers %v %v", name, c.LayerTypes, c.MLPLayerTypes, want.LayerTypes, want.MLPLayerTypes)
		}
		if c.CompressRateCSA != want.CompressRates[string(LayerCSA)] || c.CompressRateHCA != want.CompressRates[string(LayerHCA)] {
			t.Errorf("%s: rates %d/%d, transformers %v", name, c.CompressRateCSA, c.CompressRateHCA, want.CompressRates)
		}
		if c.QKRopeHeadDim != want.QKRopeHeadDim || c.PartialRotaryFactor != want.PRF {
			t.Errorf("%s: rope dim %d (%g), transformers %d (%g)", name, c.QKRopeHeadDim, c.PartialRotaryFactor, want.QKRopeHeadDim, want.PRF)
		}
		check := func(which string, got RopeParameters, w rope) {
			if got.RopeType != w.RopeType || got.RopeTheta != w.RopeTheta || got.PartialRotaryFactor != w.PartialRotaryFactor {
				t.Errorf("%s %s: %+v, transformers %+v", name, which, got, w)
			}
			if w.RopeType != "yarn" {
				return
			}
			if *w.Factor != got.Factor || *w.OriginalMax != got.OriginalMaxPositionEmbeddings || *w.BetaFast != got.BetaFast ||
				*w.BetaSlow != got.BetaSlow || *w.AttentionFactor != got.AttentionFactor {
				t.Errorf("%s %s yarn: %+v, transformers %+v", name, which, got, w)
			}
		}
		check("main", c.RopeMain, want.Main)
		check("compress", c.RopeCompress, want.Compress)
	}
}
