#!/usr/bin/env python3
"""Golden logits for dsv4's CPU forward pass, from transformers' DeepseekV4ForCausalLM.

Run from the repository root:  tools/.venv/bin/python tools/gen_forward_goldens.py

For each tiny config below it
  * builds DeepseekV4ForCausalLM with random float32 weights (every parameter and buffer
    randomised, including the ones HF initialises to zero: sinks, position_bias,
    e_score_correction_bias, hc base, tid2eid),
  * writes the checkpoint, HF-named, to dsv4/testdata/forward/<name>/ (config.json +
    model.safetensors, float32),
  * upcasts the model to float64 (the oracle: float64 math on the float32 weights) and
    records, in dsv4/testdata/forward/<name>/golden.json.gz:
      - "full":        logits of every position of one forward over all tokens,
      - "incremental": logits at position prefill-1 after a prefill of `prefill` tokens,
                       then of each single-token decode step over the remaining tokens,
      - "chunked":     logits of every position, fed in the uneven `chunks`,
      - "greedy":      prompt + greedy continuation ids (incremental decode, float64),
    and the margins that make the goldens robust to float32 rounding: the smallest gap
    between the k-th and (k+1)-th valid lightning-indexer score and router score of any
    query, and between the top-2 logits of every greedy step. A config whose margins are
    too small is regenerated with the next seed.
  * the "ties" config uses 2 indexer heads, so that ReLU makes many indexer scores
    exactly 0; its golden records how far the oracle's own full and incremental paths
    disagree (top-k tie order), and is used by the Go tie-handling test (Go must be
    self-consistent there, and match the oracle wherever no tie is involved).
"""
import gzip
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mv4

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dsv4", "testdata", "forward")

BASE = dict(
    vocab_size=96,
    hidden_size=32,
    moe_intermediate_size=16,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=16,
    partial_rotary_factor=0.5,
    q_lora_rank=16,
    o_groups=2,
    o_lora_rank=8,
    num_experts_per_tok=2,
    n_routed_experts=8,
    n_shared_experts=1,
    sliding_window=8,
    index_n_heads=16,
    index_head_dim=12,
    index_topk=3,
    hc_sinkhorn_iters=20,
    hc_eps=1e-6,
    rms_norm_eps=1e-6,
    swiglu_limit=1.5,  # small so that the clamp is exercised by random activations
    routed_scaling_factor=1.5,
    max_position_embeddings=4096,
    rope_theta=10000.0,
    compress_rope_theta=160000.0,
    bos_token_id=0,
    eos_token_id=1,
    tie_word_embeddings=False,
)

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32, "beta_slow": 1}

CONFIGS = [
    # every layer type, hash + top-k routing, hc 4, YaRN on the compress rope
    dict(name="mixed-hc4-yarn", seed=1, length=45, prefill=6, chunks=[3, 7, 1, 11, 9, 14], greedy_prompt=9, greedy=12,
         cfg=dict(num_hidden_layers=4, hc_mult=4,
                  layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"],
                  mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
                  compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                  rope_parameters=dict(YARN))),
    # hc 1, plain rope, top-k routing only, head_dim 32 with rope 8
    dict(name="hc1-rope", seed=2, length=40, prefill=5, chunks=[2, 9, 4, 13, 12], greedy_prompt=7, greedy=10,
         cfg=dict(num_hidden_layers=3, hc_mult=1, head_dim=32, partial_rotary_factor=0.25, o_groups=4,
                  layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"],
                  mlp_layer_types=["moe", "moe", "moe"],
                  compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8})),
    # hc 2, YaRN, HCA first, hash routing in two layers, CSA rate 2
    dict(name="hc2-yarn", seed=3, length=38, prefill=11, chunks=[5, 1, 1, 16, 15], greedy_prompt=6, greedy=10,
         cfg=dict(num_hidden_layers=3, hc_mult=2,
                  layer_types=["heavily_compressed_attention", "sliding_attention", "compressed_sparse_attention"],
                  mlp_layer_types=["hash_moe", "hash_moe", "moe"],
                  compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
                  index_topk=4, rope_parameters=dict(YARN))),
    # hc 4, CSA only with a top-k that covers every entry early and selects later
    dict(name="csa-hc4", seed=4, length=48, prefill=17, chunks=[13, 2, 20, 13], greedy_prompt=10, greedy=10,
         cfg=dict(num_hidden_layers=2, hc_mult=4, sliding_window=5,
                  layer_types=["compressed_sparse_attention", "compressed_sparse_attention"],
                  mlp_layer_types=["hash_moe", "moe"],
                  compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
                  index_topk=5)),
]

