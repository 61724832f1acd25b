#!/usr/bin/env python3
"""Trains the embedded dsv4-tiny checkpoint with transformers' DeepseekV4ForCausalLM.

Input: samples.jsonl from the Go renderer (tools/train_tiny/render): one assistant turn per
line, {"name", "prompt_ids", "completion_ids", ...}. The loss is the mean cross-entropy over
the completion tokens only (the prompt is masked), every sample in every step (full batch,
split into length buckets whose gradients are summed).

Output (--out DIR): config.json, generation_config.json, model.safetensors (HF parameter
names; BF16 matrices, F32 for the tensors transformers keeps in float32, I64 tid2eid),
greedy_golden.jsonl (per sample: prompt ids, expected completion ids, the greedy output of
the saved checkpoint in transformers at float32 and at bfloat16, top logits of the first
step) and train_log.json. Copy tokenizer.json / tokenizer_config.json next to them.

The run is seeded (--seed) and uses deterministic torch algorithms; it stops at --steps or
earlier, at the first evaluation where every completion token is the argmax of the
bf16-rounded model with a margin of at least --margin logits (a step-based rule, so a re-run
with the same seed stops at the same step up to GPU numerics).

Usage (GPU): python3 train.py --samples build/samples.jsonl --out OUTDIR
       (CPU smoke test): python3 train.py --samples ... --out /tmp/x --smoke
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F

from transformers import DeepseekV4Config, DeepseekV4ForCausalLM, GenerationConfig
from safetensors.torch import save_file

EOS = 1
VOCAB = 129280


def make_config():
    """The dsv4-tiny geometry. Every V4 block kind is present: sliding-window-only layers,
    CSA (compress 4 + lightning indexer, top-k smaller than the number of entries of long
    prompts), HCA (compress 16), hash-routed and top-k-routed MoE, mHC with 4 streams,
    YaRN on the compressed layers as in V4-Flash. hidden_size 48 is set by the 40 MB
    budget: embed + lm_head = 2 x 129280 x 48 x 2 bytes (bf16) = 24.8 MB."""
    return DeepseekV4Config(
        vocab_size=VOCAB,
        hidden_size=48,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=1,
        head_dim=64,
        partial_rotary_factor=0.5,  # rope on the last 32 channels of each head
        q_lora_rank=64,
        o_groups=2,
        o_lora_rank=64,
        sliding_window=64,
        layer_types=[
            "sliding_attention",
            "sliding_attention",
            "compressed_sparse_attention",
            "heavily_compressed_attention",
            "compressed_sparse_attention",
            "heavily_compressed_attention",
        ],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        mlp_layer_types=["hash_moe", "moe", "moe", "moe", "moe", "moe"],
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_shared_experts=1,
        moe_intermediate_size=96,
        index_n_heads=16,
        index_head_dim=64,
        index_topk=16,
        hc_mult=4,
        hc_sinkhorn_iters=20,
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        rope_parameters={
            "rope_type": "yarn",
            "factor": 16.0,
            "original_max_position_embeddings": 65536,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
        tie_word_embeddings=False,
        num_nextn_predict_layers=0,
        bos_token_id=0,
        eos_token_id=EOS,
        dtype="bfloat16",
    )


def hash_table(vocab, n_experts, k):
    """Frozen token -> experts table of the hash_moe layers: k distinct experts per token,
    expert j of token t = (t + j*(1 + (t // n) % (n-1))) mod n  (n = n_experts), so
    neighbouring ids spread over all experts. Deterministic; stored in the checkpoint."""
    t = torch.arange(vocab, dtype=torch.long)
    step = 1 + (t // n_experts) % (n_experts - 1)
    cols = [(t + j * step) % n_experts for j in range(k)]
    tab = torch.stack(cols, dim=1)
    if k <= 2:
        assert bool((tab[:, 0] != tab[:, -1]).all())
    return tab


# Tensors transformers keeps in float32 (its _keep_in_fp32_modules_strict): stored as F32.
F32_KEYS = ("_hc.", "hc_head.", "sinks", "position_bias", "e_score_correction_bias", "norm.weight", "q_a_norm")


def storage_dtype(name, t):
    if t.dtype in (torch.int64, torch.int32):
        return t.dtype
    if any(s in name for s in F32_KEYS) or t.dim() == 1:
        return torch.float32
    return torch.bfloat16


def export_state(model):
    out = {}
    for k, v in model.state_dict().items():
        out[k] = v.detach().to("cpu", storage_dtype(k, v)).contiguous()
    return out


def load_samples(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def make_buckets(samples, max_tokens):
    order = sorted(range(len(samples)), key=lambda i: len(samples[i]["prompt_ids"]) + len(samples[i]["completion_ids"]))
    buckets, cur = [], []
    for i in order:
        L = len(samples[i]["prompt_ids"]) + len(samples[i]["completion_ids"])
        if cur and (len(cur) + 1) * L > max_tokens:
            buckets.append(cur)
            cur = []
        cur.append(i)
    if cur:
        buckets.append(cur)
    out = []
    for b in buckets:
        seqs = [samples[i]["prompt_ids"] + samples[i]["completion_ids"] for i in b]
        L = max(len(s) for s in seqs)
        ids = torch.full((len(b), L), EOS, dtype=torch.long)
        labels = torch.full((len(b), L), -100, dtype=torch.long)
        for r, i in enumerate(b):
            s = seqs[r]
            ids[r, : len(s)] = torch.tensor(s)
            p = len(samples[i]["prompt_ids"])
            # position t predicts token t+1: completion token j sits at p+j, predicted at p+j-1
            labels[r, p - 1 : len(s) - 1] = torch.tensor(s[p:])
        out.append((ids, labels))
    return out


def bucket_loss(model, ids, labels):
    hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
    sel = labels != -100
    logits = model.lm_head(hidden[sel]).float()
    tgt = labels[sel]
    loss_sum = F.cross_entropy(logits, tgt, reduction="sum")
    with torch.no_grad():
        top2 = logits.topk(2, dim=-1)
        correct = top2.indices[:, 0] == tgt
        tl = logits.gather(1, tgt[:, None])[:, 0]
        other = torch.where(correct, top2.values[:, 1], top2.values[:, 0])
        margin = tl - other
    return loss_sum, correct, margin


@torch.no_grad()
def evaluate(model, buckets, device):
    tot, n, ok, mmin = 0.0, 0, 0, float("inf")
    for ids, labels in buckets:
        ls, c, m = bucket_loss(model, ids.to(device), labels.to(device))
        tot += ls.item()
        n += c.numel()
        ok += int(c.sum())
        mmin = min(mmin, m.min().item())
    return tot / n, ok, n, mmin


def round_bf16_(model):
    """Rounds in place every tensor that is stored as bf16; returns the originals."""
    saved = {}
    for k, p in model.named_parameters():
        if storage_dtype(k, p) == torch.bfloat16:
            saved[k] = p.detach().clone()
            p.data.copy_(p.data.to(torch.bfloat16).to(p.dtype))
    return saved


def restore_(model, saved):
    for k, p in model.named_parameters():
        if k in saved:
            p.data.copy_(saved[k])


@torch.no_grad()
def greedy(model, prompt, max_new, device):
    out = model.generate(
        torch.tensor([prompt], device=device),
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long, device=device),
        max_new_tokens=max_new,
        do_sample=False,
        eos_token_id=EOS,
        pad_token_id=EOS,
        return_dict_in_generate=True,
        output_logits=True,
    )
    ids = out.sequences[0, len(prompt):].tolist()
    first = out.logits[0][0].float()
    top = first.topk(8)
    return ids, [[int(i), float(v)] for i, v in zip(top.indices.tolist(), top.values.tolist())]


def verify(outdir, samples, device, log, deadline=float("inf"), dtypes=("f32", "bf16")):
    """Reloads the saved checkpoint with from_pretrained and greedy-decodes every prompt,
    in float32 and then (if time.time() leaves room before deadline) in bfloat16."""
    res = {}
    golden = [dict(name=s["name"], prompt_ids=s["prompt_ids"], completion_ids=s["completion_ids"]) for s in samples]
    last = 0.0
    for tag, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        if tag not in dtypes:
            continue
        if time.time() + 1.3 * last > deadline:
            log(f"verify {tag}: skipped (time)")
            break
        m = DeepseekV4ForCausalLM.from_pretrained(outdir, dtype=dt).to(device).eval()
        ok = 0
        t0 = time.time()
        for g, s in zip(golden, samples):
            # transformers keeps norms and mHC in float32 even in a bf16 model, so bf16 runs
            # need autocast for the float32 activations to meet the bf16 linear weights.
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=dt == torch.bfloat16):
                ids, top = greedy(m, s["prompt_ids"], len(s["completion_ids"]) + 8, device)
            g["greedy_" + tag] = ids
            g["match_" + tag] = ids == s["completion_ids"]
            if tag == "f32":
                g["first_top_logits_f32"] = top
            ok += g["match_" + tag]
            n_done = sum(1 for x in golden if "match_" + tag in x)
            if n_done % 10 == 0:
                log(f"  {tag}: {n_done}/{len(samples)} done, {ok} match, {time.time() - t0:.0f} s")
        last = time.time() - t0
        res[tag] = {"match": ok, "total": len(samples), "seconds": round(last, 1)}
        log(f"verify {tag}: greedy matches {ok}/{len(samples)} in {res[tag]['seconds']} s")
        for g in golden:
            if not g["match_" + tag]:
                log(f"  mismatch {tag} {g['name']}: want {g['completion_ids'][:12]}.. got {g['greedy_' + tag][:12]}..")
        del m
    return res, golden


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--min-steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--margin", type=float, default=3.0)
    ap.add_argument("--bucket-tokens", type=int, default=24000)
    ap.add_argument("--time-budget", type=float, default=250.0, help="seconds of training at most (safety)")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds after start by which verification ends")
    ap.add_argument("--smoke", action="store_true", help="CPU: 2 steps on 6 samples, then save + verify 2")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N samples (experiments)")
    ap.add_argument("--init", default="", help="start from this checkpoint directory (fine-tuning stage)")
    ap.add_argument("--verify-dtypes", default="f32,bf16", help="dtypes of the greedy verification")
    ap.add_argument("--verify-only", action="store_true", help="no training: greedy-verify the checkpoint in --out")
    args = ap.parse_args()

    t_start = time.time()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "train_log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    samples = load_samples(args.samples)
    if args.verify_only:
        res, golden = verify(args.out, samples, device, log, float("inf"), args.verify_dtypes.split(","))
        with open(os.path.join(args.out, "greedy_golden.jsonl"), "w", encoding="utf-8") as f:
            for g in golden:
                f.write(json.dumps(g) + "\n")
        return
    if args.limit:
        samples = samples[: args.limit]
    if args.smoke:
        samples = samples[:3] + samples[-3:]
        args.steps, args.min_steps, args.eval_every = 2, 0, 1
    cfg = make_config()
    if args.init:
        model = DeepseekV4ForCausalLM.from_pretrained(args.init, dtype=torch.float32)
        cfg = model.config
    else:
        model = DeepseekV4ForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    if not args.init:
        with torch.no_grad():
            for i, layer in enumerate(model.model.layers):
                g = layer.mlp.gate
                if cfg.mlp_layer_types[i] == "hash_moe":
                    g.tid2eid.copy_(hash_table(cfg.vocab_size, cfg.n_routed_experts, cfg.num_experts_per_tok))
                else:
                    # small fixed selection bias, so engines exercise the bias-only-for-selection rule
                    n = cfg.n_routed_experts
                    g.e_score_correction_bias.copy_(torch.linspace(-0.05, 0.05, n) * (1 if i % 2 else -1))
    model.to(device).train()
    buckets = make_buckets(samples, args.bucket_tokens)
    n_tgt = sum(len(s["completion_ids"]) for s in samples)
    log(f"device {device}, params {n_params} ({n_params - 2 * cfg.vocab_size * cfg.hidden_size} without embed/head), "
        f"{len(samples)} samples, {n_tgt} target tokens, buckets {[tuple(b[0].shape) for b in buckets]}")

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        prog = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, prog))))

    t0 = time.time()
    history = []
    stop_reason = "steps"
    step = 0
    for step in range(args.steps):
        for gp in opt.param_groups:
            gp["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        tot = 0.0
        for ids, labels in buckets:
            ls, _, _ = bucket_loss(model, ids.to(device), labels.to(device))
            (ls / n_tgt).backward()
            tot += ls.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = step + 1
        if done % args.eval_every == 0 or done == args.steps:
            model.eval()
            saved = round_bf16_(model)
            el, ok, n, mmin = evaluate(model, buckets, device)
            restore_(model, saved)
            model.train()
            rec = {"step": done, "train_loss": tot / n_tgt, "bf16_loss": el, "bf16_argmax_ok": ok, "n": n,
                   "bf16_min_margin": mmin, "lr": lr_at(step), "seconds": round(time.time() - t0, 1)}
            history.append(rec)
            log(json.dumps(rec))
            if ok == n and mmin >= args.margin and done >= args.min_steps:
                stop_reason = "converged"
                break
        if time.time() - t0 > args.time_budget:
            stop_reason = "time budget"
            log(f"time budget reached at step {done}")
            break
    train_s = time.time() - t0
    log(f"stopped at step {done} ({stop_reason}) after {train_s:.1f} s")

    model.eval()
    state = export_state(model)
    save_file(state, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(args.out)
    GenerationConfig(bos_token_id=0, eos_token_id=EOS, do_sample=False, max_new_tokens=256).save_pretrained(args.out)
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    log(f"model.safetensors: {size} bytes")

    result = {"init": args.init, "lr": args.lr, "steps": done, "stop_reason": stop_reason, "train_seconds": round(train_s, 1), "seed": args.seed,
              "params": n_params, "samples": len(samples), "target_tokens": n_tgt, "history": history,
              "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
              "torch": torch.__version__}
    if not args.no_verify:
        vs = samples[:2] if args.smoke else samples
        res, golden = verify(args.out, vs, device, log, t_start + args.deadline, args.verify_dtypes.split(","))
        result["verify"] = res
        with open(os.path.join(args.out, "greedy_golden.jsonl"), "w", encoding="utf-8") as f:
            for g in golden:
                f.write(json.dumps(g) + "\n")
    import transformers
    result["transformers"] = transformers.__version__
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
