package dsv4

import (
	"strings"
	"sync"
)

// Naming schemes. A DeepSeek-V4 tensor can be spelled three ways:
//
//   - HF (transformers module names): "model.layers.3.self_attn.q_a_proj.weight",
//     "model.embed_tokens.weight", "lm_head.weight", merged routed experts
//     "model.layers.3.mlp.experts.gate_up_proj"; FP8 scales
//     "...q_a_proj.weight_scale_inv";
//   - upstream (DeepSeek's runtime names, the published checkpoints and
//     NVIDIA's NVFP4 one): "layers.3.attn.wq_a.weight" + "layers.3.attn.wq_a.scale",
//     "embed.weight", "head.weight", "layers.3.ffn.experts.7.w1.weight";
//     NVFP4 adds ".weight_scale", ".weight_scale_2", ".input_scale";
//   - the mix written by transformers' save_pretrained (its reverse
//     conversion mapping): "model." prefix with upstream leaf names, e.g.
//     "model.layers.3.attn.wq_a.weight", "model.layers.3.attn.norm.weight".
//
// CanonicalName maps all three to one canonical spelling: the HF module name
// without the leading "model.", per-expert routed weights as
// "layers.L.mlp.experts.E.{gate,up,down}_proj.weight", and any block scale
// of a linear weight as ".weight_scale_inv" (the form is decided from dtypes
// later). NVFP4's ".weight_scale", ".weight_scale_2" and ".input_scale" keep
// their names.

// renames are (upstream, canonical) substring pairs applied in order to
// "." + name + "." (so each pattern matches whole dot-separated segments).
var renames = [][2]string{
	{".indexer.compressor.", ".compressor.indexer."},
	{".attn.indexer.", ".attn.compressor.indexer."},
	{".attn.", ".self_attn."},
	{".ffn.", ".mlp."},
	{".attn_norm.", ".input_layernorm."},
	{".ffn_norm.", ".post_attention_layernorm."},
	{".hc_attn_fn.", ".attn_hc.fn."},
	{".hc_attn_base.", ".attn_hc.base."},
	{".hc_attn_scale.", ".attn_hc.scale."},
	{".hc_ffn_fn.", ".ffn_hc.fn."},
	{".hc_ffn_base.", ".ffn_hc.base."},
	{".hc_ffn_scale.", ".ffn_hc.scale."},
	{".hc_head_fn.", ".hc_head.hc_fn."},
	{".hc_head_base.", ".hc_head.hc_base."},
	{".hc_head_scale.", ".hc_head.hc_scale."},
	{".attn_sink.", ".sinks."},
	{".indexer.weights_proj.", ".indexer.scorer.weights_proj."},
	{".indexer.wq_b.", ".indexer.q_b_proj."},
	{".self_attn.norm.", ".self_attn.kv_norm."},
	{".compressor.norm.", ".compressor.kv_norm."},
	{".indexer.norm.", ".indexer.kv_norm."},
	{".ape.", ".position_bias."},
	{".wq_a.", ".q_a_proj."},
	{".wq_b.", ".q_b_proj."},
	{".wkv.", ".kv_proj."},
	{".wgate.", ".gate_proj."},
	{".wo_a.", ".o_a_proj."},
	{".wo_b.", ".o_b_proj."},
	{".q_norm.", ".q_a_norm."},
	{".gate.bias.", ".gate.e_score_correction_bias."},
	{".w1.", ".gate_proj."},
	{".w2.", ".down_proj."},
	{".w3.", ".up_proj."},
}

// CanonicalName maps a tensor name in any of the supported naming schemes
// to its canonical spelling (see above). Unknown names come back with only
// the "model." prefix removed and the renames applied, so unexpected
// tensors can still be reported by their original name.
func CanonicalName(name string) string {
	// The renames never touch numeric segments (layer and expert numbers), so
	// names are mapped once per template ("layers.#.ffn.experts.#.w1.weight")
	// and the numbers put back: V4-Flash's ~70k names have ~100 templates.
	tmpl, nums := nameTemplate(name)
	canonicalCache.RLock()
	ct, ok := canonicalCache.m[tmpl]
	canonicalCache.RUnlock()
	if !ok {
		ct = canonicalName(tmpl)
		canonicalCache.Lock()
		if len(canonicalCache.m) < 1<<16 {
			canonicalCache.m[tmpl] = ct
		}
		canonicalCache.Unlock()
	}
	if len(nums) == 0 {
		return ct
	}
	var sb strings.Builder
	sb.Grow(len(ct) + 8)
	for i, seg := range strings.Split(ct, ".") {
		if i > 0 {
			sb.WriteByte('.')
		}
		if seg == "#" && len(nums) > 0 {
			sb.WriteString(nums[0])
			nums = nums[1:]
		} else {
			sb.WriteString(seg)
		}
	}
	return sb.String()
}

