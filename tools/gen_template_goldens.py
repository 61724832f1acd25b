#!/usr/bin/env python3
"""Generate golden prompts for the Go `template` package.

Writes into template/testdata/golden/ (gzipped JSON Lines, one case a line):

  v4_generated.jsonl.gz    random conversations rendered by DeepSeek's own V4 encoder
                           (encoding_dsv4.encode_messages), run from a downloaded copy
                           that is NOT part of this repository;
  v32_generated.jsonl.gz   the same for DeepSeek's V3.2 encoder (encoding_dsv32.py), when
                           --v32-encoder is given;
  jinja_v3.jsonl.gz        random conversations rendered by transformers
                           apply_chat_template with the DeepSeek-V3 chat template
                           (shared/data/deepseek-v3-tokenizer);
  jinja_real.jsonl.gz      the same for the real templates in template/testdata/jinja-real
                           (DeepSeek-V3.1's), with thinking / enable_thinking kwargs;
  jinja_extra.jsonl.gz     conversations rendered by transformers' Jinja environment
                           (render_jinja_template) with the probe templates in
                           template/testdata/jinja/*.jinja (tojson, dict order, string
                           methods, raise_exception, loops).

Usage (one command, re-runnable; output is deterministic for a given --seed):

  tools/.venv/bin/python tools/gen_template_goldens.py \
      --v4-encoder /path/to/encoding_dsv4.py \
      [--v32-encoder /path/to/encoding_dsv32.py] \
      --v3-tokenizer ../shared/data/deepseek-v3-tokenizer

The V4 encoder is DeepSeek's encoding/encoding_dsv4.py (HF deepseek-ai/DeepSeek-V4-Flash;
a public copy is in github.com/supermy/ds4rs encoding/). The V3.2 encoder is DeepSeek's
encoding/encoding_dsv32.py (HF deepseek-ai/DeepSeek-V3.2); vLLM vendors a copy
(vllm/tokenizers/deepseek_v32_encoding.py) whose TOOLS_SYSTEM_TEMPLATE lost the blank lines of
the original: restore them (the official test_output.txt shows them) before using it.
"""

import argparse
import copy
import gzip
import importlib.util
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "template", "testdata", "golden")
JINJA_DIR = os.path.join(ROOT, "template", "testdata", "jinja")
REAL_DIR = os.path.join(ROOT, "template", "testdata", "jinja-real")

WORDS = [
    "hello", "world", "weather", "Beijing", "Paris", "的", "天气", "怎么样", "今天", "北京",
    "naïve", "café", "Ünïcödé", "😀", "🚀", "𝔘𝔫𝔦", "<b>bold</b>", "a & b", "x < y > z",
    "quote\"d", "back\\slash", "tab\there", "new\nline", "emoji🙂mix", "עברית", "العربية",
    "日本語", "한국어", "ñ", "—", "…", "\u2028", "'single'", "{json}", "[list]", "</think>",
    "<think>", "$var", "%s", "{}", "100%", "3.14", "-0", "1e10", "null", "true",
]


def rtext(rng, lo=1, hi=12):
    n = rng.randint(lo, hi)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def rscalar(rng):
    k = rng.randrange(9)
    if k == 0:
        return rng.randint(-1000, 1000)
    if k == 1:
        return rng.choice([0.5, 1.0, -2.25, 1e-05, 1e16, 3.14159, 123456789.125, 1.5e300, 2.0 ** 70])
    if k == 2:
        return rng.choice([True, False])
    if k == 3:
        return None
    if k == 4:
        return rng.choice([2 ** 70, -(2 ** 65), 10 ** 20])
    return rtext(rng, 1, 4)


