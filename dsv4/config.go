package dsv4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
)

// LayerType is the attention type of one decoder layer, spelled as in the HF
// config's "layer_types" list (transformers DeepseekV4Config).
type LayerType string

// The three attention layer types of DeepSeek-V4 (paper §2.3; legacy
// "compress_ratios" 0 / 4 / 128).
const (
	// LayerSliding: sliding-window attention only (compress ratio 0).
	LayerSliding LayerType = "sliding_attention"
	// LayerCSA: compressed sparse attention: sliding window + compressor at
	// ratio 4 with overlapping windows + lightning indexer top-k.
	LayerCSA LayerType = "compressed_sparse_attention"
	// LayerHCA: heavily compressed attention: sliding window + compressor at
	// ratio 128 (non-overlapping windows), no indexer.
	LayerHCA LayerType = "heavily_compressed_attention"
)

// MLPType is the MoE routing type of one decoder layer ("mlp_layer_types").
type MLPType string

// The two MoE layer types (legacy "num_hash_layers": the first N are hash).
const (
	// MLPHashMoE routes by the frozen table tid2eid[token_id] (hash routing).
	MLPHashMoE MLPType = "hash_moe"
	// MLPMoE routes by top-k of sqrtsoftplus(router logits) + bias.
	MLPMoE MLPType = "moe"
)

// RopeParameters is one RoPE variant ("main" or "compress" in the HF
// config's nested "rope_parameters"). Frequencies are interleaved pairs over
// the last RotaryDim channels of a head; theta_i = RopeTheta^(-2i/RotaryDim),
// then YaRN-scaled when RopeType is "yarn" (transformers
// _compute_yarn_parameters with attention_factor forced to 1.0 for V4).
type RopeParameters struct {
	RopeType                      string  // "default" or "yarn"
	RopeTheta                     float64 // base, e.g. 10000 (main) / 160000 (compress)
	PartialRotaryFactor           float64 // fraction of head_dim that rotates, e.g. 0.125
	Factor                        float64 // YaRN scale factor, e.g. 16 (0 when default)
	OriginalMaxPositionEmbeddings int     // YaRN original context, e.g. 65536
	BetaFast                      float64 // YaRN beta_fast, e.g. 32
	BetaSlow                      float64 // YaRN beta_slow, e.g. 1
	AttentionFactor               float64 // cos/sin multiplier; 1.0 for V4 compress layers
	Truncate                      *bool   // YaRN "truncate" when given (nil: transformers default true)
}

// QuantizationConfig is the "quantization_config" of config.json: the FP8
// block format of dense weights and, for NVIDIA's ModelOpt checkpoints, the
// NVFP4 format of routed experts. The loader does not trust it blindly: the
// actual format of each tensor is read from its dtype and sibling scales.
type QuantizationConfig struct {
	QuantMethod      string   // "fp8" (DeepSeek, ModelOpt mixed precision)
	Fmt              string   // "e4m3"
	ScaleFmt         string   // "ue8m0", or "" for float32 scales
	ActivationScheme string   // "dynamic"
	WeightBlockSize  [2]int   // [128, 128]
	QuantAlgo        string   // "MIXED_PRECISION" for ModelOpt NVFP4 experts
	MoEQuantAlgo     string   // "NVFP4" for ModelOpt NVFP4 experts
	GroupSize        int      // NVFP4 group size, 16
	Ignore           []string // module patterns left unquantized (ModelOpt)
}

