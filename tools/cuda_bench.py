#!/usr/bin/env python3
"""Torch comparator for kernels/cuda/cmd/cudabench (run on the same GPU in the same call).

For each DeepSeek-V4-Flash shape and M it times, on the GPU:
  * torch bf16 matmul x[M,K] @ W[N,K]^T on pre-dequantized bf16 weights (what a framework
    without a W4A16 kernel does), float32 output like ours is not used: torch returns bf16;
  * torch's FP8 path where the shape allows (torch._scaled_mm, e4m3 weights and activations,
    per-tensor scales: W8A8, not weight-only);
  * any FP4 path torch offers (torch._scaled_mm with float4_e2m1fn_x2): tried and reported.
It also measures the device-to-device copy bandwidth and the dense bf16 GEMM rate
(8192^3) as the ceilings. Method as in cudabench: a CUDA graph of R calls rotating over
weight copies spanning >= 240 MB (4x L2), median of 5 replays, random inputs.
Prints a markdown table. Usage: python3 tools/cuda_bench.py [--m 1,4,16,64,256,2048]
"""
import argparse
import statistics

import torch

SHAPES = [
    ("expert w1/w3", 2048, 4096),
    ("expert w2", 4096, 2048),
    ("attn wq_b", 32768, 1024),
    ("attn wo_b", 4096, 8192),
    ("attn wkv", 512, 4096),
]


def graph_time(fn, reps):
    """Median seconds per call of fn(i) captured reps times into one CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(reps):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3 / reps)
    del g
    return statistics.median(ts)


def copy_bw():
    n = 1 << 30
    a = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(2):
        b.copy_(a)
    torch.cuda.synchronize()
    ts = []
    for _ in range(3):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            b.copy_(a)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3 / 10)
    return 2 * n / statistics.median(ts)


def dense_rate():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    ts = []
    for _ in range(3):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            a @ b
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3 / 10)
    return 2 * n**3 / statistics.median(ts)


def try_fp4():
    """Returns a description of torch's FP4 matmul support on this device."""
    if not hasattr(torch, "float4_e2m1fn_x2"):
        return "no float4 dtype in this torch"
    try:
        m, n, k = 128, 128, 128
        a = torch.randint(0, 255, (m, k // 2), dtype=torch.uint8, device="cuda").view(torch.float4_e2m1fn_x2)
        b = torch.randint(0, 255, (n, k // 2), dtype=torch.uint8, device="cuda").view(torch.float4_e2m1fn_x2)
        sa = torch.ones(m, k // 16, device="cuda", dtype=torch.float8_e4m3fn)
        sb = torch.ones(n, k // 16, device="cuda", dtype=torch.float8_e4m3fn)
        torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        return "torch._scaled_mm FP4 ran"
    except Exception as e:  # noqa: BLE001 - we report whatever torch says
        return "not available: " + str(e).splitlines()[0][:160]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="1,4,16,64,256,2048")
    args = ap.parse_args()
    ms = [int(x) for x in args.m.split(",")]
    torch.manual_seed(0)
    dev = torch.cuda.get_device_name()
    cbw = copy_bw()
    rate = dense_rate()
    print(f"torch {torch.__version__} on {dev}")
    print(f"torch device-to-device copy: {cbw/1e9:.0f} GB/s; dense bf16 8192^3 matmul: {rate/1e12:.0f} TFLOP/s")
    print(f"torch FP4 on this device: {try_fp4()}")
    print()
    print("| weight | N x K | torch path | M | time (us) | GB/s | TFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for name, n, k in SHAPES:
        wbytes = n * k * 2
        copies = max(1, min(64, -(-240_000_000 // wbytes)))
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        w8 = [w.to(torch.float8_e4m3fn) for w in ws[: max(1, min(64, -(-240_000_000 // (n * k))))]]
        for m in ms:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            flops = 2 * m * n * k
            est = max((wbytes + 2 * m * k) / 3e12, flops / 5e14) + 3e-6
            reps = max(copies, min(4000, int(3e-3 / est)))
            reps = -(-reps // copies) * copies
            t = graph_time(lambda i: torch.matmul(x, ws[i % copies].t()), reps)
            byts = wbytes + 2 * m * k + 2 * m * n
            print(f"| {name} | {n}x{k} | bf16 matmul (pre-dequantized) | {m} | {t*1e6:.2f} | {byts/t/1e9:.0f} | {flops/t/1e12:.2f} |")
            # FP8 W8A8 per-tensor: _scaled_mm needs M a multiple of 16
            mp = -(-m // 16) * 16
            x8 = torch.randn(mp, k, device="cuda", dtype=torch.bfloat16).to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda")
            try:
                c8 = len(w8)
                reps8 = -(-reps // c8) * c8
                t8 = graph_time(lambda i: torch._scaled_mm(x8, w8[i % c8].t(), one, one, out_dtype=torch.bfloat16), reps8)
                b8 = n * k + mp * k + 2 * mp * n
                print(f"| {name} | {n}x{k} | fp8 _scaled_mm W8A8 (M padded to {mp}) | {m} | {t8*1e6:.2f} | {b8/t8/1e9:.0f} | {flops/t8/1e12:.2f} |")
            except Exception as e:  # noqa: BLE001
                print(f"| {name} | {n}x{k} | fp8 _scaled_mm | {m} | n/a: {str(e).splitlines()[0][:80]} | | |")
        del ws, w8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