var canonicalCache = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// nameTemplate replaces every all-digit dot-separated segment with "#" and
// returns the digits in order. Names that already contain a "#" segment are
// returned unchanged (no numbers), so the template is always unambiguous.
func nameTemplate(name string) (string, []string) {
	var nums []string
	var sb strings.Builder
	for i, seg := range strings.Split(name, ".") {
		if i > 0 {
			sb.WriteByte('.')
		}
		if seg == "#" {
			return name, nil
		}
		if isDigits(seg) {
			nums = append(nums, seg)
			sb.WriteByte('#')
		} else {
			sb.WriteString(seg)
		}
	}
	return sb.String(), nums
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func canonicalName(name string) string {
	n := strings.TrimPrefix(name, "model.")
	switch n {
	case "embed.weight":
		return "embed_tokens.weight"
	case "head.weight":
		return "lm_head.weight"
	}
	s := "." + n + "."
	for _, r := range renames {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	s = s[1 : len(s)-1]
	// A linear weight's block scale: upstream ".scale", HF ".weight_scale_inv".
	if strings.HasSuffix(s, "_proj.scale") {
		s = strings.TrimSuffix(s, ".scale") + ".weight_scale_inv"
	}
	return s
}

// upstreamRenames is the inverse table for UpstreamName, applied in order.
var upstreamRenames = [][2]string{
	{".compressor.indexer.scorer.weights_proj.", ".indexer.weights_proj."},
	{".compressor.indexer.q_b_proj.", ".indexer.wq_b."},
	{".compressor.indexer.", ".indexer.compressor."},
	{".self_attn.", ".attn."},
	{".mlp.", ".ffn."},
	{".input_layernorm.", ".attn_norm."},
	{".post_attention_layernorm.", ".ffn_norm."},
	{".attn_hc.fn.", ".hc_attn_fn."},
	{".attn_hc.base.", ".hc_attn_base."},
	{".attn_hc.scale.", ".hc_attn_scale."},
	{".ffn_hc.fn.", ".hc_ffn_fn."},
	{".ffn_hc.base.", ".hc_ffn_base."},
	{".ffn_hc.scale.", ".hc_ffn_scale."},
	{".hc_head.hc_fn.", ".hc_head_fn."},
	{".hc_head.hc_base.", ".hc_head_base."},
	{".hc_head.hc_scale.", ".hc_head_scale."},
	{".sinks.", ".attn_sink."},
	{".compressor.kv_norm.", ".compressor.norm."},
	{".position_bias.", ".ape."},
	{".q_a_proj.", ".wq_a."},
	{".q_b_proj.", ".wq_b."},
	{".kv_proj.", ".wkv."},
	{".o_a_proj.", ".wo_a."},
	{".o_b_proj.", ".wo_b."},
	{".q_a_norm.", ".q_norm."},
	{".gate.e_score_correction_bias.", ".gate.bias."},
	{".shared_experts.gate_proj.", ".shared_experts.w1."},
	{".shared_experts.down_proj.", ".shared_experts.w2."},
	{".shared_experts.up_proj.", ".shared_experts.w3."},
	{".compressor.gate_proj.", ".compressor.wgate."},
}

// UpstreamName maps a canonical name to DeepSeek's upstream spelling (the
// inverse of CanonicalName for every tensor of the model), e.g.
// "layers.0.self_attn.q_a_proj.weight_scale_inv" -> "layers.0.attn.wq_a.scale"
// and "layers.0.mlp.experts.5.gate_proj.weight" -> "layers.0.ffn.experts.5.w1.weight".
// NVFP4 scale names (".weight_scale", ".weight_scale_2", ".input_scale")
// are kept, as in NVIDIA's checkpoint.
func UpstreamName(canonical string) string {
	switch canonical {
	case "embed_tokens.weight":
		return "embed.weight"
	case "lm_head.weight":
		return "head.weight"
	}
	s := "." + canonical + "."
	for _, r := range upstreamRenames {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	// Routed experts: experts.E.{gate,down,up}_proj -> experts.E.w{1,2,3}.
	if i := strings.Index(s, ".experts."); i >= 0 {
		rest := s[i+len(".experts."):]
		if j := strings.IndexByte(rest, '.'); j > 0 {
			tail := rest[j:]
			for _, r := range [][2]string{{".gate_proj.", ".w1."}, {".down_proj.", ".w2."}, {".up_proj.", ".w3."}} {
				if strings.HasPrefix(tail, r[0]) {
					tail = r[1] + tail[len(r[0]):]
				}
			}
			s = s[:i] + ".experts." + rest[:j] + tail
		}
	}
	s = s[1 : len(s)-1]
	if strings.HasSuffix(s, ".weight_scale_inv") {
		s = strings.TrimSuffix(s, ".weight_scale_inv") + ".scale"
	}
	return s
}
