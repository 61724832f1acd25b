#!/usr/bin/env python3
"""Benchmark input for the Go parse package, and the peer figure it is compared with.

Renders one long DeepSeek-V4 thinking-mode completion with DeepSeek's reference
encoder (about 64 KB: mixed English/Chinese reasoning, an answer, three tool
calls, one with a long code string), writes it to parse/testdata/bench_v4.txt.gz,
and times DeepSeek's reference whole-text parser (parse_message_from_completion_text,
CPython) on it, printing MB/s -- the peer number for BENCHMARKS.md "## Parsers".

Run: python3 tools/bench_parse.py --v4-encoder /path/to/encoding_dsv4.py
"""
import argparse
import gzip
import importlib.util
import json
import os
import random
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "parse", "testdata", "bench_v4.txt.gz")

WORDS = ["the", "user", "asks", "about", "weather", "so", "I", "should", "check", "北京", "天气", "预报", "—",
         "maybe", "call", "get_weather", "first", "then", "answer", "carefully.", "数据", "结果", "<", "x < y", "ok"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--v4-encoder", required=True)
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("encoding_dsv4", args.v4_encoder)
    enc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(enc)
    rng = random.Random(7)
    reasoning = " ".join(rng.choice(WORDS) for _ in range(8000))
    content = " ".join(rng.choice(WORDS) for _ in range(300))
    code = "\n".join(f"func f{i}(x int) int {{ return x*{i} + len(\"{rng.choice(WORDS)}\") }}" for i in range(250))
    calls = [
        {"type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"location": "北京", "days": 3, "detail": True})}},
        {"type": "function", "function": {"name": "search", "arguments": json.dumps({"query": "DeepSeek V4", "filters": {"lang": ["en", "zh"], "recent": True}}, ensure_ascii=False)}},
        {"type": "function", "function": {"name": "write_file", "arguments": json.dumps({"path": "/tmp/f.go", "content": code})}},
    ]
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "reasoning_content": reasoning, "content": content, "tool_calls": calls}]
    prompt = enc.encode_messages(msgs, thinking_mode="thinking")
    gen = "<｜Assistant｜><think>"
    text = prompt[prompt.rindex(gen) + len(gen):]
    with gzip.GzipFile(OUT, "wb", mtime=0) as f:
        f.write(text.encode())
    size = len(text.encode())
    n = 200
    t = timeit.timeit(lambda: enc.parse_message_from_completion_text(text, thinking_mode="thinking"), number=n)
    print(f"wrote {OUT}: {size} bytes")
    print(f"reference parse_message_from_completion_text (CPython): {size * n / t / 1e6:.1f} MB/s, {t / n * 1e6:.1f} us/parse")


if __name__ == "__main__":
    main()