// Config is a DeepSeek-V4 model configuration normalised to the field names of
// the Hugging Face transformers DeepseekV4Config (configuration_deepseek_v4.py).
// ParseConfig fills it from an HF config.json (including legacy keys) or from
// DeepSeek's own inference/config.json; absent keys take the HF defaults
// (V4-Flash geometry). All fields are set after a successful parse.
type Config struct {
	ModelType     string   // "deepseek_v4" ("" when the file had none, as DeepSeek's inference config)
	Architectures []string // e.g. ["DeepseekV4ForCausalLM"]

	VocabSize             int     // token ids 0..VocabSize-1 (129280)
	HiddenSize            int     // residual width D (4096)
	NumHiddenLayers       int     // decoder layers, MTP not counted (43)
	NumAttentionHeads     int     // query heads (64)
	NumKeyValueHeads      int     // always 1: one shared K=V head (MQA)
	HeadDim               int     // per-head width (512)
	QKRopeHeadDim         int     // rotary channels at the end of each head (64)
	PartialRotaryFactor   float64 // QKRopeHeadDim / HeadDim
	QLoraRank             int     // low-rank query width (1024)
	OGroups               int     // grouped output projection groups (8)
	OLoraRank             int     // per-group output rank (1024)
	SlidingWindow         int     // sliding-window length including the current token (128)
	MaxPositionEmbeddings int     // maximum context (1048576)
	RMSNormEps            float64 // RMSNorm epsilon (1e-6)
	HiddenAct             string  // "silu"

	LayerTypes      []LayerType // per layer, len NumHiddenLayers
	MLPLayerTypes   []MLPType   // per layer, len NumHiddenLayers
	CompressRateCSA int         // tokens per compressed entry in CSA layers (4)
	CompressRateHCA int         // tokens per compressed entry in HCA layers (128)

	IndexNHeads  int // lightning indexer heads (64)
	IndexHeadDim int // lightning indexer head width (128)
	IndexTopK    int // compressed entries kept per query (512)

	HCMult          int     // mHC residual streams (4)
	HCSinkhornIters int     // Sinkhorn iterations (20)
	HCEps           float64 // mHC epsilon (1e-6)

	MoEIntermediateSize int     // expert and shared-expert width (2048)
	NRoutedExperts      int     // routed experts per layer (256)
	NSharedExperts      int     // shared experts per layer (1)
	NumExpertsPerTok    int     // experts chosen per token (6)
	ScoringFunc         string  // router score: "sqrtsoftplus", "softmax" or "sigmoid"
	NormTopKProb        bool    // renormalise the selected scores
	RoutedScalingFactor float64 // multiplier of the routed weights (1.5)
	SwigluLimit         float64 // clamp of SwiGLU pre-activations (10)

	RopeTheta         float64        // main RoPE base (10000)
	CompressRopeTheta float64        // compress RoPE base (160000)
	RopeMain          RopeParameters // used by sliding_attention layers
	RopeCompress      RopeParameters // used by CSA/HCA layers, their compressors and the indexer

	NumNextNPredictLayers int // MTP layers shipped in the checkpoint (1); not run by the main model

	BOSTokenID        int   // 0
	EOSTokenIDs       []int // [1]
	PadTokenID        int   // -1 when none
	TieWordEmbeddings bool  // false for V4

	TorchDType   string              // "bfloat16", "float32", or DeepSeek's "fp8"
	ExpertDType  string              // "fp4", "fp8" or "" (the routed experts' published format)
	Quantization *QuantizationConfig // nil when config.json has none
}

// CompressRate returns the compression ratio of layer i: 0 for sliding
// layers, CompressRateCSA or CompressRateHCA otherwise.
func (c *Config) CompressRate(i int) int {
	switch c.LayerTypes[i] {
	case LayerCSA:
		return c.CompressRateCSA
	case LayerHCA:
		return c.CompressRateHCA
	}
	return 0
}

// Rope returns the RoPE parameters used by layer i's attention: RopeMain for
// sliding layers, RopeCompress for CSA and HCA layers.
func (c *Config) Rope(i int) RopeParameters {
	if c.LayerTypes[i] == LayerSliding {
		return c.RopeMain
	}
	return c.RopeCompress
}

// NumHashLayers counts the hash_moe layers.
func (c *Config) NumHashLayers() int {
	n := 0
	for _, t := range c.MLPLayerTypes {
		if t == MLPHashMoE {
			n++
		}
	}
	return n
}

// HCMixDim is the width of an mHC mixing site's "fn" output:
// (2 + HCMult) * HCMult (24 for hc_mult 4).
func (c *Config) HCMixDim() int { return (2 + c.HCMult) * c.HCMult }

// Limits on config values, so that a hostile config.json cannot make Load
// allocate absurd amounts of memory before any tensor is read.
const (
	maxConfigBytes = 4 << 20
	maxDim         = 1 << 24 // any single dimension
	maxLayers      = 4096
	maxExperts     = 1 << 16
)

