#!/usr/bin/env python3
"""Single-thread encode throughput of HF `tokenizers` (Rust, called from Python) on the
tokenizer golden corpus, for comparison with `go test ./tokenizer -bench Encode`.

Same texts as the Go benchmarks (tokenizer/testdata/corpus.jsonl.gz, DeepSeek-V4
vocabulary), warm cache, best of --repeat passes:

  corpus    Tokenizer.encode(text, add_special_tokens=False) for each string in turn
            (the per-call Python overhead is included: that is how HF is called);
  batch     Tokenizer.encode_batch(texts) with TOKENIZERS_PARALLELISM=false and
            RAYON_NUM_THREADS=1 (one thread, no per-string Python call);
  document  the strings joined by "\\n" as one text.

Prints MB/s (10^6 bytes of UTF-8 input per second) and tokens/s, both per second of
wall time (best pass) and per second of process CPU time (best pass; the development
machine is shared, so CPU time is the steadier measure). Run from the
repository root:  tools/.venv/bin/python tools/bench_tokenizer.py
"""

import argparse
import gzip
import json
import os
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import tokenizers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TD = os.path.join(ROOT, "tokenizer", "testdata")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--vocab", default="deepseek-v4")
    args = ap.parse_args()
    with gzip.open(os.path.join(TD, args.vocab, "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        tok = tokenizers.Tokenizer.from_str(f.read())
    with gzip.open(os.path.join(TD, "corpus.jsonl.gz"), "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    doc = "\n".join(texts)
    dbytes = len(doc.encode("utf-8"))

    def corpus():
        n = 0
        for t in texts:
            n += len(tok.encode(t, add_special_tokens=False).ids)
        return n

    def batch():
        return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))

    def document():
        return len(tok.encode(doc, add_special_tokens=False).ids)

    print(f"tokenizers {tokenizers.__version__}, {len(texts)} strings, {nbytes} bytes")
    for name, fn, size in (("corpus", corpus, nbytes), ("batch", batch, nbytes), ("document", document, dbytes)):
        fn()  # warm the BPE cache
        best = cpu = None
        ntok = 0
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            ntok = fn()
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            best = dt if best is None else min(best, dt)
            cpu = dc if cpu is None else min(cpu, dc)
        print(f"{name:9s} wall {size / best / 1e6:7.2f} MB/s {ntok / best:10.0f} tokens/s | "
              f"cpu {size / cpu / 1e6:7.2f} MB/s {ntok / cpu:10.0f} tokens/s  ({best * 1e3:.1f} ms/pass)")


if __name__ == "__main__":
    main()