# source of the quantized forms (hidden and expert widths multiples of 32, as MXFP4 needs)
QUANT_SRC = dict(name="quant-src", seed=6, length=40, prefill=9, chunks=[11, 6, 23], greedy_prompt=8, greedy=10,
                 cfg=dict(num_hidden_layers=3, hc_mult=4, hidden_size=64, moe_intermediate_size=32,
                          layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"],
                          mlp_layer_types=["hash_moe", "moe", "moe"],
                          compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                          rope_parameters=dict(YARN)))
CONFIGS.append(QUANT_SRC)

# upstream-named quantized forms of quant-src, written by the Go converter (examples/convert)
QUANT_FORMS = [("quant-fp8-mxfp4", "mxfp4"), ("quant-nvfp4", "nvfp4")]

TIES = dict(name="ties", seed=5, length=40, prefill=4, chunks=[7, 9, 24], greedy_prompt=6, greedy=6,
            cfg=dict(num_hidden_layers=2, hc_mult=2, index_n_heads=2,
                     layer_types=["compressed_sparse_attention", "compressed_sparse_attention"],
                     mlp_layer_types=["moe", "moe"],
                     compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 8},
                     index_topk=2))


def float64_oracle():
    """Lifts the oracle's internal float32 casts so that all its math runs in float64.

    DeepseekV4ForCausalLM computes RMSNorm, the mHC mixing weights, the rotary angles, the
    compressor gate softmax and the indexer scores in float32 even when the model is
    float64 (`.float()`, `.to(torch.float32)`, `softmax(dtype=torch.float32)`); without
    this its own full / chunked / incremental paths differ by ~2e-6. The math is
    unchanged; only the precision of those steps is raised to float64. The rotary inverse
    frequencies keep their float32 values (computed at init).
    """
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
    orig_softmax = torch.Tensor.softmax

    def softmax(self, *a, dtype=None, **k):
        if dtype == torch.float32:
            dtype = torch.float64
        return orig_softmax(self, *a, dtype=dtype, **k)

    torch.Tensor.softmax = softmax

    def rms_forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    mv4.DeepseekV4RMSNorm.forward = rms_forward


