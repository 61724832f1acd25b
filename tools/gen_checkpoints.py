"""Generate the tiny DeepSeek-V4 test checkpoints under dsv4/testdata/.

Re-run with one command from the repository root:

    tools/.venv/bin/python tools/gen_checkpoints.py

It writes (deterministically, seed 0, transformers' DeepseekV4ForCausalLM):
  dsv4/testdata/ckpt_hf_bf16/      HF naming, BF16 (fp32 mHC/sinks/biases), one file
  dsv4/testdata/ckpt_hf_sharded/   the same weights in 3 shards + model.safetensors.index.json
  dsv4/testdata/ckpt_hf_saved/     a smaller model written by transformers' save_pretrained
  dsv4/testdata/ckpt_hf_bf16/reference.json
      input ids and transformers' float32 logits of the last position, so
      Go tests can check that the checkpoint is the model it claims to be.
With --numfmt it writes internal/numfmt/testdata/goldens.json: torch's
float32 -> bfloat16 casts (round-to-nearest-even, NaN kept) of special,
tie and random bit patterns, the float32 value of all 256 float8_e4m3fn
codes, and torch's float32 -> float8_e4m3fn casts of in-range values.
With --configs it writes dsv4/testdata/ckpt_configs/hf_normalized.json:
transformers' DeepseekV4Config normalisation (layer_types, mlp_layer_types,
compress_rates, rope_parameters) of legacy and modern config dicts.
With --goldens it instead reads the Go-converted checkpoints
(dsv4/testdata/ckpt_fp8_mxfp4, ckpt_nvfp4; made by `go test ./dsv4/convert
-update`) and writes dequant_goldens.json into each: for every
quantized tensor, the SHA-256 of its float32 dequantization computed here in
torch from the format definitions (DeepSeek inference/convert.py for FP8 and
MXFP4, NVIDIA ModelOpt for NVFP4), which Go must match bit for bit; for
ckpt_nvfp4 also the bytes that NVIDIA ModelOpt's own NVFP4QTensor.quantize
(nvidia-modelopt 0.47.0) makes of every routed expert of the BF16 source.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_models import make_tiny, save_hf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TESTDATA = os.path.join(ROOT, "dsv4", "testdata")

FP4_TABLE = torch.tensor(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
    dtype=torch.float32,
)


def gen_checkpoints() -> None:
    model = make_tiny(seed=0)
    save_hf(model, os.path.join(TESTDATA, "ckpt_hf_bf16"), dtype=torch.bfloat16)
    save_hf(model, os.path.join(TESTDATA, "ckpt_hf_sharded"), dtype=torch.bfloat16, shards=3)
    # transformers' own writer (save_pretrained applies the reverse conversion
    # mapping: "model." prefix with DeepSeek leaf names, per-expert w1/w2/w3).
    small = make_tiny(seed=1, hidden_size=64, vocab_size=64)
    small.to(torch.bfloat16).save_pretrained(os.path.join(TESTDATA, "ckpt_hf_saved"))
    # Reference logits of the BF16 checkpoint as transformers loads it (float32 compute).
    from transformers import DeepseekV4ForCausalLM

    m = DeepseekV4ForCausalLM.from_pretrained(os.path.join(TESTDATA, "ckpt_hf_bf16"), dtype=torch.float32).eval()
    ids = [0, 5, 17, 33, 2, 99, 64, 7, 11, 3, 120, 45, 8, 9, 10, 77, 31, 4, 6, 100]
    with torch.no_grad():
        logits = m(torch.tensor([ids])).logits[0, -1].tolist()
    with open(os.path.join(TESTDATA, "ckpt_hf_bf16", "reference.json"), "w") as f:
        json.dump({"input_ids": ids, "last_logits": logits, "transformers": __import__("transformers").__version__}, f)
        f.write("\n")


def e8m0(t: torch.Tensor) -> torch.Tensor:
    """UE8M0 bytes -> float32 2^(b-127); 255 -> NaN."""
    b = t.view(torch.uint8).to(torch.int32)
    out = torch.pow(torch.tensor(2.0, dtype=torch.float64), (b - 127).to(torch.float64)).to(torch.float32)
    return torch.where(b == 255, torch.tensor(float("nan")), out)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """[R, C/2] bytes -> [R, C] float32; low nibble = even column."""
    b = packed.view(torch.uint8).to(torch.int64)
    lo, hi = b & 0xF, b >> 4
    return torch.stack([FP4_TABLE[lo], FP4_TABLE[hi]], dim=-1).reshape(b.shape[0], -1)


def deq_fp8_block(w: torch.Tensor, s: torch.Tensor, block=128) -> torch.Tensor:
    wf = w.view(torch.float8_e4m3fn).to(torch.float32)
    sf = e8m0(s) if s.dtype in (torch.uint8, torch.float8_e8m0fnu) else s.to(torch.float32)
    R, C = wf.shape
    full = sf.repeat_interleave(block, 0)[:R].repeat_interleave(block, 1)[:, :C]
    return wf * full


def deq_mxfp4(w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    v = unpack_fp4(w)
    return v * e8m0(s).repeat_interleave(32, 1)[:, : v.shape[1]]


def deq_nvfp4(w: torch.Tensor, s: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    v = unpack_fp4(w)
    block = s.view(torch.float8_e4m3fn).to(torch.float32) * g.to(torch.float32).reshape(())
    return v * block.repeat_interleave(16, 1)[:, : v.shape[1]]


def modelopt_nvfp4():
    """NVIDIA ModelOpt's NVFP4QTensor (nvidia-modelopt 0.47.0, installed with
    --no-deps by tools/setup.sh), loaded from its source files without the
    package's import-time dependencies: nvfp4_tensor.py's class and
    core_utils.py's reduce_amax / reduce_block_amax / reduce_block_padding,
    unchanged, with stubs for the base class and the CUDA probe."""
    import ast
    import importlib.util

    import torch.nn.functional as F

    spec = importlib.util.find_spec("modelopt")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("nvidia-modelopt is not installed (tools/setup.sh installs it)")
    root = os.path.join(list(spec.submodule_search_locations)[0], "torch", "quantization")
    env = {"torch": torch, "F": F, "E2M1_MAX": 6.0, "E4M3_MAX": 448.0, "fp4_compatible": lambda: False,
           "fp8_max_for_normalization": lambda q: 448.0,
           "_FP8_DTYPES": (torch.float8_e4m3fn, torch.float8_e5m2)}

    class BaseQuantizedTensor:
        def __init__(self, shape, dtype, data):
            self.metadata = {"shape": shape, "dtype": dtype}
            self._quantized_data = data

    env["BaseQuantizedTensor"] = BaseQuantizedTensor
    for path, names in ((os.path.join(root, "utils", "core_utils.py"), {"reduce_amax", "reduce_block_amax", "reduce_block_padding"}),
                        (os.path.join(root, "qtensor", "nvfp4_tensor.py"), None)):
        tree = ast.parse(open(path).read())
        keep = []
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if names is not None and not (isinstance(node, ast.FunctionDef) and node.name in names):
                continue
            keep.append(node)
        exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), env)
    return env["NVFP4QTensor"]


def modelopt_references() -> dict:
    """ModelOpt's NVFP4 quantization of every routed expert of the tiny HF model."""
    from safetensors import safe_open

    NVFP4QTensor = modelopt_nvfp4()
    src = {}
    with safe_open(os.path.join(TESTDATA, "ckpt_hf_bf16", "model.safetensors"), "pt") as f:
        for k in f.keys():
            src[k] = f.get_tensor(k)
    out = {}
    for k in sorted(src):
        if not (k.endswith("mlp.experts.gate_up_proj") or k.endswith("mlp.experts.down_proj")):
            continue
        layer = k.split(".")[2]
        t = src[k].float()
        for e in range(t.shape[0]):
            if k.endswith("gate_up_proj"):
                half = t.shape[1] // 2
                parts = {"w1": t[e, :half], "w3": t[e, half:]}
            else:
                parts = {"w2": t[e]}
            for w, m in parts.items():
                qt, scale, g = NVFP4QTensor.quantize(m.contiguous().clone(), 16)
                name = f"layers.{layer}.ffn.experts.{e}.{w}"
                out[name] = {
                    "weight_sha256": hashlib.sha256(qt._quantized_data.contiguous().numpy().tobytes()).hexdigest(),
                    "weight_scale_sha256": hashlib.sha256(scale.view(torch.uint8).contiguous().numpy().tobytes()).hexdigest(),
                    "weight_scale_2": float(g),
                }
    return out


