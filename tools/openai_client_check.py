#!/usr/bin/env python3
"""Drive examples/server with the official Python `openai` client.

    tools/.venv/bin/python tools/openai_client_check.py            # builds and starts the server (--mock)
    tools/.venv/bin/python tools/openai_client_check.py --embedded          # the embedded dsv4-tiny
    tools/.venv/bin/python tools/openai_client_check.py --model-path models/dsv4-tiny
    tools/.venv/bin/python tools/openai_client_check.py --base-url http://127.0.0.1:30000/v1

By default it builds `go run ./examples/server --mock` (a scripted stand-in
model over the real DeepSeek-V4 vocabulary, so the expected answers are
known) on a free port, runs the checks, and stops it (SIGTERM: the server
drains). With --model-path it serves that checkpoint instead and checks
what a trained model must satisfy (well-formed responses; with the embedded
tiny model, "What is 17*23? Number only." -> "391"). With --base-url the
served model's id picks the checks: "dsv4-mock" (a server started with --mock)
gets the scripted-model checks, anything else the trained-model ones ("dsv4-tiny":
the embedded model's too); --expect overrides. On every model it also checks
prompt logprobs (completions echo + logprobs, vLLM's prompt_logprobs, their
400s) and, on a server it starts (--enable-prompt-tokens-details) or with
--prompt-tokens-details, prefix caching (cached_tokens, outputs equal to the
uncached ones), and structured outputs (a Pydantic model through
chat.completions.parse, json_object, a 400 for an unsupported schema
keyword; vLLM's structured_outputs choice / regex and guided_choice /
guided_regex through extra_body, chat and completions, their 400s; tool_choice
"required" over two tools as vLLM's array of calls). Exit status 0 when every check
passes; one line per check on stdout. Needs only the `openai` package.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import openai
from openai import OpenAI

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}

failures = []


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args):
    port = free_port()
    exe = os.path.join(tempfile.mkdtemp(prefix="dsv4-check-"), "server")
    subprocess.run(["go", "build", "-o", exe, "./examples/server"], cwd=ROOT, check=True)
    cmd = [exe, "--port", str(port), "--api-key", args.api_key or "check-key", "--log-level", "warn"]
    # usage.prompt_tokens_details.cached_tokens for the prefix-cache checks
    cmd += ["--enable-prompt-tokens-details"]
    if args.model_path:
        cmd += ["--model-path", args.model_path]
    elif not args.embedded:
        cmd += ["--mock", "--mock-delay", "1ms"]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(base + "/health", timeout=1) as r:
                if r.status == 200:
                    return proc, base + "/v1"
        except Exception:
            time.sleep(0.1)
        if proc.poll() is not None:
            sys.exit("server exited early")
    proc.kill()
    sys.exit("server did not become healthy")


def mock_checks(c, model):
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello there"}], temperature=0)
    check("chat non-stream content", r.choices[0].message.content == "You said: Hello there", r)
    check("chat finish_reason stop", r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
    u = r.usage
    check("chat usage", u.completion_tokens > 0 and u.total_tokens == u.prompt_tokens + u.completion_tokens, u)

    msgs = [{"role": "user", "content": "What is the weather in Paris and Tokyo?"}]
    r = c.chat.completions.create(model=model, messages=msgs, tools=[WEATHER_TOOL], temperature=0)
    m = r.choices[0].message
    calls = m.tool_calls or []
    check("tools finish_reason tool_calls", r.choices[0].finish_reason == "tool_calls", r.choices[0].finish_reason)
    check("parallel tool calls", [json.loads(tc.function.arguments) for tc in calls]
          == [{"city": "Paris", "days": 3}, {"city": "Tokyo", "days": 3}], calls)
    check("tool call ids", all(tc.id and tc.type == "function" for tc in calls), calls)

    # streaming tool calls: first delta has id+name, then argument fragments
    stream = c.chat.completions.create(model=model, messages=msgs, tools=[WEATHER_TOOL], temperature=0, stream=True)
    args, names, finish = {}, {}, None
    for chunk in stream:
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                if tc.function and tc.function.name:
                    names[tc.index] = tc.function.name
                args[tc.index] = args.get(tc.index, "") + ((tc.function and tc.function.arguments) or "")
            finish = ch.finish_reason or finish
    check("stream tool calls", [json.loads(args[i]) for i in sorted(args)]
          == [{"city": "Paris", "days": 3}, {"city": "Tokyo", "days": 3}] and names == {0: "get_weather", 1: "get_weather"}, (names, args))
    check("stream finish tool_calls", finish == "tool_calls", finish)

    # tool results round trip
    msgs2 = msgs + [m.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny, 24 C"},
        {"role": "tool", "tool_call_id": calls[1].id, "content": "rain, 18 C"},
    ]
    r = c.chat.completions.create(model=model, messages=msgs2, tools=[WEATHER_TOOL], temperature=0)
    check("tool results answer", (r.choices[0].message.content or "").startswith("The weather is sunny, 24 C"), r.choices[0].message)

    # tool_choice named: as vLLM, the output is get_weather's arguments,
    # constrained to its parameters schema (the mock's text does not follow
    # it: what the mask leaves), one call of it, finish_reason "stop"
    # ("length" on a max_tokens cut). tool_choice required with one tool:
    # vLLM's array of {"name", "parameters"} (built whatever the number of
    # tools), so one call of get_weather or more, finish_reason "tool_calls"
    # ("length" on a cut, where the last call's arguments may be partial)
    for choice, finish in [("required", "tool_calls"), ({"type": "function", "function": {"name": "get_weather"}}, "stop")]:
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "weather in Oslo"}],
                                      tools=[WEATHER_TOOL], tool_choice=choice, temperature=0, max_tokens=64)
        m = r.choices[0].message
        tcs = m.tool_calls or []
        one = len(tcs) == 1 if choice != "required" else len(tcs) >= 1
        check(f"tool_choice {json.dumps(choice)}",
              one and all(tc.function.name == "get_weather" for tc in tcs)
              and all(tc.function.arguments.startswith("{") or (i == len(tcs) - 1 and r.choices[0].finish_reason == "length")
                      for i, tc in enumerate(tcs))
              and not m.content and r.choices[0].finish_reason in (finish, "length"), r.choices[0])
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "weather in Oslo"}],
                                  tools=[WEATHER_TOOL], tool_choice="none", temperature=0)
    check("tool_choice none", not r.choices[0].message.tool_calls and r.choices[0].message.content == "You said: weather in Oslo", r.choices[0].message)
    r = c.chat.completions.create(model=model, messages=msgs, tools=[WEATHER_TOOL], parallel_tool_calls=False, temperature=0)
    check("parallel_tool_calls false", len(r.choices[0].message.tool_calls or []) == 1, r.choices[0].message)

    # thinking: reasoning_content, streaming with usage
    for kw in [{"thinking": True}, {"enable_thinking": True}]:
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], temperature=0,
                                      extra_body={"chat_template_kwargs": kw, "reasoning_effort": "max"})
        msg = r.choices[0].message
        check(f"thinking {list(kw)[0]}", getattr(msg, "reasoning_content", None) == "Thinking about it." and msg.content == "You said: Hi", msg)
    stream = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], temperature=0, stream=True,
                                       stream_options={"include_usage": True}, extra_body={"chat_template_kwargs": {"thinking": True}})
    reasoning, content, usage, roles = "", "", None, 0
    for chunk in stream:
        if not chunk.choices:
            usage = chunk.usage
            continue
        d = chunk.choices[0].delta
        roles += d.role == "assistant"
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
    check("stream reasoning/content", reasoning == "Thinking about it." and content == "You said: Hi", (reasoning, content))
    check("stream include_usage", usage is not None and usage.completion_tokens > 0
          and usage.completion_tokens_details.reasoning_tokens > 0, usage)
    check("stream role once", roles == 1, roles)

    # sampling controls
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "count 50"}], max_tokens=5, n=2,
                                  logprobs=True, top_logprobs=2, temperature=0)
    check("max_tokens -> length, n=2", len(r.choices) == 2 and all(ch.finish_reason == "length" for ch in r.choices), r.choices)
    check("logprobs", len(r.choices[0].logprobs.content) == 5 and len(r.choices[0].logprobs.content[0].top_logprobs) == 2, r.choices[0].logprobs)
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "count 9"}], stop=[" w4"], temperature=0)
    check("stop string", r.choices[0].message.content == "w1 w2 w3" and r.choices[0].finish_reason == "stop", r.choices[0].message)
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "count 30"}], temperature=1, seed=42,
                                  max_completion_tokens=10)
    r2 = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "count 30"}], temperature=1, seed=42,
                                   max_completion_tokens=10)
    check("seed reproducible", r.choices[0].message.content == r2.choices[0].message.content, (r, r2))

    # completions
    r = c.completions.create(model=model, prompt="<｜User｜>count 3<｜Assistant｜></think>", max_tokens=20, temperature=0)
    check("completions", r.choices[0].text == "w1 w2 w3" and r.choices[0].finish_reason == "stop", r.choices[0])
    text = "".join(ch.choices[0].text for ch in c.completions.create(
        model=model, prompt="<｜User｜>count 4<｜Assistant｜></think>", max_tokens=20, temperature=0, stream=True) if ch.choices)
    check("completions stream", text == "w1 w2 w3 w4", text)


def model_checks(c, model, tiny):
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "What is 17*23? Number only."}],
                                  temperature=0, max_tokens=32)
    check("chat answers", r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens > 0, r)
    print(f"     17*23 -> {r.choices[0].message.content!r}")
    if tiny:
        check("embedded model: 17*23 = 391", (r.choices[0].message.content or "").strip() == "391", r.choices[0].message)
    text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "What is 17*23? Number only."}], temperature=0,
        max_tokens=32, stream=True) if ch.choices)
    check("stream equals non-stream (greedy)", text == (r.choices[0].message.content or ""), (text, r.choices[0].message.content))
    if not tiny:
        return
    # the embedded model's training conversations (tools/train_tiny): tool calls and thinking
    convs = {}
    with open(os.path.join(ROOT, "tools", "train_tiny", "conversations.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            convs[d["name"]] = d
    conv = convs["tool_weather_parallel_paris_tokyo"]
    r = c.chat.completions.create(model=model, messages=conv["messages"][:2], tools=conv["tools"], temperature=0)
    calls = [(tc.function.name, json.loads(tc.function.arguments)) for tc in r.choices[0].message.tool_calls or []]
    check("embedded model: parallel tool calls", calls == [("get_weather", {"location": "Paris"}), ("get_weather", {"location": "Tokyo"})]
          and r.choices[0].finish_reason == "tool_calls", r.choices[0])
    conv = convs["think_00"]
    r = c.chat.completions.create(model=model, messages=conv["messages"][:1], temperature=0,
                                  extra_body={"chat_template_kwargs": {"thinking": True}})
    msg, want = r.choices[0].message, conv["messages"][1]
    check("embedded model: thinking", msg.content == want["content"]
          and getattr(msg, "reasoning_content", None) == want["reasoning_content"], msg)


def structured_checks(c, model):
    """response_format as the openai client sends it: a Pydantic model through
    chat.completions.parse (a strict json_schema with $defs, anyOf null,
    enums), json_object, and a 400 for an unsupported keyword. Outputs that
    finish with "stop" must parse; "length" may cut the JSON (vLLM's rule)."""
    from typing import Literal, Optional

    import pydantic

    class Pet(pydantic.BaseModel):
        kind: Literal["cat", "dog"]
        age: int

    class Person(pydantic.BaseModel):
        name: str
        age: int
        nickname: Optional[str]
        pets: list[Pet]
        score: float

    msgs = [{"role": "user", "content": "Describe a person as JSON."}]
    complete, cut = 0, 0
    for seed in range(4):
        try:
            r = c.chat.completions.parse(model=model, messages=msgs, response_format=Person,
                                         temperature=0.8, seed=seed, max_tokens=256)
            ok = isinstance(r.choices[0].message.parsed, Person) and r.choices[0].finish_reason == "stop"
            check(f"structured outputs: Pydantic model parsed (seed {seed})", ok, r.choices[0])
            complete += 1
        except openai.LengthFinishReasonError as e:
            content = e.completion.choices[0].message.content or ""
            check(f"structured outputs: cut output is a JSON prefix (seed {seed})", content.startswith("{"), content)
            cut += 1
    print(f"     Pydantic schema: {complete} complete, {cut} cut by max_tokens")
    r = c.chat.completions.create(model=model, messages=msgs, response_format={"type": "json_object"},
                                  temperature=0.8, seed=1, max_tokens=96, n=2)
    for ch in r.choices:
        content = ch.message.content or ""
        if ch.finish_reason == "stop":
            try:
                ok = isinstance(json.loads(content), dict)
            except ValueError:
                ok = False
        else:
            ok = ch.finish_reason == "length" and content.startswith("{")
        check(f"structured outputs: json_object choice {ch.index} ({ch.finish_reason})", ok, content)
    try:
        c.chat.completions.create(model=model, messages=msgs, max_tokens=8, response_format={
            "type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "string", "pattern": "^a+(?=b)"}}})
        check("structured outputs: unsupported keyword is a 400", False, "accepted")
    except openai.BadRequestError as e:
        check("structured outputs: unsupported keyword is a 400", '"pattern"' in str(e), e)
    # vLLM's structured_outputs choice / regex and the legacy guided_* fields, as extra_body
    import re
    choices = ["positive", "negative", "neutral"]
    pattern = r"[0-9]{2,3} (km|mi)"
    for name, body, ok in [
        ("structured_outputs.choice", {"structured_outputs": {"choice": choices}}, lambda s: s in choices),
        ("guided_choice", {"guided_choice": choices}, lambda s: s in choices),
        ("structured_outputs.regex", {"structured_outputs": {"regex": pattern}}, lambda s: re.fullmatch(pattern, s)),
        ("guided_regex", {"guided_regex": pattern}, lambda s: re.fullmatch(pattern, s)),
    ]:
        r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Is the review positive? How far?"}],
                                      temperature=0.8, seed=2, max_tokens=24, n=2, extra_body=body)
        for ch in r.choices:
            check(f"structured outputs: {name} choice {ch.index}", ch.finish_reason == "stop" and ok(ch.message.content or ""),
                  ch)
        r = c.completions.create(model=model, prompt="The answer: ", temperature=0.8, seed=3, max_tokens=24, extra_body=body)
        check(f"structured outputs: {name} (completions)", r.choices[0].finish_reason == "stop" and ok(r.choices[0].text), r.choices[0])
    for name, body, param in [
        ("backreference", {"structured_outputs": {"regex": r"(a)\1"}}, "structured_outputs.regex"),
        ("two kinds", {"structured_outputs": {"choice": ["a"], "regex": "a"}}, "structured_outputs"),
    ]:
        try:
            c.chat.completions.create(model=model, messages=msgs, max_tokens=8, extra_body=body)
            check(f"structured outputs: {name} is a 400", False, "accepted")
        except openai.BadRequestError as e:
            check(f"structured outputs: {name} is a 400", (e.body or {}).get("param") == param, e)
    required_checks(c, model)


TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]},
    },
}


