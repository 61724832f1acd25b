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


def main():
    torch.set_num_threads(1)
    float64_oracle()
    names = sys.argv[1:]
    for spec in CONFIGS + [TIES]:
        if names and spec["name"] not in names:
            continue
        gen(spec, check_margins=spec is not TIES)


if __name__ == "__main__":
    main()