def gen_goldens() -> None:
    from safetensors import safe_open

    for ck in ("ckpt_fp8_mxfp4", "ckpt_nvfp4"):
        d = os.path.join(TESTDATA, ck)
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        tensors = {}
        for fn in files:
            with safe_open(os.path.join(d, fn), "pt") as f:
                for k in f.keys():
                    tensors[k] = f.get_tensor(k)
        res = {}
        for name in sorted(tensors):
            if not name.endswith(".weight"):
                continue
            base = name[: -len(".weight")]
            w = tensors[name]
            if base + ".weight_scale" in tensors:
                deq = deq_nvfp4(w, tensors[base + ".weight_scale"], tensors[base + ".weight_scale_2"])
                form = "nvfp4"
            elif base + ".scale" in tensors and w.dtype in (torch.int8, torch.uint8):
                deq = deq_mxfp4(w, tensors[base + ".scale"])
                form = "mxfp4"
            elif base + ".scale" in tensors:
                deq = deq_fp8_block(w, tensors[base + ".scale"])
                form = "fp8-block"
            else:
                continue
            deq = deq.contiguous()
            res[name] = {
                "form": form,
                "shape": list(deq.shape),
                "sha256": hashlib.sha256(deq.numpy().tobytes()).hexdigest(),
                "first": [float(x) for x in deq.flatten()[:4].tolist()],
            }
        doc = {"torch": torch.__version__, "tensors": res}
        if ck == "ckpt_nvfp4":
            doc["modelopt"] = modelopt_references()
        with open(os.path.join(d, "dequant_goldens.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")


CONFIG_CASES = {
    "flash_legacy": dict(
        vocab_size=129280, hidden_size=4096, num_hidden_layers=43, num_attention_heads=64, head_dim=512,
        qk_rope_head_dim=64, q_lora_rank=1024, o_lora_rank=1024, o_groups=8, sliding_window=128,
        rope_theta=10000, compress_rope_theta=160000,
        rope_scaling={"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
        num_hash_layers=3, compress_ratios=[0, 0] + [4, 128] * 20 + [4, 0],
    ),
    "defaults_6": dict(num_hidden_layers=6),
    "explicit_types": dict(
        num_hidden_layers=3, hidden_size=64, head_dim=32, partial_rotary_factor=0.25, index_head_dim=16,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
        mlp_layer_types=["hash_moe", "moe", "moe"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
    ),
    "legacy_rates": dict(num_hidden_layers=4, compress_rate_csa=8, compress_rate_hca=64,
                         compress_ratios=[128, 4, 0, 4, 0], num_hash_layers=0, qk_rope_head_dim=32, head_dim=128,
                         index_head_dim=64),
    "nested_rope": dict(num_hidden_layers=2, rope_parameters={
        "main": {"rope_type": "default", "rope_theta": 5000.0, "partial_rotary_factor": 0.125},
        "compress": {"rope_type": "yarn", "rope_theta": 80000.0, "factor": 4, "original_max_position_embeddings": 1024,
                     "beta_fast": 16, "beta_slow": 2, "attention_factor": 1.0, "partial_rotary_factor": 0.125}}),
    "plain_compress": dict(num_hidden_layers=2, compress_ratios=[4, 128], num_hash_layers=5),
    "nested_no_attention_factor": dict(num_hidden_layers=2, rope_parameters={
        "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
        "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16, "original_max_position_embeddings": 65536,
                     "mscale": 1.0, "mscale_all_dim": 0.5, "partial_rotary_factor": 0.125}}),
    "nested_no_mscale": dict(num_hidden_layers=2, rope_parameters={
        "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
        "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16, "original_max_position_embeddings": 65536,
                     "partial_rotary_factor": 0.125}}),
    "yarn_defaults": dict(num_hidden_layers=2, max_position_embeddings=4096,
                          rope_scaling={"type": "yarn", "factor": 8, "beta_fast": 0}),
}


def gen_configs() -> None:
    """HF DeepseekV4Config's normalisation of several raw config dicts."""
    from transformers import DeepseekV4Config

    out = {}
    for name, raw in CONFIG_CASES.items():
        c = DeepseekV4Config(**raw)
        rp = c.rope_parameters
        comp = dict(rp["compress"])
        if comp.get("rope_type") == "yarn":
            # Effective values as modeling_rope_utils._compute_yarn_parameters reads them.
            comp["beta_fast"] = comp.get("beta_fast") or 32
            comp["beta_slow"] = comp.get("beta_slow") or 1
            if comp.get("factor") is None:
                comp["factor"] = c.max_position_embeddings / comp["original_max_position_embeddings"]
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            _, comp["attention_factor"] = ROPE_INIT_FUNCTIONS["yarn"](c, None, layer_type="compress")
        rp = {"main": rp["main"], "compress": comp}
        out[name] = {
            "input": raw,
            "layer_types": c.layer_types,
            "mlp_layer_types": c.mlp_layer_types,
            "compress_rates": c.compress_rates,
            "qk_rope_head_dim": c.qk_rope_head_dim,
            "partial_rotary_factor": c.partial_rotary_factor,
            "rope_main": {k: rp["main"].get(k) for k in ("rope_type", "rope_theta", "partial_rotary_factor")},
            "rope_compress": {k: rp["compress"].get(k) for k in ("rope_type", "rope_theta", "partial_rotary_factor", "factor",
                                                                 "original_max_position_embeddings", "beta_fast", "beta_slow",
                                                                 "attention_factor")},
        }
    d = os.path.join(TESTDATA, "ckpt_configs")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "hf_normalized.json"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__, "cases": out}, f, indent=1, sort_keys=True)
        f.write("\n")


