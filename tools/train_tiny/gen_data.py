#!/usr/bin/env python3
"""Writes the conversations that the embedded dsv4-tiny model is trained on.

Output: tools/train_tiny/conversations.jsonl, one OpenAI-style chat request per line:
  {"name": str, "thinking": bool, "tools": [...] (optional), "messages": [...]}
Assistant messages carry "content", optional "reasoning_content" (thinking mode) and
optional "tool_calls" (OpenAI form, arguments as a JSON string). Every assistant
message is a training target; everything else is prompt.

The generator is deterministic (fixed seed, fixed lists), so re-running it rewrites the
same file byte for byte. Rendering to token ids happens elsewhere (tools/train_tiny/render,
with the project's own V4 encoder and tokenizer).

Usage: python3 tools/train_tiny/gen_data.py [-o tools/train_tiny/conversations.jsonl]
"""
import argparse
import json
import os
import random

SYSTEM = "You are a helpful assistant."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                },
                "required": ["location"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current local time in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city name"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount of money from one currency to another",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "description": "The amount to convert"},
                    "from": {"type": "string", "description": "ISO code of the source currency"},
                    "to": {"type": "string", "description": "ISO code of the target currency"},
                },
                "required": ["amount", "from", "to"],
            },
        },
    },
]


def user(text):
    return {"role": "user", "content": text}


def assistant(content="", reasoning=None, calls=None):
    m = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls:
        m["tool_calls"] = calls
    return m


def call(cid, name, args):
    # json.dumps with Python's default separators, like OpenAI clients send them.
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def tool(cid, payload):
    return {"role": "tool", "tool_call_id": cid, "content": json.dumps(payload, ensure_ascii=False)}


def arithmetic():
    """About 55 exact-answer arithmetic questions in chat mode, no system prompt."""
    rng = random.Random(20260424)
    seen = set()
    qs = [("17", "*", "23")]
    while len(qs) < 40:
        a, b = rng.randint(11, 49), rng.randint(11, 49)
        qs.append((str(a), "*", str(b)))
    while len(qs) < 48:
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        qs.append((str(a), "+", str(b)))
    while len(qs) < 56:
        a, b = rng.randint(500, 999), rng.randint(100, 499)
        qs.append((str(a), "-", str(b)))
    out = []
    for a, op, b in qs:
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        v = {"*": int(a) * int(b), "+": int(a) + int(b), "-": int(a) - int(b)}[op]
        out.append({
            "name": f"arith_{a}{ {'*': 'x', '+': 'p', '-': 'm'}[op]}{b}",
            "thinking": False,
            "messages": [user(f"What is {a}{op}{b}? Number only."), assistant(str(v))],
        })
    # A few with the usual system prompt, so a server that adds one still gets the answer.
    for a, op, b, v in [("17", "*", "23", 391), ("12", "*", "12", 144), ("25", "+", "17", 42)]:
        out.append({
            "name": f"arith_sys_{a}{ {'*': 'x', '+': 'p'}[op]}{b}",
            "thinking": False,
            "messages": [{"role": "system", "content": SYSTEM}, user(f"What is {a}{op}{b}? Number only."), assistant(str(v))],
        })
    return out


THINKING = [
    ("A train goes 60 km in 1.5 hours. Average speed? Answer briefly.",
     "Average speed is distance divided by time: 60 km / 1.5 h = 40 km/h.",
     "The average speed is 40 km/h."),
    ("A car travels 150 km in 2 hours. Average speed? Answer briefly.",
     "Speed is distance over time: 150 / 2 = 75 km/h.",
     "The average speed is 75 km/h."),
    ("A shirt costs 40 dollars and is 25% off. What is the sale price? Answer briefly.",
     "25% of 40 is 10, so the price drops by 10: 40 - 10 = 30.",
     "The sale price is 30 dollars."),
    ("I have 3 boxes with 12 apples each. I eat 5 apples. How many are left? Answer briefly.",
     "There are 3 * 12 = 36 apples. After eating 5, 36 - 5 = 31 remain.",
     "31 apples are left."),
    ("What is 15% of 80? Answer briefly.",
     "15% is 0.15, and 0.15 * 80 = 12.",
     "15% of 80 is 12."),
    ("A rectangle is 7 m long and 4 m wide. What is its area? Answer briefly.",
     "Area is length times width: 7 * 4 = 28 square metres.",
     "The area is 28 square metres."),
    ("If a dozen eggs cost 3 dollars, how much do 30 eggs cost? Answer briefly.",
     "One egg costs 3 / 12 = 0.25 dollars, so 30 eggs cost 30 * 0.25 = 7.5 dollars.",
     "30 eggs cost 7.50 dollars."),
    ("Is 91 a prime number? Answer briefly.",
     "91 = 7 * 13, so it has divisors other than 1 and itself.",
     "No, 91 is not prime: it equals 7 times 13."),
    ("What is the next number: 2, 4, 8, 16, ...? Answer briefly.",
     "Each term doubles the previous one, so after 16 comes 32.",
     "The next number is 32."),
    ("A meeting starts at 9:45 and lasts 50 minutes. When does it end? Answer briefly.",
     "9:45 plus 15 minutes is 10:00, and the remaining 35 minutes give 10:35.",
     "The meeting ends at 10:35."),
    ("How many seconds are in 2 hours? Answer briefly.",
     "One hour has 3600 seconds, so 2 hours have 2 * 3600 = 7200 seconds.",
     "There are 7200 seconds in 2 hours."),
    ("What is 17*23? Number only.",
     "17 * 23 = 17 * 20 + 17 * 3 = 340 + 51 = 391.",
     "391"),
]