def build(spec, seed):
    kw = dict(BASE)
    kw.update(spec["cfg"])
    config = DeepseekV4Config(**kw)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(config).to(torch.float32).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if "inv_freq" in name:
                continue
            if name.endswith("tid2eid"):
                # distinct experts per token
                rows = [torch.randperm(config.n_routed_experts, generator=g)[: config.num_experts_per_tok] for _ in range(config.vocab_size)]
                p.copy_(torch.stack(rows).to(p.dtype))
                continue
            if p.dim() == 1 and ("norm" in name):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".scale") or name.endswith("hc_scale"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif p.dim() == 1 or "position_bias" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
    return config, model


class Recorder:
    """Collects lightning-indexer and router score margins through forward hooks."""

    def __init__(self, model, config):
        self.min_index_margin = math.inf
        self.min_router_margin = math.inf
        self.index_ties = 0
        self.config = config
        self.positions = None
        self.handles = []
        for layer in model.model.layers:
            comp = layer.self_attn.compressor
            if isinstance(comp, mv4.DeepseekV4CSACompressor):
                self.handles.append(comp.indexer.scorer.register_forward_hook(self.on_scores))
            if isinstance(layer.mlp.gate, mv4.DeepseekV4TopKRouter):
                self.handles.append(layer.mlp.gate.register_forward_hook(self.on_router))

    def on_scores(self, mod, inp, out):
        m = self.config.compress_rates["compressed_sparse_attention"]
        k = self.config.index_topk
        s = out[0]  # [S, T]
        for qi, p in enumerate(self.positions):
            valid = (p + 1) // m
            if valid <= k:
                continue
            row = torch.sort(s[qi, :valid], descending=True).values
            gap = float(row[k - 1] - row[k])
            self.min_index_margin = min(self.min_index_margin, gap)
            if gap == 0:
                self.index_ties += 1

    def on_router(self, mod, inp, out):
        logits = out[0]
        scores = torch.nn.functional.softplus(logits).sqrt() + mod.e_score_correction_bias
        k = mod.top_k
        srt = torch.sort(scores, dim=-1, descending=True).values
        self.min_router_margin = min(self.min_router_margin, float((srt[:, k - 1] - srt[:, k]).min()))


def run(model, ids, rec, chunks):
    """Feeds ids through the model in the given chunk sizes with one cache; returns logits [L, V]."""
    cache = None
    out = []
    pos = 0
    for c in chunks:
        rec.positions = list(range(pos, pos + c))
        r = model(input_ids=torch.tensor([ids[pos:pos + c]]), past_key_values=cache, use_cache=True)
        cache = r.past_key_values
        out.append(r.logits[0])
        pos += c
    return torch.cat(out, 0)


def greedy(model, prompt, n, rec):
    cache = None
    ids = list(prompt)
    margin = math.inf
    feed = list(prompt)
    pos = 0
    for _ in range(n):
        rec.positions = list(range(pos, pos + len(feed)))
        r = model(input_ids=torch.tensor([feed]), past_key_values=cache, use_cache=True)
        cache = r.past_key_values
        pos += len(feed)
        last = r.logits[0, -1]
        top = torch.topk(last, 2).values
        margin = min(margin, float(top[0] - top[1]))
        nxt = int(torch.argmax(last))
        ids.append(nxt)
        feed = [nxt]
    return ids, margin


def gen(spec, check_margins=True):
    for attempt in range(20):
        seed = spec["seed"] * 100 + attempt
        config, model = build(spec, seed)
        d64 = DeepseekV4ForCausalLM(config).eval()
        d64.load_state_dict(model.state_dict())
        d64 = d64.double()
        rec = Recorder(d64, config)
        g = torch.Generator().manual_seed(seed + 7)
        ids = torch.randint(2, config.vocab_size, (spec["length"],), generator=g).tolist()
        L = len(ids)
        assert sum(spec["chunks"]) == L, spec["name"]
        with torch.no_grad():
            full = run(d64, ids, rec, [L])
            inc = run(d64, ids, rec, [spec["prefill"]] + [1] * (L - spec["prefill"]))[spec["prefill"] - 1:]
            chk = run(d64, ids, rec, spec["chunks"])
            gids, gmargin = greedy(d64, ids[: spec["greedy_prompt"]], spec["greedy"], rec)
        d_inc = float((inc - full[spec["prefill"] - 1:]).abs().max())
        d_chk = float((chk - full).abs().max())
        ok = rec.min_index_margin > 1e-3 and rec.min_router_margin > 1e-3 and gmargin > 1e-3
        print(f"{spec['name']} seed {seed}: index margin {rec.min_index_margin:.3g} (ties {rec.index_ties}), "
              f"router margin {rec.min_router_margin:.3g}, greedy margin {gmargin:.3g}, "
              f"oracle self-diff inc {d_inc:.3g} chunked {d_chk:.3g}", file=sys.stderr)
        if not check_margins or ok:
            break
    else:
        raise SystemExit(f"{spec['name']}: no seed with safe margins")
    if check_margins:
        assert d_inc < 1e-9 and d_chk < 1e-9, (d_inc, d_chk)
    d = os.path.join(OUT, spec["name"])
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if "inv_freq" not in k}
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    golden = dict(
        name=spec["name"], seed=seed, tokens=ids, prefill=spec["prefill"], chunks=spec["chunks"],
        full=full.tolist(), incremental=inc.tolist(), chunked=chk.tolist(),
        greedy_prompt=ids[: spec["greedy_prompt"]], greedy=gids,
        min_index_margin=rec.min_index_margin if rec.min_index_margin != math.inf else None,
        index_ties=rec.index_ties,
        min_router_margin=rec.min_router_margin if rec.min_router_margin != math.inf else None,
        greedy_margin=gmargin, oracle_incremental_vs_full=d_inc, oracle_chunked_vs_full=d_chk,
        transformers=__import__("transformers").__version__, torch=torch.__version__,
    )
    with gzip.open(os.path.join(d, "golden.json.gz"), "wt") as f:
        json.dump(golden, f)