def rvalue(rng, depth=0):
    k = rng.randrange(10)
    if depth < 3 and k == 0:
        return [rvalue(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and k == 1:
        return {rng.choice(["a", "b", "zeta", "Alpha", "键", "k k", "x<y"]) + str(i): rvalue(rng, depth + 1)
                for i in range(rng.randint(0, 3))}
    return rscalar(rng)


TOOL_NAMES = ["get_weather", "search", "open", "find", "calc", "send_email", "查询", "run_code"]


def rtool(rng, name):
    props = {}
    for i in range(rng.randint(0, 4)):
        pname = rng.choice(["location", "query", "topn", "unit", "filters", "代码", "zeta", "alpha"]) + str(i)
        p = {"type": rng.choice(["string", "integer", "number", "boolean", "array", "object"])}
        if rng.random() < 0.6:
            p["description"] = rtext(rng, 1, 6)
        if rng.random() < 0.3:
            p["enum"] = [rtext(rng, 1, 1) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            p["default"] = rscalar(rng)
        props[pname] = p
    params = {"type": "object", "properties": props}
    if props and rng.random() < 0.7:
        params["required"] = list(props)[: rng.randint(1, len(props))]
    if rng.random() < 0.3:
        params["additionalProperties"] = False
    fn = {"name": name, "description": rtext(rng, 2, 10), "parameters": params}
    if rng.random() < 0.2:
        fn = {"parameters": params, "name": name}  # unusual key order
    return {"type": "function", "function": fn}


def rargs(rng):
    args = {}
    for i in range(rng.randint(0, 4)):
        args[rng.choice(["location", "query", "q", "unit", "filters", "参数", "n"]) + str(i)] = rvalue(rng)
    if rng.random() < 0.1:
        return json.dumps(args, ensure_ascii=True)
    if rng.random() < 0.2:
        return json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(args, ensure_ascii=False)


def gen_v4_conversation(rng, case):
    """A random conversation valid for encoding_dsv4, plus options."""
    msgs = []
    tools = None
    if rng.random() < 0.8:
        sys_msg = {"role": "system", "content": rtext(rng, 0, 15)}
        if rng.random() < 0.4:
            tools = [rtool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 3))]
            sys_msg["tools"] = tools
        if rng.random() < 0.15:
            sys_msg["response_format"] = {"type": "json_schema", "json_schema": {"name": "r", "schema": rvalue(rng)}}
        msgs.append(sys_msg)
    call_id = 0
    turns = rng.randint(1, 5)
    for t in range(turns):
        if rng.random() < 0.15:
            msgs.append({"role": "latest_reminder", "content": rtext(rng, 1, 5)})
        if rng.random() < 0.15:
            dev = {"role": "developer", "content": rtext(rng, 1, 8)}
            if rng.random() < 0.4:
                dev["tools"] = [rtool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 2))]
            if rng.random() < 0.2:
                dev["response_format"] = {"type": "json_object"}
            msgs.append(dev)
        else:
            u = {"role": "user", "content": rtext(rng, 0, 15)}
            if rng.random() < 0.07:
                u["task"] = rng.choice(["action", "query", "authority", "domain", "title", "read_url"])
            msgs.append(u)
            if rng.random() < 0.1:
                msgs.append({"role": "user", "content": rtext(rng, 1, 6)})
        last_turn = t == turns - 1
        if last_turn and rng.random() < 0.5:
            break  # end with a user turn: a generation prompt
        # assistant turn(s), possibly with tool calls and results
        for _ in range(rng.randint(0, 2) if rng.random() < 0.5 else 0):
            calls = []
            for _ in range(rng.randint(1, 4)):
                call_id += 1
                tc = {"id": "call_%d_%d" % (case, call_id), "type": "function",
                      "function": {"name": rng.choice(TOOL_NAMES), "arguments": rargs(rng)}}
                if rng.random() < 0.1:
                    del tc["id"]
                calls.append(tc)
            a = {"role": "assistant", "content": rtext(rng, 0, 5) if rng.random() < 0.3 else "", "tool_calls": calls}
            if rng.random() < 0.8:
                a["reasoning_content"] = rtext(rng, 1, 10)
            msgs.append(a)
            results = []
            for tc in calls:
                content = rtext(rng, 0, 10)
                if rng.random() < 0.2:
                    content = json.dumps(rvalue(rng), ensure_ascii=False)
                if rng.random() < 0.1:
                    content = [{"type": "text", "text": rtext(rng, 1, 4)}, {"type": rng.choice(["text", "image_url"]), "text": "x"}]
                r = {"role": "tool", "content": content}
                if "id" in tc:
                    r["tool_call_id"] = tc["id"]
                results.append(r)
            if rng.random() < 0.5:
                rng.shuffle(results)  # results out of order
            msgs.extend(results)
            if rng.random() < 0.2:
                msgs.append({"role": "user", "content": rtext(rng, 1, 5)})
        a = {"role": "assistant", "content": rtext(rng, 0, 15)}
        if rng.random() < 0.7:
            a["reasoning_content"] = rtext(rng, 0, 10)
        if last_turn and rng.random() < 0.2:
            a["wo_eos"] = True
        msgs.append(a)
    opts = {
        "thinking": rng.random() < 0.6,
        "reasoning_effort": rng.choice([None, None, "high", "max"]),
        "drop_thinking": rng.random() < 0.85,
    }
    return msgs, opts


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_jsonl_gz(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        for r in rows:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))
    print("wrote %s (%d cases)" % (os.path.relpath(path, ROOT), len(rows)))