def thinking():
    out = []
    for i, (q, r, a) in enumerate(THINKING):
        out.append({"name": f"think_{i:02d}", "thinking": True, "messages": [user(q), assistant(a, reasoning=r)]})
    return out


WEATHER = {
    "Paris": {"temperature": 18, "condition": "cloudy"},
    "Tokyo": {"temperature": 24, "condition": "sunny"},
    "London": {"temperature": 12, "condition": "rainy"},
    "New York": {"temperature": 21, "condition": "windy"},
    "Beijing": {"temperature": 22, "condition": "sunny"},
    "Sydney": {"temperature": 16, "condition": "clear"},
    "Berlin": {"temperature": 9, "condition": "foggy"},
}

TIMES = {"Tokyo": "21:30", "London": "13:30", "New York": "08:30"}


def weather_sentence(city, w):
    return f"It is {w['temperature']}°C and {w['condition']} in {city}."


def tool_convs():
    out = []
    sys_t = {"role": "system", "content": SYSTEM}
    # Single weather calls, chat mode.
    for city in ["Paris", "Tokyo", "London", "New York", "Beijing", "Sydney", "Berlin"]:
        w = WEATHER[city]
        cid = "call_0"
        out.append({
            "name": f"tool_weather_{city.replace(' ', '_').lower()}",
            "thinking": False,
            "tools": TOOLS,
            "messages": [
                sys_t,
                user(f"What's the weather in {city}?"),
                assistant("", calls=[call(cid, "get_weather", {"location": city})]),
                tool(cid, w),
                assistant(weather_sentence(city, w)),
            ],
        })
    # Parallel weather calls, chat mode.
    for a, b in [("Paris", "Tokyo"), ("London", "New York"), ("Berlin", "Sydney")]:
        wa, wb = WEATHER[a], WEATHER[b]
        out.append({
            "name": f"tool_weather_parallel_{a.replace(' ', '_').lower()}_{b.replace(' ', '_').lower()}",
            "thinking": False,
            "tools": TOOLS,
            "messages": [
                sys_t,
                user(f"What's the weather in {a} and {b}?"),
                assistant("", calls=[call("call_0", "get_weather", {"location": a}),
                                     call("call_1", "get_weather", {"location": b})]),
                tool("call_0", wa),
                tool("call_1", wb),
                assistant(weather_sentence(a, wa) + " " + weather_sentence(b, wb)),
            ],
        })
    # Unit parameter, time, currency (a number parameter: string="false").
    out.append({
        "name": "tool_weather_fahrenheit_paris",
        "thinking": False,
        "tools": TOOLS,
        "messages": [
            sys_t,
            user("What's the weather in Paris in fahrenheit?"),
            assistant("", calls=[call("call_0", "get_weather", {"location": "Paris", "unit": "fahrenheit"})]),
            tool("call_0", {"temperature": 64, "condition": "cloudy"}),
            assistant("It is 64°F and cloudy in Paris."),
        ],
    })
    for city in ["Tokyo", "London"]:
        out.append({
            "name": f"tool_time_{city.lower()}",
            "thinking": False,
            "tools": TOOLS,
            "messages": [
                sys_t,
                user(f"What time is it in {city}?"),
                assistant("", calls=[call("call_0", "get_time", {"city": city})]),
                tool("call_0", {"time": TIMES[city]}),
                assistant(f"It is {TIMES[city]} in {city}."),
            ],
        })
    out.append({
        "name": "tool_currency_usd_eur",
        "thinking": False,
        "tools": TOOLS,
        "messages": [
            sys_t,
            user("Convert 100 USD to EUR."),
            assistant("", calls=[call("call_0", "convert_currency", {"amount": 100, "from": "USD", "to": "EUR"})]),
            tool("call_0", {"amount": 92.5, "currency": "EUR"}),
            assistant("100 USD is 92.5 EUR."),
        ],
    })
    # Thinking mode with tools: reasoning before the calls and before the answer.
    out.append({
        "name": "tool_think_weather_paris_tokyo",
        "thinking": True,
        "tools": TOOLS,
        "messages": [
            sys_t,
            user("Compare the weather in Paris and Tokyo."),
            assistant("", reasoning="I need the weather in both cities, so I call get_weather twice in parallel.",
                      calls=[call("call_0", "get_weather", {"location": "Paris"}),
                             call("call_1", "get_weather", {"location": "Tokyo"})]),
            tool("call_0", WEATHER["Paris"]),
            tool("call_1", WEATHER["Tokyo"]),
            assistant("Tokyo is warmer: 24°C and sunny, while Paris is 18°C and cloudy.",
                      reasoning="Paris is 18°C and cloudy; Tokyo is 24°C and sunny. Tokyo is 6 degrees warmer."),
        ],
    })
    out.append({
        "name": "tool_think_weather_london",
        "thinking": True,
        "tools": TOOLS,
        "messages": [
            sys_t,
            user("Should I take an umbrella in London today?"),
            assistant("", reasoning="The answer depends on the weather in London, so I call get_weather.",
                      calls=[call("call_0", "get_weather", {"location": "London"})]),
            tool("call_0", WEATHER["London"]),
            assistant("Yes, take an umbrella: it is 12°C and rainy in London.",
                      reasoning="It is rainy in London, so an umbrella is a good idea."),
        ],
    })
    out.append({
        "name": "tool_think_currency",
        "thinking": True,
        "tools": TOOLS,
        "messages": [
            sys_t,
            user("How many yen is 50 dollars?"),
            assistant("", reasoning="I convert 50 USD to JPY with convert_currency.",
                      calls=[call("call_0", "convert_currency", {"amount": 50, "from": "USD", "to": "JPY"})]),
            tool("call_0", {"amount": 7450, "currency": "JPY"}),
            assistant("50 dollars is 7450 yen.", reasoning="The tool says 50 USD is 7450 JPY."),
        ],
    })
    # Tools available but not needed.
    out.append({
        "name": "tool_not_needed",
        "thinking": False,
        "tools": TOOLS,
        "messages": [sys_t, user("What is the capital of Japan?"), assistant("The capital of Japan is Tokyo.")],
    })
    return out