// LoadConfig reads and parses dir/config.json (see ParseConfig). The path
// must be a regular file (symlinks followed): a directory, FIFO, device or
// socket is refused before it is opened (a *ConfigError, ErrConfig), so
// Load cannot block on a named pipe, as internal/safetensors does for shards.
func LoadConfig(path string) (*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &ConfigError{File: path, Field: "(file)", Expected: "a readable config.json (" + err.Error() + ")"}
	}
	if !st.Mode().IsRegular() {
		return nil, &ConfigError{File: path, Field: "(file)", Value: configFileKind(st.Mode()),
			Expected: "a regular file"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &ConfigError{File: path, Field: "(file)", Expected: "a readable config.json (" + err.Error() + ")"}
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, &ConfigError{File: path, Field: "(file)", Expected: "a readable config.json (" + err.Error() + ")"}
	}
	if n > maxConfigBytes {
		return nil, &ConfigError{File: path, Field: "(file)", Value: strconv.FormatInt(n, 10) + " bytes", Expected: fmt.Sprintf("at most %d bytes", maxConfigBytes)}
	}
	c, err := ParseConfig(buf.Bytes())
	if ce, ok := err.(*ConfigError); ok {
		ce.File = path
	}
	return c, err
}

// configFileKind names a non-regular file mode.
func configFileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// ParseConfig parses a DeepSeek-V4 config.json. It accepts:
//   - HF config.json of model_type "deepseek_v4" (transformers 5.17 names:
//     layer_types, mlp_layer_types, compress_rates, rope_parameters, ...);
//   - the legacy keys of the published checkpoints: compress_ratios (one per
//     layer plus trailing MTP entries, 0/4/128), num_hash_layers,
//     qk_rope_head_dim, compress_rate_csa/_hca, rope_scaling (YaRN),
//     expert_dtype, quantization_config (FP8 blocks; ModelOpt NVFP4 mixed);
//   - DeepSeek's inference/config.json names (dim, n_layers, n_heads,
//     moe_inter_dim, n_activated_experts, score_func, route_scale,
//     window_size, rope_head_dim, n_hash_layers, rope_factor,
//     original_seq_len, ...).
//
// Absent keys take the transformers defaults. The result follows
// DeepseekV4Config.__post_init__: layer lists are truncated to
// num_hidden_layers; YaRN goes on the compress RoPE only, with
// attention_factor 1.0. Errors are *ConfigError (errors.Is ErrConfig) naming
// the field and what was expected.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, &ConfigError{Field: "(file)", Value: strconv.Itoa(len(data)) + " bytes", Expected: fmt.Sprintf("at most %d bytes", maxConfigBytes)}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, &ConfigError{Field: "(json)", Expected: "a JSON object (" + err.Error() + ")"}
	}
	if raw == nil {
		return nil, &ConfigError{Field: "(json)", Value: "null", Expected: "a JSON object"}
	}
	p := &cfgParser{raw: raw}
	c := p.parse()
	if p.err != nil {
		return nil, p.err
	}
	return c, nil
}

type cfgParser struct {
	raw map[string]json.RawMessage
	err *ConfigError
}

func (p *cfgParser) fail(field, value, expected string) {
	if p.err == nil {
		p.err = &ConfigError{Field: field, Value: value, Expected: expected}
	}
}

// lookup returns the first present (non-null) key among keys.
func (p *cfgParser) lookup(keys ...string) (string, json.RawMessage, bool) {
	for _, k := range keys {
		if v, ok := p.raw[k]; ok && !isNull(v) {
			return k, v, true
		}
	}
	return "", nil, false
}

func isNull(v json.RawMessage) bool { return strings.TrimSpace(string(v)) == "null" }