UPSTREAM_TO_HF = [
    (r"^embed\.weight$", "model.embed_tokens.weight"),
    (r"^head\.weight$", "lm_head.weight"),
    (r"^norm\.weight$", "model.norm.weight"),
    (r"^hc_head_(fn|base|scale)$", r"model.hc_head.hc_\1"),
    (r"^layers\.(\d+)\.attn_norm\.", r"model.layers.\1.input_layernorm."),
    (r"^layers\.(\d+)\.ffn_norm\.", r"model.layers.\1.post_attention_layernorm."),
    (r"^layers\.(\d+)\.hc_attn_(fn|base|scale)$", r"model.layers.\1.attn_hc.\2"),
    (r"^layers\.(\d+)\.hc_ffn_(fn|base|scale)$", r"model.layers.\1.ffn_hc.\2"),
    (r"^layers\.(\d+)\.attn\.attn_sink$", r"model.layers.\1.self_attn.sinks"),
    (r"^layers\.(\d+)\.attn\.q_norm\.", r"model.layers.\1.self_attn.q_a_norm."),
    (r"^layers\.(\d+)\.attn\.kv_norm\.", r"model.layers.\1.self_attn.kv_norm."),
    (r"^layers\.(\d+)\.attn\.w(q_a|q_b|o_a|o_b)\.", r"model.layers.\1.self_attn.\2_proj."),
    (r"^layers\.(\d+)\.attn\.wkv\.", r"model.layers.\1.self_attn.kv_proj."),
    (r"^layers\.(\d+)\.attn\.indexer\.compressor\.", r"model.layers.\1.self_attn.compressor.indexer.C."),
    (r"^layers\.(\d+)\.attn\.indexer\.wq_b\.", r"model.layers.\1.self_attn.compressor.indexer.q_b_proj."),
    (r"^layers\.(\d+)\.attn\.indexer\.weights_proj\.", r"model.layers.\1.self_attn.compressor.indexer.scorer.weights_proj."),
    (r"^layers\.(\d+)\.attn\.compressor\.", r"model.layers.\1.self_attn.compressor.C."),
    (r"\.C\.wkv\.", ".kv_proj."),
    (r"\.C\.wgate\.", ".gate_proj."),
    (r"\.C\.ape$", ".position_bias"),
    (r"\.C\.norm\.", ".kv_norm."),
    (r"^layers\.(\d+)\.ffn\.gate\.bias$", r"model.layers.\1.mlp.gate.e_score_correction_bias"),
    (r"^layers\.(\d+)\.ffn\.gate\.", r"model.layers.\1.mlp.gate."),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w1\.", r"model.layers.\1.mlp.shared_experts.gate_proj."),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w2\.", r"model.layers.\1.mlp.shared_experts.down_proj."),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w3\.", r"model.layers.\1.mlp.shared_experts.up_proj."),
]