def gen_numfmt() -> None:
    import random
    import struct

    rng = random.Random(0)
    bits = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FFFFFFF,
            0x00000001, 0x807FFFFF, 0x3F800000, 0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0xFF7F8000]
    for _ in range(300):  # exact ties: low 16 bits = 0x8000, both parities
        bits.append((rng.getrandbits(16) << 16) | 0x8000)
    for _ in range(300):  # near ties
        bits.append((rng.getrandbits(16) << 16) | rng.choice([0x7FFF, 0x8001, 0x0001, 0xFFFF]))
    for _ in range(2000):
        bits.append(rng.getrandbits(32))
    f = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    bf = f.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
    codes = torch.arange(256, dtype=torch.int64).to(torch.uint8).view(torch.float8_e4m3fn).to(torch.float32)
    e4m3_f32 = [struct.unpack("<I", struct.pack("<f", v))[0] for v in codes.tolist()]
    vals = [rng.uniform(-460, 460) for _ in range(1500)] + [rng.uniform(-0.03, 0.03) for _ in range(500)]
    vals += [m * 2.0**e for e in range(-10, 9) for m in (1.0625, 1.1875, 1.0, 1.5)]  # ties on the 3-bit grid
    vt = torch.tensor(vals, dtype=torch.float32)
    enc = vt.to(torch.float8_e4m3fn).view(torch.uint8).tolist()
    out = {
        "bf16": [[b, int(r)] for b, r in zip(bits, bf.tolist())],
        "e4m3_decode_f32_bits": e4m3_f32,
        "e4m3_encode": [[struct.unpack("<I", struct.pack("<f", v))[0], c] for v, c in zip(vt.tolist(), enc)],
        "torch": torch.__version__,
    }
    d = os.path.join(ROOT, "internal", "numfmt", "testdata")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "goldens.json"), "w") as fh:
        json.dump(out, fh)
        fh.write("\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--goldens", action="store_true", help="write dequant_goldens.json from the converted checkpoints")
    ap.add_argument("--numfmt", action="store_true", help="write internal/numfmt/testdata/goldens.json")
    ap.add_argument("--configs", action="store_true", help="write dsv4/testdata/ckpt_configs/hf_normalized.json")
    args = ap.parse_args()
    if args.numfmt:
        gen_numfmt()
    elif args.configs:
        gen_configs()
    elif args.goldens:
        gen_goldens()
    else:
        gen_checkpoints()