func shortJSON(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

func jsonInt(v json.RawMessage) (int, bool) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// intField reads an integer in [lo, hi]; def when absent.
func (p *cfgParser) intField(def, lo, hi int, keys ...string) int {
	k, v, ok := p.lookup(keys...)
	if !ok {
		return def
	}
	n, ok := jsonInt(v)
	if !ok {
		p.fail(k, shortJSON(v), "an integer")
		return def
	}
	if n < lo || n > hi {
		p.fail(k, shortJSON(v), fmt.Sprintf("an integer in [%d, %d]", lo, hi))
		return def
	}
	return n
}

func (p *cfgParser) floatField(def float64, positive bool, keys ...string) float64 {
	k, v, ok := p.lookup(keys...)
	if !ok {
		return def
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail(k, shortJSON(v), "a number")
		return def
	}
	if positive && !(f > 0) {
		p.fail(k, shortJSON(v), "a positive number")
		return def
	}
	return f
}

func (p *cfgParser) stringField(def string, keys ...string) string {
	k, v, ok := p.lookup(keys...)
	if !ok {
		return def
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.fail(k, shortJSON(v), "a string")
		return def
	}
	return s
}

func (p *cfgParser) boolField(def bool, keys ...string) bool {
	k, v, ok := p.lookup(keys...)
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		p.fail(k, shortJSON(v), "true or false")
		return def
	}
	return b
}

func (p *cfgParser) oneOf(field, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	p.fail(field, strconv.Quote(got), "one of "+strings.Join(allowed, ", "))
}