def gen_v4(args):
    enc = load_module(args.v4_encoder, "encoding_dsv4")
    rng = random.Random(args.seed)
    rows = []
    i = 0
    while len(rows) < args.v4_cases:
        i += 1
        msgs, opts = gen_v4_conversation(rng, i)
        try:
            prompt = enc.encode_messages(
                copy.deepcopy(msgs),
                thinking_mode="thinking" if opts["thinking"] else "chat",
                drop_thinking=opts["drop_thinking"],
                reasoning_effort=opts["reasoning_effort"],
            )
        except Exception as e:  # the reference rejects it: skip, the Go tests cover errors
            print("skip case %d: %r" % (i, e), file=sys.stderr)
            continue
        rows.append({"name": "v4_%03d" % i, "messages": msgs, "options": opts, "prompt": prompt})
    # Incremental rendering: the first k messages are context (already in the KV cache).
    ctx_rows = []
    while len(ctx_rows) < args.v4_context_cases:
        i += 1
        msgs, opts = gen_v4_conversation(rng, i)
        if len(msgs) < 2:
            continue
        k = rng.randint(1, len(msgs) - 1)
        try:
            prompt = enc.encode_messages(
                copy.deepcopy(msgs[k:]),
                thinking_mode="thinking" if opts["thinking"] else "chat",
                context=copy.deepcopy(msgs[:k]),
                drop_thinking=opts["drop_thinking"],
                reasoning_effort=opts["reasoning_effort"],
            )
        except Exception as e:
            print("skip context case %d: %r" % (i, e), file=sys.stderr)
            continue
        opts["context"] = k
        ctx_rows.append({"name": "v4ctx_%03d" % i, "messages": msgs, "options": opts, "prompt": prompt})
    write_jsonl_gz(os.path.join(OUT, "v4_generated.jsonl.gz"), rows + ctx_rows)