def required_checks(c, model):
    """tool_choice "required" with several tools, as vLLM serves it: the
    output is a JSON array of {"name", "parameters"} objects (an anyOf over
    the tools), returned as one tool call per element in array order: ids,
    one of the tools' names, arguments the parameters' JSON (a valid prefix
    on a max_tokens cut), no content, finish_reason "tool_calls" on a stop
    (a stop string here: neither model closes the array in this budget) or
    "length"; the stream accumulates to the same calls."""
    msgs = [{"role": "user", "content": "What is the weather and the time in Oslo?"}]
    tools = [WEATHER_TOOL, TIME_TOOL]
    names = {"get_weather", "get_time"}
    for stop in (None, '"parameters"'):
        kw = {"stop": [stop]} if stop else {}
        r = c.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="required",
                                      temperature=0, max_tokens=120, **kw)
        ch = r.choices[0]
        tcs = ch.message.tool_calls or []
        want = ("tool_calls",) if stop else ("tool_calls", "length")
        check(f"tool_choice required, 2 tools{', stop' if stop else ''}: calls",
              len(tcs) >= 1 and all(tc.function.name in names and tc.id for tc in tcs)
              and len({tc.id for tc in tcs}) == len(tcs) and not ch.message.content and ch.finish_reason in want,
              ch)
        if ch.finish_reason == "tool_calls" and not stop:
            check("tool_choice required, 2 tools: arguments are JSON objects",
                  all(isinstance(json.loads(tc.function.arguments), dict) for tc in tcs), tcs)
        snames, sargs, sids, finish = {}, {}, {}, None
        for chunk in c.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="required",
                                               temperature=0, max_tokens=120, stream=True, **kw):
            if not chunk.choices:
                continue
            for tc in chunk.choices[0].delta.tool_calls or []:
                if tc.id:
                    sids[tc.index] = tc.id
                if tc.function and tc.function.name:
                    snames[tc.index] = tc.function.name
                sargs[tc.index] = sargs.get(tc.index, "") + ((tc.function and tc.function.arguments) or "")
            finish = chunk.choices[0].finish_reason or finish
        check(f"tool_choice required, 2 tools{', stop' if stop else ''}: stream = non-stream",
              [snames.get(i) for i in sorted(sargs)] == [tc.function.name for tc in tcs]
              and [sargs[i] for i in sorted(sargs)] == [tc.function.arguments for tc in tcs]
              and sorted(sids) == list(range(len(tcs))) and finish == ch.finish_reason, (snames, sargs, finish))