func (p *cfgParser) parse() *Config {
	c := &Config{}
	c.ModelType = p.stringField("", "model_type")
	if c.ModelType != "" && c.ModelType != "deepseek_v4" {
		p.fail("model_type", strconv.Quote(c.ModelType), `"deepseek_v4"`)
	}
	if _, v, ok := p.lookup("architectures"); ok {
		if err := json.Unmarshal(v, &c.Architectures); err != nil {
			p.fail("architectures", shortJSON(v), "a list of strings")
		}
	}

	c.VocabSize = p.intField(129280, 1, 1<<26, "vocab_size")
	c.HiddenSize = p.intField(4096, 1, maxDim, "hidden_size", "dim")
	c.NumHiddenLayers = p.intField(43, 1, maxLayers, "num_hidden_layers", "n_layers")
	c.NumAttentionHeads = p.intField(64, 1, 1<<14, "num_attention_heads", "n_heads")
	c.NumKeyValueHeads = p.intField(1, 1, 1, "num_key_value_heads")
	c.HeadDim = p.intField(512, 2, 1<<16, "head_dim")
	c.QLoraRank = p.intField(1024, 1, maxDim, "q_lora_rank")
	c.OGroups = p.intField(8, 1, 1<<14, "o_groups")
	c.OLoraRank = p.intField(1024, 1, maxDim, "o_lora_rank")
	c.SlidingWindow = p.intField(128, 1, 1<<30, "sliding_window", "window_size")
	c.MaxPositionEmbeddings = p.intField(1048576, 1, 1<<40, "max_position_embeddings")
	c.RMSNormEps = p.floatField(1e-6, true, "rms_norm_eps", "norm_eps")
	c.HiddenAct = p.stringField("silu", "hidden_act")
	p.oneOf("hidden_act", c.HiddenAct, "silu")

	c.IndexNHeads = p.intField(64, 1, 1<<14, "index_n_heads")
	c.IndexHeadDim = p.intField(128, 2, 1<<16, "index_head_dim")
	c.IndexTopK = p.intField(512, 1, 1<<30, "index_topk")
	c.HCMult = p.intField(4, 1, 64, "hc_mult")
	c.HCSinkhornIters = p.intField(20, 1, 1000, "hc_sinkhorn_iters")
	c.HCEps = p.floatField(1e-6, true, "hc_eps")

	c.MoEIntermediateSize = p.intField(2048, 1, maxDim, "moe_intermediate_size", "moe_inter_dim")
	c.NRoutedExperts = p.intField(256, 1, maxExperts, "n_routed_experts")
	c.NSharedExperts = p.intField(1, 0, 1, "n_shared_experts")
	c.NumExpertsPerTok = p.intField(6, 1, maxExperts, "num_experts_per_tok", "n_activated_experts")
	if c.NumExpertsPerTok > c.NRoutedExperts {
		p.fail("num_experts_per_tok", strconv.Itoa(c.NumExpertsPerTok), fmt.Sprintf("at most n_routed_experts (%d)", c.NRoutedExperts))
	}
	c.ScoringFunc = p.stringField("sqrtsoftplus", "scoring_func", "score_func")
	p.oneOf("scoring_func", c.ScoringFunc, "sqrtsoftplus", "softmax", "sigmoid")
	c.NormTopKProb = p.boolField(true, "norm_topk_prob")
	c.RoutedScalingFactor = p.floatField(1.5, true, "routed_scaling_factor", "route_scale")
	c.SwigluLimit = p.floatField(10, false, "swiglu_limit")
	c.NumNextNPredictLayers = p.intField(1, 0, 64, "num_nextn_predict_layers", "n_mtp_layers")

	// Rotary dims: partial_rotary_factor > qk_rope_head_dim (legacy) > default 64/512.
	c.PartialRotaryFactor = 64.0 / 512
	if _, _, ok := p.lookup("partial_rotary_factor"); ok {
		c.PartialRotaryFactor = p.floatField(0, true, "partial_rotary_factor")
	} else if _, _, ok := p.lookup("qk_rope_head_dim", "rope_head_dim"); ok {
		rd := p.intField(64, 2, 1<<16, "qk_rope_head_dim", "rope_head_dim")
		c.PartialRotaryFactor = float64(rd) / float64(c.HeadDim)
	}
	c.QKRopeHeadDim = int(float64(c.HeadDim) * c.PartialRotaryFactor)
	if c.QKRopeHeadDim <= 0 || c.QKRopeHeadDim%2 != 0 || c.QKRopeHeadDim > c.HeadDim {
		p.fail("qk_rope_head_dim", strconv.Itoa(c.QKRopeHeadDim), fmt.Sprintf("an even number in [2, head_dim=%d]", c.HeadDim))
	}
	if c.QKRopeHeadDim > c.IndexHeadDim {
		p.fail("index_head_dim", strconv.Itoa(c.IndexHeadDim), fmt.Sprintf("at least qk_rope_head_dim (%d)", c.QKRopeHeadDim))
	}
	if c.NumAttentionHeads%c.OGroups != 0 {
		p.fail("o_groups", strconv.Itoa(c.OGroups), fmt.Sprintf("a divisor of num_attention_heads (%d)", c.NumAttentionHeads))
	}

	p.parseLayerTypes(c)
	p.parseRope(c)

	c.BOSTokenID = p.intField(0, -1, 1<<30, "bos_token_id")
	c.EOSTokenIDs = []int{1}
	if k, v, ok := p.lookup("eos_token_id"); ok {
		if n, ok := jsonInt(v); ok {
			c.EOSTokenIDs = []int{n}
		} else {
			var ids []int
			if err := json.Unmarshal(v, &ids); err != nil {
				p.fail(k, shortJSON(v), "an integer or a list of integers")
			} else {
				c.EOSTokenIDs = ids
			}
		}
	}
	c.PadTokenID = p.intField(-1, -1, 1<<30, "pad_token_id")
	c.TieWordEmbeddings = p.boolField(false, "tie_word_embeddings")
	c.TorchDType = p.stringField("", "torch_dtype", "dtype")
	c.ExpertDType = p.stringField("", "expert_dtype")
	if c.ExpertDType != "" {
		p.oneOf("expert_dtype", c.ExpertDType, "fp4", "fp8", "bf16", "bfloat16", "float32")
	}
	p.parseQuant(c)
	if c.ExpertDType == "" && c.Quantization != nil && c.Quantization.MoEQuantAlgo != "" {
		c.ExpertDType = "fp4"
	}
	return c
}