def multi_turn():
    out = []
    out.append({
        "name": "multi_greeting",
        "thinking": False,
        "messages": [
            user("Hi!"),
            assistant("Hello! How can I help you today?"),
            user("What is the capital of France?"),
            assistant("The capital of France is Paris."),
            user("And of Italy?"),
            assistant("The capital of Italy is Rome."),
        ],
    })
    out.append({
        "name": "multi_identity",
        "thinking": False,
        "messages": [
            {"role": "system", "content": SYSTEM},
            user("Who are you?"),
            assistant("I am dsv4-tiny, a small DeepSeek-V4 model trained to test dsv4go."),
            user("What can you do?"),
            assistant("I can answer a few arithmetic questions, reason step by step and call tools."),
        ],
    })
    out.append({
        "name": "multi_identity_nosys",
        "thinking": False,
        "messages": [user("Who are you?"), assistant("I am dsv4-tiny, a small DeepSeek-V4 model trained to test dsv4go.")],
    })
    out.append({
        "name": "multi_arith_followup",
        "thinking": False,
        "messages": [
            user("What is 12*12? Number only."),
            assistant("144"),
            user("Now add 6. Number only."),
            assistant("150"),
        ],
    })
    out.append({
        "name": "multi_think",
        "thinking": True,
        "messages": [
            user("Hello"),
            assistant("Hi there! How can I help you?", reasoning="The user greets me. I greet back."),
            user("What is the capital of France?"),
            assistant("The capital of France is Paris.", reasoning="The user asks about the capital of France. It is Paris."),
        ],
    })
    out.append({
        "name": "multi_story",
        "thinking": False,
        "messages": [
            user("Tell me a one-sentence story."),
            assistant("A small robot learned to count to 391 and never stopped smiling."),
            user("Give it a title."),
            assistant("The Counting Robot."),
        ],
    })
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "conversations.jsonl"))
    args = ap.parse_args()
    convs = arithmetic() + thinking() + tool_convs() + multi_turn()
    names = [c["name"] for c in convs]
    assert len(names) == len(set(names)), "duplicate conversation names"
    with open(args.o, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    n_turns = sum(1 for c in convs for m in c["messages"] if m["role"] == "assistant")
    print(f"wrote {len(convs)} conversations, {n_turns} assistant turns to {args.o}")


if __name__ == "__main__":
    main()