def gen_v32_conversation(rng, case):
    """A random conversation valid for encoding_dsv32 (no reminders, tasks, wo_eos)."""
    msgs = []
    if rng.random() < 0.8:
        sys_msg = {"role": "system", "content": rtext(rng, 0, 15)}
        if rng.random() < 0.5:
            sys_msg["tools"] = [rtool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 3))]
        if rng.random() < 0.15:
            sys_msg["response_format"] = {"type": "json_schema", "json_schema": {"name": "r", "schema": rvalue(rng)}}
        msgs.append(sys_msg)
    call_id = 0
    turns = rng.randint(1, 5)
    for t in range(turns):
        if rng.random() < 0.15:
            dev = {"role": "developer", "content": rtext(rng, 1, 8)}
            if rng.random() < 0.4:
                dev["tools"] = [rtool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 2))]
            msgs.append(dev)
        else:
            msgs.append({"role": "user", "content": rtext(rng, 0, 15)})
        last_turn = t == turns - 1
        if last_turn and rng.random() < 0.5:
            break
        for _ in range(rng.randint(0, 2) if rng.random() < 0.5 else 0):
            calls = []
            for _ in range(rng.randint(1, 4)):
                call_id += 1
                calls.append({"id": "call_%d_%d" % (case, call_id), "type": "function",
                              "function": {"name": rng.choice(TOOL_NAMES), "arguments": rargs(rng)}})
            a = {"role": "assistant", "content": rtext(rng, 0, 5) if rng.random() < 0.3 else "", "tool_calls": calls}
            if rng.random() < 0.8:
                a[rng.choice(["reasoning_content", "reasoning_content", "reasoning"])] = rtext(rng, 1, 10)
            msgs.append(a)
            for tc in calls:
                content = rtext(rng, 0, 10)
                if rng.random() < 0.2:
                    content = json.dumps(rvalue(rng), ensure_ascii=False)
                msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": content})
        a = {"role": "assistant", "content": rtext(rng, 0, 15)}
        if rng.random() < 0.8:
            a["reasoning_content"] = rtext(rng, 1, 10)
        msgs.append(a)
    opts = {"thinking": rng.random() < 0.6, "drop_thinking": rng.random() < 0.85}
    return msgs, opts


def gen_v32(args):
    enc = load_module(args.v32_encoder, "encoding_dsv32")
    rng = random.Random(args.seed + 3)
    rows, errors = [], []
    i = 0
    while len(rows) < args.v32_cases:
        i += 1
        msgs, opts = gen_v32_conversation(rng, i)
        try:
            prompt = enc.encode_messages(
                copy.deepcopy(msgs),
                thinking_mode="thinking" if opts["thinking"] else "chat",
                drop_thinking=opts["drop_thinking"],
            )
        except Exception as e:  # the reference rejects it: the Go encoder must too
            errors.append({"name": "v32_%03d" % i, "messages": msgs, "options": opts,
                           "error": "%s: %s" % (type(e).__name__, e)})
            continue
        rows.append({"name": "v32_%03d" % i, "messages": msgs, "options": opts, "prompt": prompt})
    write_jsonl_gz(os.path.join(OUT, "v32_generated.jsonl.gz"), rows + errors)


def gen_v3_conversation(rng, case):
    msgs = []
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        msgs.append({"role": "system", "content": rtext(rng, 0, 12)})
    cid = 0
    for t in range(rng.randint(1, 5)):
        msgs.append({"role": "user", "content": rtext(rng, 0, 15)})
        if rng.random() < 0.35:
            calls = []
            for _ in range(rng.randint(1, 3)):
                cid += 1
                calls.append({"id": "c%d" % cid, "type": "function",
                              "function": {"name": rng.choice(TOOL_NAMES), "arguments": rargs(rng)}})
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": rtext(rng, 0, 10)})
        if rng.random() < 0.85:
            msgs.append({"role": "assistant", "content": rtext(rng, 0, 15)})
    return msgs


def gen_jinja_v3(args):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(args.v3_tokenizer)
    rng = random.Random(args.seed + 1)
    rows = []
    for i in range(args.jinja_cases):
        msgs = gen_v3_conversation(rng, i)
        agp = rng.random() < 0.6
        prompt = tok.apply_chat_template(copy.deepcopy(msgs), tokenize=False, add_generation_prompt=agp)
        rows.append({"name": "v3_%03d" % i, "messages": msgs, "add_generation_prompt": agp, "prompt": prompt})
    write_jsonl_gz(os.path.join(OUT, "jinja_v3.jsonl.gz"), rows)