func (p *cfgParser) parseLayerTypes(c *Config) {
	n := c.NumHiddenLayers
	c.CompressRateCSA, c.CompressRateHCA = 4, 128
	if _, v, ok := p.lookup("compress_rates"); ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			p.fail("compress_rates", shortJSON(v), "an object keyed by layer type")
		}
		for k, rv := range m {
			r, ok := jsonInt(rv)
			if !ok || r < 1 || r > 1<<20 {
				p.fail("compress_rates."+k, shortJSON(rv), "a positive integer")
				continue
			}
			switch LayerType(k) {
			case LayerCSA:
				c.CompressRateCSA = r
			case LayerHCA:
				c.CompressRateHCA = r
			default:
				p.fail("compress_rates", strconv.Quote(k), "keys compressed_sparse_attention, heavily_compressed_attention")
			}
		}
	}
	c.CompressRateCSA = p.intField(c.CompressRateCSA, 1, 1<<20, "compress_rate_csa")
	c.CompressRateHCA = p.intField(c.CompressRateHCA, 1, 1<<20, "compress_rate_hca")

	// layer_types: explicit > compress_ratios > transformers default.
	if k, v, ok := p.lookup("layer_types"); ok {
		var names []string
		if err := json.Unmarshal(v, &names); err != nil {
			p.fail(k, shortJSON(v), "a list of layer type names")
			return
		}
		if len(names) < n {
			p.fail(k, fmt.Sprintf("%d entries", len(names)), fmt.Sprintf("num_hidden_layers (%d) entries", n))
			return
		}
		for i, s := range names[:n] {
			switch LayerType(s) {
			case LayerSliding, LayerCSA, LayerHCA:
				c.LayerTypes = append(c.LayerTypes, LayerType(s))
			default:
				p.fail(fmt.Sprintf("layer_types[%d]", i), strconv.Quote(s), "one of sliding_attention, compressed_sparse_attention, heavily_compressed_attention")
				return
			}
		}
	} else if k, v, ok := p.lookup("compress_ratios"); ok {
		var ratios []json.RawMessage
		if err := json.Unmarshal(v, &ratios); err != nil {
			p.fail(k, shortJSON(v), "a list of integers")
			return
		}
		if len(ratios) < n {
			p.fail(k, fmt.Sprintf("%d entries", len(ratios)), fmt.Sprintf("at least num_hidden_layers (%d) entries (trailing MTP entries allowed)", n))
			return
		}
		for i, rv := range ratios[:n] {
			r, ok := jsonInt(rv)
			switch {
			case ok && r == 0:
				c.LayerTypes = append(c.LayerTypes, LayerSliding)
			// As transformers: 4 means CSA and 128 HCA whatever compress_rates
			// say (the rates come from compress_rates); a ratio equal to a
			// custom rate is accepted too.
			case ok && (r == 4 || r == c.CompressRateCSA):
				c.LayerTypes = append(c.LayerTypes, LayerCSA)
			case ok && (r == 128 || r == c.CompressRateHCA):
				c.LayerTypes = append(c.LayerTypes, LayerHCA)
			default:
				p.fail(fmt.Sprintf("compress_ratios[%d]", i), shortJSON(rv), fmt.Sprintf("one of 0, 4 (or %d), 128 (or %d)", c.CompressRateCSA, c.CompressRateHCA))
				return
			}
		}
	} else {
		for i := range n {
			switch {
			case i < 2:
				c.LayerTypes = append(c.LayerTypes, LayerHCA)
			case (i-2)%2 == 1:
				c.LayerTypes = append(c.LayerTypes, LayerCSA)
			default:
				c.LayerTypes = append(c.LayerTypes, LayerHCA)
			}
		}
	}

	// mlp_layer_types: explicit > num_hash_layers > default 3 hash layers.
	if k, v, ok := p.lookup("mlp_layer_types"); ok {
		var names []string
		if err := json.Unmarshal(v, &names); err != nil {
			p.fail(k, shortJSON(v), "a list of MLP type names")
			return
		}
		if len(names) < n {
			p.fail(k, fmt.Sprintf("%d entries", len(names)), fmt.Sprintf("num_hidden_layers (%d) entries", n))
			return
		}
		for i, s := range names[:n] {
			switch MLPType(s) {
			case MLPHashMoE, MLPMoE:
				c.MLPLayerTypes = append(c.MLPLayerTypes, MLPType(s))
			default:
				p.fail(fmt.Sprintf("mlp_layer_types[%d]", i), strconv.Quote(s), "one of hash_moe, moe")
				return
			}
		}
	} else {
		nh := p.intField(3, 0, maxLayers, "num_hash_layers", "n_hash_layers")
		for i := range n {
			if i < nh {
				c.MLPLayerTypes = append(c.MLPLayerTypes, MLPHashMoE)
			} else {
				c.MLPLayerTypes = append(c.MLPLayerTypes, MLPMoE)
			}
		}
	}
}

