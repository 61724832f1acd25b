#!/usr/bin/env python3
"""Golden results of DeepSeek's own V4 output parser, for the Go parse package.

Builds random assistant turns (reasoning with unicode, content, parallel tool
calls whose arguments mix strings, numbers, booleans, null, arrays and nested
objects, zero-parameter calls), renders each with DeepSeek's reference encoder
(encoding_dsv4.encode_messages), cuts the completion the model would have
written (everything after the generation prompt "<｜Assistant｜><think>" or
"<｜Assistant｜></think>"), parses it back with the reference
parse_message_from_completion_text, and writes text + expected message to
parse/testdata/official_v4.json.gz. parse/official_test.go compares the Go
parser with these goldens; CI needs no Python.

Run (one command; stdlib only):
  python3 tools/gen_parse_goldens.py --v4-encoder /path/to/encoding_dsv4.py

The V4 encoder is DeepSeek's encoding/encoding_dsv4.py (HF
deepseek-ai/DeepSeek-V4-Flash; a public copy is in github.com/supermy/ds4rs
encoding/).
"""
import argparse
import gzip
import importlib.util
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "parse", "testdata", "official_v4.json.gz")

WORDS = ["The", "user", "wants", "weather", "in", "北京", "天气", "🚀", "café", "naïve", "—", "<b>", "x < y",
         "&amp;", "\"quoted\"", "back\\slash", "tab\there", "line\nbreak", "```", "{", "}", "[1]", "ok", "42", "Ünïcödé"]


def text(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def value(rng, depth=0):
    k = rng.randint(0, 9)
    if k <= 3:
        return text(rng, 1, 6)
    if k == 4:
        return rng.randint(-1000, 100000)
    if k == 5:
        return rng.choice([3.14, -0.5, 1e-07, 2.5e+20, 0.1])
    if k == 6:
        return rng.choice([True, False, None])
    if k == 7 and depth < 2:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if k == 8 and depth < 2:
        return {f"k{i}": value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    return text(rng, 1, 3)


def tool_call(rng, i):
    args = {}
    for j in range(rng.choice([0, 1, 2, 3, 5])):
        args[rng.choice(["location", "query", "days", "filters", "path", "content", "ratio", "tags", "meta", "flag"]) + str(j)] = value(rng)
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": rng.choice(["get_weather", "search", "write_file", "get_time"]),
                         "arguments": json.dumps(args, ensure_ascii=False)}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--v4-encoder", required=True, help="path of a downloaded encoding_dsv4.py")
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--seed", type=int, default=20260429)
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("encoding_dsv4", args.v4_encoder)
    enc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(enc)

    rng = random.Random(args.seed)
    rows = []
    for n in range(args.n):
        mode = "thinking" if n % 4 != 3 else "chat"
        msg = {"role": "assistant", "content": ""}
        if rng.random() < 0.8:
            msg["content"] = text(rng, 0, 12)
        if mode == "thinking":
            msg["reasoning_content"] = text(rng, 0, 20)
        if rng.random() < 0.6:
            msg["tool_calls"] = [tool_call(rng, i) for i in range(rng.randint(1, 3))]
        messages = [{"role": "user", "content": "question " + str(n)}, msg]
        prompt = enc.encode_messages(messages, thinking_mode=mode)
        gen = "<｜Assistant｜>" + ("<think>" if mode == "thinking" else "</think>")
        completion = prompt[prompt.rindex(gen) + len(gen):]
        parsed = enc.parse_message_from_completion_text(completion, thinking_mode=mode)
        rows.append({
            "mode": mode,
            "text": completion,
            "reasoning_content": parsed["reasoning_content"],
            "content": parsed["content"],
            "tool_calls": [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                           for c in parsed["tool_calls"]],
        })
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as f:
        f.write(json.dumps(rows, ensure_ascii=False, indent=0).encode())
    print(f"wrote {len(rows)} cases to {OUT}")


if __name__ == "__main__":
    main()