def extra_field(obj, name):
    """A response field the openai client does not model (vLLM's extensions)."""
    v = getattr(obj, name, None)
    if v is None and getattr(obj, "model_extra", None):
        v = obj.model_extra.get(name)
    return v


def check_prompt_positions(name, positions, n_prompt, k):
    """vLLM's prompt_logprobs: one entry per prompt token, the first None,
    then {"<token id>": {logprob, rank, decoded_token}} with the prompt
    token first and at most k alternatives."""
    ok = isinstance(positions, list) and len(positions) == n_prompt and n_prompt > 1 and positions[0] is None
    detail = positions if not ok else ""
    for i, pos in enumerate(positions[1:] if ok else [], 1):
        entries = list(pos.items()) if isinstance(pos, dict) else []
        good = 1 <= len(entries) <= k + 1 and all(
            isinstance(v, dict) and set(v) == {"logprob", "rank", "decoded_token"} and k_.lstrip("-").isdigit()
            and isinstance(v["logprob"], (int, float)) and v["logprob"] <= 0 and isinstance(v["rank"], int) and v["rank"] >= 1
            and isinstance(v["decoded_token"], str) for k_, v in entries)
        # the prompt token comes first; the others are ranks 1..k in order
        good = good and [v["rank"] for _, v in entries[1:]] == sorted(v["rank"] for _, v in entries[1:])
        if good and len(entries) == k + 1:  # the prompt token is outside the top k
            good = entries[0][1]["rank"] > k
        if good and len(entries) <= k:  # the prompt token is among the top k
            good = entries[0][1]["rank"] <= k
        if not good:
            ok, detail = False, (i, pos)
            break
    check(name, ok, detail)