// parseRope builds RopeMain and RopeCompress as DeepseekV4Config.__post_init__ does.
func (p *cfgParser) parseRope(c *Config) {
	c.RopeTheta = p.floatField(10000, true, "rope_theta")
	c.CompressRopeTheta = p.floatField(160000, true, "compress_rope_theta")
	c.RopeMain = RopeParameters{RopeType: "default", RopeTheta: c.RopeTheta, PartialRotaryFactor: c.PartialRotaryFactor, AttentionFactor: 1}

	var nested map[string]json.RawMessage
	if _, v, ok := p.lookup("rope_parameters"); ok {
		if err := json.Unmarshal(v, &nested); err != nil {
			p.fail("rope_parameters", shortJSON(v), "an object")
			return
		}
	}
	if mv, ok := nested["main"]; ok {
		if cv, ok2 := nested["compress"]; ok2 {
			// Already nested: transformers takes both as given; a missing
			// attention_factor is derived from factor and mscale (below).
			c.RopeMain = p.ropeParams("rope_parameters.main", mv, c.RopeTheta, c.PartialRotaryFactor, c.MaxPositionEmbeddings, false)
			c.RopeCompress = p.ropeParams("rope_parameters.compress", cv, c.CompressRopeTheta, c.PartialRotaryFactor, c.MaxPositionEmbeddings, false)
			return
		}
	}
	// Flat form: rope_parameters (flat) or legacy rope_scaling carry the YaRN
	// keys of the compress rope; DeepSeek's inference config has rope_factor.
	var flatKey string
	var flat json.RawMessage
	if nested != nil {
		flatKey, flat = "rope_parameters", p.raw["rope_parameters"]
	} else if _, v, ok := p.lookup("rope_scaling"); ok {
		flatKey, flat = "rope_scaling", v
	}
	if flat != nil {
		// As transformers: the flat dict supplies the YaRN keys; theta and the
		// rotary fraction always come from the top level.
		c.RopeCompress = p.ropeParams(flatKey, flat, c.CompressRopeTheta, c.PartialRotaryFactor, c.MaxPositionEmbeddings, true)
		c.RopeCompress.RopeTheta = c.CompressRopeTheta
		c.RopeCompress.PartialRotaryFactor = c.PartialRotaryFactor
		return
	}
	c.RopeCompress = RopeParameters{RopeType: "default", RopeTheta: c.CompressRopeTheta, PartialRotaryFactor: c.PartialRotaryFactor, AttentionFactor: 1}
	if f := p.floatField(0, true, "rope_factor"); f > 0 && f != 1 {
		c.RopeCompress.RopeType = "yarn"
		c.RopeCompress.Factor = f
		c.RopeCompress.OriginalMaxPositionEmbeddings = p.intField(65536, 1, 1<<40, "original_seq_len")
		c.RopeCompress.BetaFast = p.floatField(32, true, "beta_fast")
		c.RopeCompress.BetaSlow = p.floatField(1, true, "beta_slow")
	}
}

