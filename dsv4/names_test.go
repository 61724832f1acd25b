package dsv4

import "testing"

func TestCanonicalName(t *testing.T) {
	tests := []struct{ in, want string }{
		// upstream
		{"embed.weight", "embed_tokens.weight"},
		{"head.weight", "lm_head.weight"},
		{"norm.weight", "norm.weight"},
		{"hc_head_fn", "hc_head.hc_fn"},
		{"hc_head_scale", "hc_head.hc_scale"},
		{"layers.0.attn_norm.weight", "layers.0.input_layernorm.weight"},
		{"layers.0.ffn_norm.weight", "layers.0.post_attention_layernorm.weight"},
		{"layers.0.hc_attn_fn", "layers.0.attn_hc.fn"},
		{"layers.0.hc_ffn_scale", "layers.0.ffn_hc.scale"},
		{"layers.0.attn.attn_sink", "layers.0.self_attn.sinks"},
		{"layers.0.attn.wq_a.weight", "layers.0.self_attn.q_a_proj.weight"},
		{"layers.0.attn.wq_a.scale", "layers.0.self_attn.q_a_proj.weight_scale_inv"},
		{"layers.0.attn.q_norm.weight", "layers.0.self_attn.q_a_norm.weight"},
		{"layers.0.attn.kv_norm.weight", "layers.0.self_attn.kv_norm.weight"},
		{"layers.0.attn.wo_b.scale", "layers.0.self_attn.o_b_proj.weight_scale_inv"},
		{"layers.2.attn.compressor.wkv.weight", "layers.2.self_attn.compressor.kv_proj.weight"},
		{"layers.2.attn.compressor.wgate.weight", "layers.2.self_attn.compressor.gate_proj.weight"},
		{"layers.2.attn.compressor.norm.weight", "layers.2.self_attn.compressor.kv_norm.weight"},
		{"layers.2.attn.compressor.ape", "layers.2.self_attn.compressor.position_bias"},
		{"layers.2.attn.indexer.wq_b.weight", "layers.2.self_attn.compressor.indexer.q_b_proj.weight"},
		{"layers.2.attn.indexer.wq_b.scale", "layers.2.self_attn.compressor.indexer.q_b_proj.weight_scale_inv"},
		{"layers.2.attn.indexer.weights_proj.weight", "layers.2.self_attn.compressor.indexer.scorer.weights_proj.weight"},
		{"layers.2.attn.indexer.compressor.wkv.weight", "layers.2.self_attn.compressor.indexer.kv_proj.weight"},
		{"layers.2.attn.indexer.compressor.norm.weight", "layers.2.self_attn.compressor.indexer.kv_norm.weight"},
		{"layers.2.attn.indexer.compressor.ape", "layers.2.self_attn.compressor.indexer.position_bias"},
		{"layers.3.ffn.gate.weight", "layers.3.mlp.gate.weight"},
		{"layers.3.ffn.gate.bias", "layers.3.mlp.gate.e_score_correction_bias"},
		{"layers.0.ffn.gate.tid2eid", "layers.0.mlp.gate.tid2eid"},
		{"layers.3.ffn.experts.17.w1.weight", "layers.3.mlp.experts.17.gate_proj.weight"},
		{"layers.3.ffn.experts.17.w2.scale", "layers.3.mlp.experts.17.down_proj.weight_scale_inv"},
		{"layers.3.ffn.experts.17.w3.weight_scale_2", "layers.3.mlp.experts.17.up_proj.weight_scale_2"},
		{"layers.3.ffn.experts.17.w3.input_scale", "layers.3.mlp.experts.17.up_proj.input_scale"},
		{"layers.3.ffn.shared_experts.w2.weight", "layers.3.mlp.shared_experts.down_proj.weight"},
		{"mtp.0.e_proj.scale", "mtp.0.e_proj.weight_scale_inv"},
		{"mtp.0.norm.weight", "mtp.0.norm.weight"},
		{"mtp.0.hc_head_fn", "mtp.0.hc_head.hc_fn"},
		// HF
		{"model.embed_tokens.weight", "embed_tokens.weight"},
		{"lm_head.weight", "lm_head.weight"},
		{"model.hc_head.hc_fn", "hc_head.hc_fn"},
		{"model.layers.1.self_attn.q_a_proj.weight", "layers.1.self_attn.q_a_proj.weight"},
		{"model.layers.1.self_attn.q_a_proj.weight_scale_inv", "layers.1.self_attn.q_a_proj.weight_scale_inv"},
		{"model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight", "layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight"},
		{"model.layers.1.mlp.experts.gate_up_proj", "layers.1.mlp.experts.gate_up_proj"},
		{"model.layers.1.mlp.shared_experts.up_proj.weight", "layers.1.mlp.shared_experts.up_proj.weight"},
		{"model.layers.1.attn_hc.scale", "layers.1.attn_hc.scale"},
		// save_pretrained mix
		{"model.layers.1.attn.norm.weight", "layers.1.self_attn.kv_norm.weight"},
		{"model.layers.1.attn.wq_b.weight", "layers.1.self_attn.q_b_proj.weight"},
	}
	for _, tt := range tests {
		if got := CanonicalName(tt.in); got != tt.want {
			t.Errorf("CanonicalName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUpstreamNameRoundTrip(t *testing.T) {
	upstream := []string{
		"embed.weight", "head.weight", "norm.weight", "hc_head_fn", "hc_head_base", "hc_head_scale",
		"layers.0.attn_norm.weight", "layers.0.ffn_norm.weight", "layers.0.hc_attn_fn", "layers.0.hc_attn_base",
		"layers.0.hc_attn_scale", "layers.0.hc_ffn_fn", "layers.0.hc_ffn_base", "layers.0.hc_ffn_scale",
		"layers.0.attn.attn_sink", "layers.0.attn.wq_a.weight", "layers.0.attn.wq_a.scale", "layers.0.attn.q_norm.weight",
		"layers.0.attn.wq_b.weight", "layers.0.attn.wq_b.scale", "layers.0.attn.wkv.weight", "layers.0.attn.wkv.scale",
		"layers.0.attn.kv_norm.weight", "layers.0.attn.wo_a.weight", "layers.0.attn.wo_a.scale", "layers.0.attn.wo_b.weight",
		"layers.0.attn.wo_b.scale", "layers.2.attn.compressor.wkv.weight", "layers.2.attn.compressor.wgate.weight",
		"layers.2.attn.compressor.norm.weight", "layers.2.attn.compressor.ape", "layers.2.attn.indexer.wq_b.weight",
		"layers.2.attn.indexer.wq_b.scale", "layers.2.attn.indexer.weights_proj.weight",
		"layers.2.attn.indexer.compressor.wkv.weight", "layers.2.attn.indexer.compressor.wgate.weight",
		"layers.2.attn.indexer.compressor.norm.weight", "layers.2.attn.indexer.compressor.ape",
		"layers.0.ffn.gate.weight", "layers.3.ffn.gate.bias", "layers.0.ffn.gate.tid2eid",
		"layers.3.ffn.experts.255.w1.weight", "layers.3.ffn.experts.255.w1.scale", "layers.3.ffn.experts.0.w2.weight",
		"layers.3.ffn.experts.0.w3.weight", "layers.3.ffn.experts.0.w3.weight_scale", "layers.3.ffn.experts.0.w3.weight_scale_2",
		"layers.3.ffn.experts.0.w3.input_scale",
		"layers.3.ffn.shared_experts.w1.weight", "layers.3.ffn.shared_experts.w2.scale", "layers.3.ffn.shared_experts.w3.weight",
		"mtp.0.e_proj.weight", "mtp.0.h_proj.scale", "mtp.0.enorm.weight", "mtp.0.norm.weight", "mtp.0.hc_head_fn",
		"mtp.0.attn.wq_a.weight", "mtp.0.ffn.experts.3.w2.weight",
	}
	seen := map[string]string{}
	for _, u := range upstream {
		c := CanonicalName(u)
		if prev, dup := seen[c]; dup {
			t.Errorf("%q and %q both map to %q", prev, u, c)
		}
		seen[c] = u
		if back := UpstreamName(c); back != u {
			t.Errorf("UpstreamName(CanonicalName(%q)=%q) = %q", u, c, back)
		}
	}
}

func TestCanonicalNameOddInputs(t *testing.T) {
	for _, n := range []string{"", ".", ".x", "x.", "#", "a.#.1", "1", "..1..", "layers.007.attn.wq_a.scale"} {
		got := CanonicalName(n)
		if again := CanonicalName(n); again != got {
			t.Errorf("%q not deterministic", n)
		}
		if n == "layers.007.attn.wq_a.scale" && got != "layers.007.self_attn.q_a_proj.weight_scale_inv" {
			t.Errorf("%q -> %q", n, got)
		}
	}
}