def post_json(base, key, path, body):
    """POST body to base+path; returns (status, parsed JSON)."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def logprob_checks(c, model, base, prompt):
    """(a) completions echo + logprobs cover the prompt tokens first; (b)
    prompt_logprobs on chat and completions in vLLM's shape; (d) 400s for
    bad prompt_logprobs."""
    # (a) echo=True, logprobs=2: prompt entries first, the first null
    r = c.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, echo=True, logprobs=2)
    ch, u = r.choices[0], r.usage
    lp = ch.logprobs
    n = len(lp.tokens) if lp else 0
    check("echo+logprobs: text starts with the prompt", ch.text.startswith(prompt), ch.text)
    check("echo+logprobs: prompt and output tokens", lp is not None and n == u.prompt_tokens + u.completion_tokens
          and len(lp.token_logprobs) == n and len(lp.top_logprobs) == n and len(lp.text_offset) == n, (u, lp))
    check("echo+logprobs: first prompt token null", lp is not None and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None,
          lp and (lp.token_logprobs[:2], lp.top_logprobs[:2]))
    rest_ok = lp is not None and all(
        isinstance(lp.token_logprobs[i], float) and isinstance(lp.top_logprobs[i], dict)
        and 1 <= len(lp.top_logprobs[i]) <= 3 and lp.top_logprobs[i].get(lp.tokens[i]) == lp.token_logprobs[i]
        for i in range(1, n))
    check("echo+logprobs: later entries have a logprob and <= k+1 top_logprobs with the token", rest_ok, lp)
    check("echo+logprobs: text_offset from 0, ascending", lp is not None and lp.text_offset[0] == 0
          and lp.text_offset == sorted(lp.text_offset) and lp.text_offset[u.prompt_tokens] == len(prompt), lp and lp.text_offset)
    stream = c.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, echo=True, logprobs=2, stream=True)
    text, toks, tlps, offs = "", [], [], []
    for chunk in stream:
        for sc in chunk.choices:
            text += sc.text
            if sc.logprobs:
                toks += sc.logprobs.tokens
                tlps += sc.logprobs.token_logprobs
                offs += sc.logprobs.text_offset
    check("echo+logprobs stream = non-stream", lp is not None and (text, toks, tlps, offs)
          == (ch.text, lp.tokens, lp.token_logprobs, lp.text_offset), (text, toks, tlps, offs))

    # (b) prompt_logprobs on completions (per choice) and chat (top level)
    r2 = c.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, extra_body={"prompt_logprobs": 1})
    pl = extra_field(r2.choices[0], "prompt_logprobs")
    check_prompt_positions("completions prompt_logprobs=1: vLLM shape", pl, r2.usage.prompt_tokens, 1)
    check("completions prompt_logprobs: same output as without", r2.choices[0].text == ch.text[len(prompt):], (r2.choices[0].text, ch.text))
    if lp is not None and isinstance(pl, list) and len(pl) == len(lp.tokens[:r2.usage.prompt_tokens]):
        same = all(abs(next(iter(pl[i].values()))["logprob"] - lp.token_logprobs[i]) < 1e-6 for i in range(1, len(pl)))
        check("completions prompt_logprobs = echo logprobs of the prompt", same, (pl, lp.token_logprobs))
    msgs = [{"role": "user", "content": "What is 17*23? Number only."}]
    r3 = c.chat.completions.create(model=model, messages=msgs, max_tokens=8, temperature=0, extra_body={"prompt_logprobs": 1})
    check_prompt_positions("chat prompt_logprobs=1: vLLM shape (top level)", extra_field(r3, "prompt_logprobs"), r3.usage.prompt_tokens, 1)
    check("chat prompt_logprobs: not on the choice", extra_field(r3.choices[0], "prompt_logprobs") is None, r3.choices[0])
    r4 = c.chat.completions.create(model=model, messages=msgs, max_tokens=8, temperature=0, n=2, extra_body={"prompt_logprobs": 0})
    pl0 = extra_field(r4, "prompt_logprobs")
    check_prompt_positions("chat prompt_logprobs=0, n=2: the prompt token only", pl0, r4.usage.prompt_tokens, 0)
    check("chat prompt_logprobs, n=2: same outputs", [x.message.content for x in r4.choices] == [r3.choices[0].message.content] * 2,
          (r4.choices, r3.choices[0].message.content))

    # (d) bad prompt_logprobs: 400 naming the parameter, as vLLM's
    bad = [("chat", {"messages": msgs}), ("completions", {"prompt": prompt})]
    for path, body in bad:
        for name, extra in [("-2", {"prompt_logprobs": -2}), ("21", {"prompt_logprobs": 21}),
                            ("not an integer", {"prompt_logprobs": "x"}), ("1 with stream", {"prompt_logprobs": 1, "stream": True})]:
            status, b = post_json(base, c.api_key, "/" + path.replace("chat", "chat/completions"),
                                  dict(body, model=model, max_tokens=4, **extra))
            err = (b or {}).get("error") if isinstance(b, dict) else None
            check(f"error 400: {path} prompt_logprobs {name}", status == 400 and isinstance(err, dict) and "prompt_logprobs" in
                  (str(err.get("param")) + str(err.get("message"))), (status, b))
    try:
        c.completions.create(model=model, prompt=prompt, max_tokens=4, extra_body={"prompt_logprobs": -5})
        check("error 400 through the client: openai.BadRequestError", False, "no error")
    except openai.BadRequestError as e:
        check("error 400 through the client: openai.BadRequestError", isinstance(e.body, dict) and "message" in e.body, e.body)


def prefix_cache_checks(c, model, base):
    """(c) a repeated long system prompt: later requests report
    usage.prompt_tokens_details.cached_tokens > 0 (the server runs with
    --enable-prompt-tokens-details) and give the first request's greedy
    output; an uncached run (prompt_logprobs restores nothing) agrees."""
    nonce = os.urandom(4).hex()
    system = (f"Session {nonce}. You are a careful assistant for a weather service. " +
              " ".join(f"Rule {i}: answer briefly, cite the city, and never invent a forecast for day {i}." for i in range(1, 25)))

    def ask(user, stream=False, **kw):
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if not stream:
            r = c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=16, **kw)
            return r.choices[0].message.content, r.usage
        text, usage = "", None
        for chunk in c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=16, stream=True,
                                               stream_options={"include_usage": True}, **kw):
            if not chunk.choices:
                usage = chunk.usage
                continue
            text += chunk.choices[0].delta.content or ""
        return text, usage

    def cached(u):
        d = getattr(u, "prompt_tokens_details", None)
        return (d.cached_tokens or 0) if d else 0

    first, u1 = ask("What is 17*23? Number only.")
    check("prefix cache: long prompt", u1.prompt_tokens >= 300, u1)
    check("prefix cache: first request has nothing cached", cached(u1) == 0, u1)
    again, u2 = ask("What is 17*23? Number only.")
    check("prefix cache: repeated request cached_tokens > 0", cached(u2) > 0, u2)
    check("prefix cache: repeated request = first (greedy)", again == first, (again, first))
    s_again, u3 = ask("What is 17*23? Number only.", stream=True)
    check("prefix cache: streamed usage cached_tokens > 0", u3 is not None and cached(u3) > 0, u3)
    check("prefix cache: streamed = first (greedy)", s_again == first, (s_again, first))
    other, u4 = ask("Weather in Paris tomorrow?")
    check("prefix cache: new question on the same system prompt cached_tokens > 0",
          0 < cached(u4) < u4.prompt_tokens, u4)
    ref, u5 = ask("Weather in Paris tomorrow?", extra_body={"prompt_logprobs": 0})
    check("prefix cache: prompt_logprobs request restores nothing", cached(u5) == 0, u5)
    check("prefix cache: restored-prefix output = uncached output", other == ref, (other, ref))
    # completions share the cache
    prompt = system + " Question: 17*23="
    r1 = c.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0)
    r2 = c.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0)
    check("prefix cache: completions repeated cached_tokens > 0 and same text",
          cached(r2.usage) > 0 and r2.choices[0].text == r1.choices[0].text, (r1, r2))
    hits = None
    with urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith("dsv4_prefix_cache_hits_total"):
                hits = float(line.split()[-1])
    check("prefix cache: /metrics dsv4_prefix_cache_hits_total > 0", hits is not None and hits > 0, hits)


def common_checks(c, base, model):
    models = c.models.list()
    check("models list", [m.id for m in models.data] == [model], models)
    # errors: OpenAI error objects with the right status codes
    cases = [
        ("empty messages", dict(messages=[]), openai.BadRequestError),
        ("unknown model", dict(model="no-such-model", messages=[{"role": "user", "content": "x"}]), openai.NotFoundError),
        ("negative max_tokens", dict(messages=[{"role": "user", "content": "x"}], max_tokens=-1), openai.BadRequestError),
        ("bad temperature", dict(messages=[{"role": "user", "content": "x"}], temperature=-3), openai.BadRequestError),
        ("unknown named tool", dict(messages=[{"role": "user", "content": "x"}], tools=[WEATHER_TOOL],
                                    tool_choice={"type": "function", "function": {"name": "nope"}}), openai.BadRequestError),
    ]
    for name, kw, exc in cases:
        kw.setdefault("model", model)
        try:
            c.chat.completions.create(**kw)
            check(f"error: {name}", False, "no error")
        except exc as e:
            check(f"error: {name}", isinstance(e.body, dict) and "message" in e.body, e.body)
        except Exception as e:  # wrong class
            check(f"error: {name}", False, repr(e))
    if c.api_key not in ("", "EMPTY"):  # the server requires a key: a wrong one must be refused
        bad = OpenAI(base_url=base, api_key="wrong", max_retries=0)
        try:
            bad.models.list()
            check("error: bad api key", False, "no error")
        except openai.AuthenticationError:
            check("error: bad api key", True)

    # a client that disconnects mid-stream frees its state
    stream = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "count 100000"}],
                                       stream=True, temperature=0, max_tokens=3000, extra_body={"ignore_eos": True})
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    live = None
    for _ in range(200):
        with urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/metrics") as r:
            for line in r.read().decode().splitlines():
                if line.startswith("dsv4_live_sequences"):
                    live = float(line.split()[-1])
        if live == 0:
            break
        time.sleep(0.05)
    check("disconnect frees state (dsv4_live_sequences 0)", live == 0, live)

    # concurrency: 16 parallel streams equal their sequential results
    prompts = [f"count {i + 3}" for i in range(16)]

    def one(p):
        return "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
            model=model, messages=[{"role": "user", "content": p}], temperature=0, max_tokens=24, stream=True) if ch.choices)

    seq = [one(p) for p in prompts]
    par = [None] * len(prompts)

    def worker(i):
        par[i] = one(prompts[i])

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("16 concurrent streams = sequential", seq == par, (seq, par))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="use a running server (…/v1) instead of starting one")
    ap.add_argument("--api-key", help="the server's API key (default: check-key for the server this script starts; "
                    "none with --base-url, and then the wrong-key check is skipped)")
    ap.add_argument("--model-path", help="serve this checkpoint instead of --mock")
    ap.add_argument("--embedded", action="store_true", help="serve the embedded dsv4-tiny model instead of --mock")
    ap.add_argument("--prompt-tokens-details", action="store_true",
                    help="with --base-url: the server runs with --enable-prompt-tokens-details and prefix caching "
                         "(runs the prefix-cache checks, as for a server this script starts)")
    ap.add_argument("--model", help="model name (default: from /v1/models)")
    ap.add_argument("--expect", choices=["auto", "mock", "model"], default="auto",
                    help="which checks: the scripted --mock model's or a trained model's (auto: from how the "
                         "server was started, or with --base-url from the served model id)")
    args = ap.parse_args()
    proc = None
    base = args.base_url
    if not base:
        proc, base = start_server(args)
    try:
        key = args.api_key or ("EMPTY" if args.base_url else "check-key")
        c = OpenAI(base_url=base, api_key=key, max_retries=0, timeout=120)
        model = args.model or c.models.list().data[0].id
        expect = args.expect
        if expect == "auto":
            if args.base_url:
                expect = "mock" if model == "dsv4-mock" else "model"
            else:
                expect = "model" if args.model_path or args.embedded else "mock"
        # the embedded model's own checks: by checkpoint directory, or by served name
        tiny = model == "dsv4-tiny" or os.path.basename(os.path.normpath(args.model_path or "")) == "dsv4-tiny"
        common_checks(c, base, model)
        structured_checks(c, model)
        if expect == "model":
            model_checks(c, model, tiny)
        else:
            mock_checks(c, model)
        # prompt logprobs and prefix caching, on any model (the mock's
        # backend gives every position's logits and saves states too)
        logprob_checks(c, model, base, "<｜User｜>What is 17*23? Number only.<｜Assistant｜></think>")
        if proc or args.prompt_tokens_details:
            prefix_cache_checks(c, model, base)
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            try:
                check("graceful shutdown", proc.wait(timeout=30) == 0, proc.returncode)
            except subprocess.TimeoutExpired:
                proc.kill()
                check("graceful shutdown", False, "timeout")
    print(f"{len(failures)} failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