// ropeParams reads one RoPE dict with transformers' defaults for YaRN:
// original_max_position_embeddings = max_position_embeddings,
// factor = max_position_embeddings / original (modeling_rope_utils
// _compute_yarn_parameters), beta_fast 32 and beta_slow 1 when absent or 0,
// attention_factor 1.0 when forceAttn (DeepseekV4Config's flat form), else
// derived as _compute_yarn_parameters does: mscale(factor, mscale) /
// mscale(factor, mscale_all_dim) when both are given, else mscale(factor),
// with mscale(s, m) = 0.1*m*ln(s) + 1 for s > 1 (1 otherwise).
func (p *cfgParser) ropeParams(field string, v json.RawMessage, theta, prf float64, maxPos int, forceAttn bool) RopeParameters {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		p.fail(field, shortJSON(v), "an object")
		return RopeParameters{}
	}
	sub := &cfgParser{raw: m}
	r := RopeParameters{RopeType: "default", RopeTheta: theta, PartialRotaryFactor: prf, AttentionFactor: 1}
	r.RopeType = sub.stringField("default", "rope_type", "type")
	r.RopeTheta = sub.floatField(theta, true, "rope_theta")
	r.PartialRotaryFactor = sub.floatField(prf, true, "partial_rotary_factor")
	switch r.RopeType {
	case "default":
	case "yarn":
		r.OriginalMaxPositionEmbeddings = sub.intField(maxPos, 1, 1<<40, "original_max_position_embeddings")
		r.Factor = sub.floatField(float64(maxPos)/float64(r.OriginalMaxPositionEmbeddings), true, "factor")
		if r.BetaFast = sub.floatField(0, false, "beta_fast"); r.BetaFast == 0 {
			r.BetaFast = 32
		}
		if r.BetaSlow = sub.floatField(0, false, "beta_slow"); r.BetaSlow == 0 {
			r.BetaSlow = 1
		}
		r.AttentionFactor = sub.floatField(0, true, "attention_factor")
		if r.AttentionFactor == 0 {
			r.AttentionFactor = 1
			if !forceAttn {
				ms := sub.floatField(0, false, "mscale")
				msAll := sub.floatField(0, false, "mscale_all_dim")
				if ms != 0 && msAll != 0 {
					r.AttentionFactor = yarnMScale(r.Factor, ms) / yarnMScale(r.Factor, msAll)
				} else {
					r.AttentionFactor = yarnMScale(r.Factor, 1)
				}
			}
		}
		if _, tv, ok := sub.lookup("truncate"); ok {
			var b bool
			if err := json.Unmarshal(tv, &b); err == nil {
				r.Truncate = &b
			}
		}
	default:
		p.fail(field+".rope_type", strconv.Quote(r.RopeType), `"default" or "yarn"`)
	}
	if sub.err != nil {
		sub.err.Field = field + "." + sub.err.Field
		if p.err == nil {
			p.err = sub.err
		}
	}
	return r
}

// yarnMScale is transformers' get_mscale: 0.1*m*ln(s) + 1 for s > 1.
func yarnMScale(s, m float64) float64 {
	if s <= 1 {
		return 1
	}
	return 0.1*m*math.Log(s) + 1
}

func (p *cfgParser) parseQuant(c *Config) {
	_, v, ok := p.lookup("quantization_config")
	if !ok {
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		p.fail("quantization_config", shortJSON(v), "an object")
		return
	}
	sub := &cfgParser{raw: m}
	q := &QuantizationConfig{}
	q.QuantMethod = sub.stringField("", "quant_method")
	q.Fmt = sub.stringField("e4m3", "fmt")
	q.ScaleFmt = sub.stringField("", "scale_fmt")
	q.ActivationScheme = sub.stringField("", "activation_scheme")
	q.QuantAlgo = sub.stringField("", "quant_algo")
	q.MoEQuantAlgo = sub.stringField("", "moe_quant_algo")
	q.GroupSize = sub.intField(0, 0, 1<<20, "group_size")
	q.WeightBlockSize = [2]int{128, 128}
	if k, bv, ok := sub.lookup("weight_block_size"); ok {
		var bs []int
		if err := json.Unmarshal(bv, &bs); err != nil || len(bs) != 2 || bs[0] <= 0 || bs[1] <= 0 {
			sub.fail(k, shortJSON(bv), "two positive integers, e.g. [128, 128]")
		} else {
			q.WeightBlockSize = [2]int{bs[0], bs[1]}
		}
	}
	if _, iv, ok := sub.lookup("ignore"); ok {
		_ = json.Unmarshal(iv, &q.Ignore) // informational only
	}
	if q.QuantMethod != "" {
		sub.oneOf("quant_method", q.QuantMethod, "fp8", "modelopt")
	}
	sub.oneOf("fmt", q.Fmt, "e4m3")
	if q.ScaleFmt != "" {
		sub.oneOf("scale_fmt", q.ScaleFmt, "ue8m0")
	}
	if q.MoEQuantAlgo != "" {
		sub.oneOf("moe_quant_algo", q.MoEQuantAlgo, "NVFP4")
	}
	if sub.err != nil {
		sub.err.Field = "quantization_config." + sub.err.Field
		if p.err == nil {
			p.err = sub.err
		}
	}
	c.Quantization = q
}