def read_upstream(d):
    """Reads an upstream-named (possibly quantized) checkpoint into float32 HF-named tensors,
    dequantizing with the format definitions of tools/gen_checkpoints.py (DeepSeek's
    FP8 block / MXFP4, NVIDIA ModelOpt NVFP4)."""
    import re
    from safetensors import safe_open
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gen_checkpoints import deq_fp8_block, deq_mxfp4, deq_nvfp4

    raw = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(d, fn), "pt") as f:
                for k in f.keys():
                    raw[k] = f.get_tensor(k)
    dense = {}
    for k, w in raw.items():
        if k.endswith((".scale", ".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        base = k[: -len(".weight")] if k.endswith(".weight") else None
        if base and base + ".weight_scale" in raw:
            w = deq_nvfp4(w, raw[base + ".weight_scale"], raw[base + ".weight_scale_2"])
        elif base and base + ".scale" in raw and w.dtype in (torch.int8, torch.uint8):
            w = deq_mxfp4(w, raw[base + ".scale"])
        elif base and base + ".scale" in raw:
            w = deq_fp8_block(w, raw[base + ".scale"])
        elif w.is_floating_point():
            w = w.to(torch.float32)
        dense[k] = w
    out, experts = {}, {}
    for k, w in dense.items():
        m = re.match(r"^layers\.(\d+)\.ffn\.experts\.(\d+)\.w([123])\.weight$", k)
        if m:
            experts[(int(m.group(1)), int(m.group(2)), m.group(3))] = w
            continue
        n = k
        for pat, rep in UPSTREAM_TO_HF:
            n = re.sub(pat, rep, n)
        assert n.startswith(("model.", "lm_head")), (k, n)
        out[n] = w
    layers = sorted({l for l, _, _ in experts})
    for l in layers:
        E = 1 + max(e for ll, e, _ in experts if ll == l)
        out[f"model.layers.{l}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat([experts[(l, e, "1")], experts[(l, e, "3")]], 0) for e in range(E)])
        out[f"model.layers.{l}.mlp.experts.down_proj"] = torch.stack([experts[(l, e, "2")] for e in range(E)])
    return out


def gen_quant():
    """Quantized, upstream-named forms of quant-src: converted by the Go converter, then
    the float64 oracle on their dequantized weights (the quantization error is the gap
    between that and the quant-src oracle)."""
    import subprocess
    src = os.path.join(OUT, "quant-src")
    sg = json.load(gzip.open(os.path.join(src, "golden.json.gz"), "rt"))
    kw = dict(BASE)
    kw.update(QUANT_SRC["cfg"])
    config = DeepseekV4Config(**kw)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for name, fmt in QUANT_FORMS:
        d = os.path.join(OUT, name)
        subprocess.run(["go", "run", "./examples/convert", "-q", "-experts", fmt, src, d], cwd=root, check=True)
        sd = read_upstream(d)
        model = DeepseekV4ForCausalLM(config).eval()
        model.load_state_dict({k: v for k, v in sd.items()}, strict=True)
        model = model.double()
        rec = Recorder(model, config)
        ids = sg["tokens"]
        with torch.no_grad():
            full = run(model, ids, rec, [len(ids)])
        qerr = float((full - torch.tensor(sg["full"], dtype=torch.float64)).abs().max())
        print(f"{name}: quantization error (max |logit - quant-src|) {qerr:.3g}; index margin {rec.min_index_margin:.3g}, "
              f"router margin {rec.min_router_margin:.3g}", file=sys.stderr)
        assert rec.min_index_margin > 1e-3 and rec.min_router_margin > 1e-3, name
        import hashlib
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        sha = {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest() for f in files}
        with gzip.open(os.path.join(d, "golden.json.gz"), "wt") as f:
            json.dump(dict(name=name, source="quant-src", experts=fmt, tokens=ids, full=full.tolist(),
                           quant_error=qerr, safetensors_sha256=sha,
                           min_index_margin=rec.min_index_margin, min_router_margin=rec.min_router_margin), f)


def gen_rope():
    """inv_freq of the main and compress RoPE of the default (V4-Flash) config, as
    DeepseekV4RotaryEmbedding computes them (float32), for the Go rope test."""
    config = DeepseekV4Config(rope_parameters={"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                                               "beta_fast": 32, "beta_slow": 1})
    rot = mv4.DeepseekV4RotaryEmbedding(config)
    out = {"config": {"rope_parameters": config.rope_parameters, "head_dim": config.head_dim,
                      "partial_rotary_factor": config.partial_rotary_factor,
                      "max_position_embeddings": config.max_position_embeddings}}
    for t in ("main", "compress"):
        out[t] = getattr(rot, f"{t}_inv_freq").to(torch.float32).tolist()
        out[t + "_attention_scaling"] = getattr(rot, f"{t}_attention_scaling")
    with open(os.path.join(OUT, "rope_flash.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


def main():
    torch.set_num_threads(1)
    float64_oracle()
    names = sys.argv[1:]
    for spec in CONFIGS + [TIES]:
        if names and spec["name"] not in names:
            continue
        gen(spec, check_margins=spec is not TIES)
    if not names or "quant" in names:
        gen_quant()
    if not names or "rope" in names:
        gen_rope()


if __name__ == "__main__":
    main()
