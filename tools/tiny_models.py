"""Tiny random DeepSeek-V4 checkpoints from transformers' DeepseekV4ForCausalLM.

Import it from other generators:

    from tiny_models import make_config, make_model, save_hf
    cfg = make_config(num_hidden_layers=4)
    model = make_model(cfg, seed=1)
    save_hf(model, "out/dir", dtype=torch.bfloat16)

Weights are drawn from a seeded torch.Generator (deterministic on one
machine and torch version), scaled so that activations stay O(1): linear
weights N(0, 1/in_features), norms 1 + N(0, 0.1), small random mHC, sinks,
position biases and router biases, and a random hash table tid2eid with
distinct experts per token. transformers' own init leaves many of these at
zero or one, which would hide bugs.

Checkpoints are written in HF naming (the module names of the transformers
model, e.g. model.layers.0.self_attn.q_a_proj.weight, merged routed experts
model.layers.0.mlp.experts.gate_up_proj), NOT through save_pretrained, whose
reverse conversion mapping writes a mix of HF and DeepSeek names.
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

# A 3-layer model that has one layer of each attention type (sliding, CSA,
# HCA), one hash_moe layer, and dims that exercise partial 128x128 FP8 blocks,
# 32-wide MXFP4 and 16-wide NVFP4 groups. About 0.4 M parameters.
TINY_DEFAULTS = dict(
    vocab_size=128,
    hidden_size=128,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=32,
    qk_rope_head_dim=8,
    q_lora_rank=32,
    o_groups=2,
    o_lora_rank=16,
    sliding_window=8,
    layer_types=[
        "sliding_attention",
        "compressed_sparse_attention",
        "heavily_compressed_attention",
    ],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
    num_hash_layers=1,
    index_n_heads=2,
    index_head_dim=16,
    index_topk=4,
    hc_mult=4,
    hc_sinkhorn_iters=20,
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_shared_experts=1,
    moe_intermediate_size=32,
    max_position_embeddings=4096,
    rope_theta=10000.0,
    compress_rope_theta=160000.0,
    rope_scaling={
        "type": "yarn",
        "factor": 16,
        "original_max_position_embeddings": 256,
        "beta_fast": 32,
        "beta_slow": 1,
    },
    bos_token_id=0,
    eos_token_id=1,
)


def make_config(**overrides) -> DeepseekV4Config:
    """DeepseekV4Config from TINY_DEFAULTS updated with overrides.

    Legacy keys (compress_ratios, num_hash_layers, qk_rope_head_dim,
    rope_scaling) are accepted as transformers accepts them. When overrides
    change num_hidden_layers without layer_types, layer_types cycles
    sliding / CSA / HCA.
    """
    kw = dict(TINY_DEFAULTS)
    kw.update(overrides)
    n = kw["num_hidden_layers"]
    if "num_hidden_layers" in overrides and "layer_types" not in overrides and "compress_ratios" not in overrides:
        cycle = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
        kw["layer_types"] = [cycle[i % 3] for i in range(n)]
    if "compress_ratios" in overrides:
        kw.pop("layer_types", None)
    return DeepseekV4Config(**kw)


def _randn(shape, gen, std):
    return torch.randn(shape, generator=gen, dtype=torch.float32) * std


@torch.no_grad()
def randomize(model: DeepseekV4ForCausalLM, seed: int) -> None:
    """Overwrite every parameter and persistent buffer with seeded values."""
    gen = torch.Generator().manual_seed(seed)
    cfg = model.config
    for name, t in sorted(model.state_dict().items()):
        leaf = name.rsplit(".", 1)[-1]
        if name.endswith("tid2eid"):
            rows = [torch.randperm(cfg.n_routed_experts, generator=gen)[: cfg.num_experts_per_tok] for _ in range(t.shape[0])]
            t.copy_(torch.stack(rows).to(t.dtype))
        elif name.endswith("e_score_correction_bias"):
            t.copy_(_randn(t.shape, gen, 0.1))
        elif name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            t.copy_(1.0 + _randn(t.shape, gen, 0.1))
        elif name.endswith("sinks"):
            t.copy_(_randn(t.shape, gen, 0.5))
        elif leaf in ("fn", "hc_fn"):
            t.copy_(_randn(t.shape, gen, 0.05))
        elif leaf in ("base", "hc_base"):
            t.copy_(_randn(t.shape, gen, 0.1))
        elif leaf in ("scale", "hc_scale"):
            t.copy_(1.0 + _randn(t.shape, gen, 0.1))
        elif leaf == "position_bias":
            t.copy_(_randn(t.shape, gen, 0.1))
        elif t.dim() >= 2:
            t.copy_(_randn(t.shape, gen, t.shape[-1] ** -0.5))
        else:
            t.copy_(_randn(t.shape, gen, 0.1))


def make_model(config: DeepseekV4Config, seed: int = 0) -> DeepseekV4ForCausalLM:
    """A DeepseekV4ForCausalLM (float32, eval mode) with seeded random weights."""
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(config).eval()
    randomize(model, seed)
    return model


def make_tiny(seed: int = 0, **overrides) -> DeepseekV4ForCausalLM:
    """make_model(make_config(**overrides), seed)."""
    return make_model(make_config(**overrides), seed)


def hf_state_dict(model: DeepseekV4ForCausalLM, dtype=torch.bfloat16) -> dict:
    """The model's state dict in HF naming, float tensors cast to dtype.

    Integer buffers (tid2eid) keep their dtype (int64). Modules transformers
    keeps in fp32 (mHC, sinks, position_bias, e_score_correction_bias) stay
    float32, as in published checkpoints; norms are cast with the rest.
    """
    keep_fp32 = ("attn_hc.", "ffn_hc.", "hc_head.", ".sinks", "position_bias", "e_score_correction_bias")
    out = {}
    for name, t in model.state_dict().items():
        t = t.detach().contiguous()
        if t.is_floating_point() and not any(k in name for k in keep_fp32):
            t = t.to(dtype)
        out[name] = t.clone()
    return out


def save_hf(model: DeepseekV4ForCausalLM, out_dir: str, dtype=torch.bfloat16, shards: int = 1) -> None:
    """Write config.json and the weights in HF naming into out_dir.

    shards > 1 splits the tensors (in name order) over shards files
    model-0000i-of-0000n.safetensors with a model.safetensors.index.json.
    """
    os.makedirs(out_dir, exist_ok=True)
    cfg = model.config.to_dict()
    cfg["dtype"] = str(dtype).replace("torch.", "")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    sd = hf_state_dict(model, dtype)
    names = sorted(sd)
    meta = {"format": "pt"}
    if shards <= 1:
        save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata=meta)
        return
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for i in range(shards):
        part = names[i * per : (i + 1) * per]
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: sd[n] for n in part}, os.path.join(out_dir, fname), metadata=meta)
        for n in part:
            weight_map[n] = fname
            total += sd[n].numel() * sd[n].element_size()
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    import sys

    out = sys.argv[1] if len(sys.argv) > 1 else "tiny-dsv4"
    save_hf(make_tiny(seed=0), out)
    print("wrote", out)
