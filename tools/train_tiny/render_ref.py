#!/usr/bin/env python3
"""Reference renderer: conversations.jsonl -> samples.jsonl with DeepSeek's own Python encoder.

This is the cross-check for the Go renderer (tools/train_tiny/render, our template/ and
tokenizer/ packages), which produces the training data. Both must write identical files.
DeepSeek's encoder is not part of this repository: pass the path of encoding_dsv4.py from
the DeepSeek-V4 HF repo (folder encoding/) or a faithful copy.

A sample is one assistant turn: prompt = the conversation up to that turn, rendered with
the generation prompt (ends in <｜Assistant｜><think> or </think>); completion = what the
model must write, through <｜end▁of▁sentence｜>. The rendering of conversation[:turn+1]
must start with the prompt's text (checked), so prompt+completion is exactly the text of
the conversation through that turn.

Usage: render_ref.py --encoder encoding_dsv4.py --tokenizer models/dsv4-tiny/tokenizer.json \
          [-i conversations.jsonl] [-o samples.jsonl]
"""
import argparse
import importlib.util
import json
import os

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))


def load_encoder(path):
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def with_tools(conv):
    msgs = [dict(m) for m in conv["messages"]]
    if conv.get("tools"):
        if msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": ""})
        msgs[0]["tools"] = conv["tools"]
    return msgs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("-i", default=os.path.join(HERE, "conversations.jsonl"))
    ap.add_argument("-o", default=os.path.join(HERE, "build", "samples_ref.jsonl"))
    args = ap.parse_args()
    enc = load_encoder(args.encoder)
    tok = Tokenizer.from_file(args.tokenizer)
    os.makedirs(os.path.dirname(args.o), exist_ok=True)
    n = 0
    with open(args.i, encoding="utf-8") as f, open(args.o, "w", encoding="utf-8") as out:
        for line in f:
            conv = json.loads(line)
            mode = "thinking" if conv["thinking"] else "chat"
            msgs = with_tools(conv)
            turn = 0
            for i, m in enumerate(msgs):
                if m["role"] != "assistant":
                    continue
                prompt = enc.encode_messages(msgs[:i], thinking_mode=mode)
                full = enc.encode_messages(msgs[: i + 1], thinking_mode=mode)
                assert full.startswith(prompt), (conv["name"], i)
                completion = full[len(prompt):]
                pids = tok.encode(prompt, add_special_tokens=False).ids
                fids = tok.encode(full, add_special_tokens=False).ids
                assert fids[: len(pids)] == pids, ("token boundary moved", conv["name"], i)
                rec = {
                    "name": f"{conv['name']}#{turn}",
                    "prompt": prompt,
                    "completion": completion,
                    "prompt_ids": pids,
                    "completion_ids": fids[len(pids):],
                }
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                turn += 1
                n += 1
    print(f"wrote {n} samples to {args.o}")


if __name__ == "__main__":
    main()