def gen_jinja_real(args):
    """Real chat templates (template/testdata/jinja-real) over V3-style conversations."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rng = random.Random(args.seed + 4)
    names = sorted(f for f in os.listdir(REAL_DIR) if f.endswith(".jinja"))
    rows = []
    for name in names:
        src = open(os.path.join(REAL_DIR, name), encoding="utf-8").read()
        for j in range(args.real_cases):
            msgs = gen_v3_conversation(rng, j)
            for m in msgs:
                if m["role"] == "assistant" and m.get("tool_calls") and rng.random() < 0.3:
                    m["content"] = rtext(rng, 1, 4)
                if m["role"] == "assistant" and not m.get("tool_calls") and rng.random() < 0.3:
                    m["content"] = rtext(rng, 1, 4) + "</think>" + m["content"]
                if m["role"] == "assistant" and rng.random() < 0.1:
                    m["prefix"] = True
            kwargs = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}
            k = rng.random()
            if k < 0.4:
                kwargs["thinking"] = rng.random() < 0.5
            elif k < 0.6:
                kwargs["enable_thinking"] = rng.random() < 0.5
            agp = rng.random() < 0.6
            row = {"name": "%s_%03d" % (name[:-6], j), "template": name, "messages": msgs,
                   "add_generation_prompt": agp, "kwargs": kwargs}
            try:
                out, _ = render_jinja_template(conversations=[copy.deepcopy(msgs)], chat_template=src,
                                               add_generation_prompt=agp, **kwargs)
                row["prompt"] = out[0]
            except Exception as e:
                row["error"] = "%s: %s" % (type(e).__name__, e)
            rows.append(row)
    write_jsonl_gz(os.path.join(OUT, "jinja_real.jsonl.gz"), rows)


def gen_jinja_extra(args):
    from transformers.utils.chat_template_utils import render_jinja_template

    rng = random.Random(args.seed + 2)
    names = sorted(f for f in os.listdir(JINJA_DIR) if f.endswith(".jinja"))
    rows = []
    for name in names:
        src = open(os.path.join(JINJA_DIR, name), encoding="utf-8").read()
        for j in range(args.extra_cases):
            msgs, _ = gen_v4_conversation(rng, 1000 + j)
            tools = None
            for m in msgs:
                if m.get("tools"):
                    tools = m.pop("tools")
            if tools is None and rng.random() < 0.5:
                tools = [rtool(rng, n) for n in rng.sample(TOOL_NAMES, 2)]
            # some null contents (None prints "None", is defined, survives default())
            for m in msgs:
                if m["role"] in ("user", "assistant", "tool") and rng.random() < 0.1:
                    m["content"] = None
            # assistant arguments as objects half of the time (templates iterate them)
            for m in msgs:
                for tc in m.get("tool_calls") or []:
                    if rng.random() < 0.5:
                        tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
            agp = rng.random() < 0.5
            extra = {"bos_token": "<s>", "eos_token": "</s>", "flag": rng.choice([True, False])}
            row = {"name": "%s_%03d" % (name[:-6], j), "template": name, "messages": msgs, "tools": tools,
                   "add_generation_prompt": agp, "kwargs": extra}
            try:
                out, _ = render_jinja_template(conversations=[copy.deepcopy(msgs)], tools=copy.deepcopy(tools),
                                               chat_template=src, add_generation_prompt=agp, **extra)
                row["prompt"] = out[0]
            except Exception as e:
                row["error"] = "%s: %s" % (type(e).__name__, e)
            rows.append(row)
    write_jsonl_gz(os.path.join(OUT, "jinja_extra.jsonl.gz"), rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--v4-encoder", required=True, help="path of a downloaded encoding_dsv4.py")
    ap.add_argument("--v32-encoder", help="path of a local encoding_dsv32.py (see the module doc)")
    ap.add_argument("--v32-cases", type=int, default=200)
    ap.add_argument("--v3-tokenizer", default=os.path.join(ROOT, "..", "shared", "data", "deepseek-v3-tokenizer"))
    ap.add_argument("--seed", type=int, default=20260429)
    ap.add_argument("--v4-cases", type=int, default=300)
    ap.add_argument("--v4-context-cases", type=int, default=60)
    ap.add_argument("--jinja-cases", type=int, default=150)
    ap.add_argument("--extra-cases", type=int, default=25)
    ap.add_argument("--real-cases", type=int, default=100)
    args = ap.parse_args()
    gen_v4(args)
    if args.v32_encoder:
        gen_v32(args)
    gen_jinja_v3(args)
    gen_jinja_extra(args)
    gen_jinja_real(args)


if __name__ == "__main__":
    main()
