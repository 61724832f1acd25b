#!/usr/bin/env python3
"""Generate the tokenizer golden corpus for dsv4go's tokenizer package.

Oracle: Hugging Face `tokenizers` (Rust, through its Python binding; pinned in
tools/requirements.txt). The script builds a deterministic corpus of >= 5,000 strings
(many scripts, CJK, emoji with ZWJ sequences, combining marks, code, runs of spaces,
tabs, CRLF, digits, added-token literals, random bytes decoded as UTF-8, random code
points) and records, for the DeepSeek V3 and V4 tokenizers committed in
tokenizer/testdata/, the ids HF produces:

  * "v3", "v4": Tokenizer.encode(text, add_special_tokens=False) with every added
    token matched (HF default);
  * "v3_es", "v4_es": the same with `encode_special_tokens = True` (special added
    tokens are not matched and are tokenized as text), stored only where they differ.

It also records HF decode() outputs for random id sequences (skip_special_tokens off
and on), which exercise the UTF-8 lossy replacement of partial byte sequences.

HF tokenizers runs the Split regexes with Oniguruma, whose Unicode tables are at
version 16.0 (checked: U+135A6, new in 16.0, is a letter there; letters new in 17.0
are not), while Go's unicode package is at 15.0. The script therefore also writes
tokenizer/unicode16_table.go, the general-category classes (L, M, N, P, S) of Unicode
16.0 from `unicodedata2` 16.0.0, which the package's scanners use.

Outputs (gzipped JSON lines, deterministic for a given seed and tokenizers version):
  tokenizer/testdata/corpus.jsonl.gz   one {"text", "v3", "v4", ["v3_es"], ["v4_es"]} per line
  tokenizer/testdata/decode.jsonl.gz   one {"tok", "ids", "text", "text_skip"} per line
  tokenizer/testdata/flags.jsonl.gz    added tokens with lstrip/rstrip/single_word flags
                                       (first line: {"added": [...]}, appended to the V3
                                       tokenizer), then {"text", "ids", "ids_es"} lines
  tokenizer/testdata/pretok.jsonl.gz   other pre-tokenizers (GPT-2 ByteLevel regex, prefix
                                       space, every Split behaviour, invert, String
                                       patterns) put in the V3 tokenizer: per variant a
                                       {"variant", "pre_tokenizer"} line, then {"text", "ids"}

Run from the repository root:
  tools/.venv/bin/python tools/gen_tokenizer_goldens.py

A larger, uncommitted random corpus for a one-off check (the Go test
TestExtraCorpusEqualsHF reads it when TOKENIZER_EXTRA_CORPUS names the file):
  tools/.venv/bin/python tools/gen_tokenizer_goldens.py --extra 50000 /tmp/extra.jsonl.gz
"""

import gzip
import json
import os
import random
import sys

import tokenizers
import unicodedata2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TD = os.path.join(ROOT, "tokenizer", "testdata")
SEED = 20261129
N_TARGET = 5200


def load(name):
    with gzip.open(os.path.join(TD, name, "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        return tokenizers.Tokenizer.from_str(f.read())


SENTENCES = [
    "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ",
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they've said we'll go, isn't it? You'd think so.",
    "Der Äpfel-Überfluss lässt grüßen: Straße, Maß, Fuß.",
    "L'été dernier, nous sommes allés à Montréal — c'était génial !",
    "¿Dónde está la biblioteca? ¡Allí, señor!",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "مرحبا بالعالم! كيف حالك اليوم؟ ١٢٣٤٥٦٧٨٩٠",
    "שלום עולם, מה שלומך?",
    "नमस्ते दुनिया, आप कैसे हैं? ०१२३४५६७८९",
    "আমি বাংলায় গান গাই।",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "今天天气很好，我们去公园散步吧。机器学习和深度学习是人工智能的重要分支。",
    "東京は日本の首都です。ひらがな、カタカナ、漢字を使います。ｶﾀｶﾅ半角",
    "안녕하세요 세계! 한국어 텍스트입니다.",
    "Tiếng Việt có nhiều dấu: ă â đ ê ô ơ ư, ạ ả ã á à.",
    "தமிழ் ஒரு பழமையான மொழி.",
    "ქართული ენა ძალიან ლამაზია.",
    "Հայերեն լեզու",
    "ሰላም ለዓለም",
    "ᐊᐃᖓᐃ ᓄᓇᕗᑦ",
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǵ̗̻̅o̟̯͙ͪ̈ text with combining marks",
    "e\u0301 vs é, n\u0303 vs ñ, A\u030a vs Å",
    "👩‍👩‍👧‍👦 family, 👨🏽‍💻 coder, 🏳️‍🌈 flag, 🇺🇳🇯🇵 flags, ❤️‍🔥, 🧑‍🤝‍🧑",
    "Emoji run: 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇 and ✌🏿👍🏻",
    "Math: ∀x∈ℝ, x² ≥ 0; ∑_{i=1}^{n} i = n(n+1)/2; √2 ≈ 1.41421356; ½ ¾ ⅞ Ⅻ ⑳",
    "Prices: $1,234.56, €99, ¥10000, £3.50, 12% off, 3.14159e-10",
    "Phone +1 (555) 010-9999, date 2026-11-29T19:53:55Z, IP 192.168.0.1",
    "tabs\tbetween\t\twords\t\t\tand\ttrailing\t",
    "line one\r\nline two\r\n\r\nline four\n\n\n  indented\n\tTabbed",
    "    four leading spaces and trailing    ",
    "a  b   c    d     e      f",
    "\u00a0non-breaking\u00a0spaces\u2003em\u2003space\u3000ideographic\u3000space",
    "zero\u200bwidth\u200cjoiner\u200dtest\ufeffbom",
    "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hi<｜Assistant｜>",
    '...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
    "<dsml:call> and </dsml:call> and <|EOT|> and <|place_holder_mm_span_0021|>",
    "<｜fim▁begin｜>def f(x):<｜fim▁hole｜>\n    return x<｜fim▁end｜>",
    "<｜place▁holder▁no▁7｜><｜place▁holder▁no▁798｜><｜place▁holder▁no▁799｜>",
    "<｜User <｜User｜｜> <｜Use｜> <think <think>> </think </think>>",
    "ＦＵＬＬＷＩＤＴＨ　ｌｅｔｔｅｒｓ　１２３",
    "Mixed中文English混合text和数字123456789",
    "ąčęėįšųūž ĄČĘĖĮŠŲŪŽ ÇĞİÖŞÜ çğıöşü",
    "Ꭰ Ꭱ Ꭲ Cherokee, ᚠᚢᚦᚨᚱᚲ runes, 𐌰𐌱𐌲 Gothic, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters",
]

CODE = [
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Printf("%d\\n", i*i)\n\t}\n}\n',
    'const x = {a: 1, "b": [2, 3], c: () => x?.a ?? null}; // comment\nconsole.log(`tmpl ${x.a}`);',
    '{"name": "dsv4go", "version": "0.1.0", "ids": [1, 2, 3], "nested": {"k": null, "t": true}}',
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>T</title></head>\n<body class="x-y">&nbsp;&lt;p&gt;</body></html>',
    "SELECT u.id, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 100 GROUP BY u.id;",
    "#include <stdio.h>\nint main(void){printf(\"hi\\n\");return 0;}\r\n",
    "fn main() { let v: Vec<u8> = vec![1,2,3]; println!(\"{:?}\", v.iter().map(|x| x << 2).collect::<Vec<_>>()); }",
    "$ git commit -m 'fix: edge-case' && ./run.sh --flag=value 2>&1 | tee log.txt",
    "x_1 = y__2 + __init__ - self._private; CONST_VALUE=0xFF; arr[i+1]->next",
    "\\begin{equation} E = mc^2 \\end{equation} % LaTeX",
    "    if (a && b || !c) { return a->b.c[0]; } else { return -1; }",
]

WS = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\u0085"]

EMOJI = [
    "👩‍👩‍👧‍👦", "👨🏽‍💻", "🏳️‍🌈", "🇺🇳", "❤️‍🔥", "🧑‍🤝‍🧑", "😀", "👍🏻", "🫠", "🦀", "✅", "⚠️", "1️⃣", "#️⃣",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👁️‍🗨️",
]


def special_literals(tok_json_names):
    out = []
    for name in tok_json_names:
        with gzip.open(os.path.join(TD, name, "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
            d = json.load(f)
        out.extend(a["content"] for a in d["added_tokens"])
    return sorted(set(out))


def rand_codepoint(rng):
    # Mostly assigned planes; avoid surrogates (not representable).
    while True:
        r = rng.random()
        if r < 0.4:
            c = rng.randrange(0x20, 0x3000)
        elif r < 0.7:
            c = rng.randrange(0x3000, 0x10000)
        elif r < 0.9:
            c = rng.randrange(0x10000, 0x20000)
        else:
            c = rng.randrange(0x20000, 0x110000)
        if 0xD800 <= c <= 0xDFFF:
            continue
        return chr(c)


def build_corpus():
    rng = random.Random(SEED)
    specials = special_literals(["deepseek-v3", "deepseek-v4"])
    named = [s for s in specials if "place_holder" not in s and "place▁holder▁no" not in s] + \
        rng.sample([s for s in specials if "place" in s], 40)
    corpus = []
    seen = set()

    def add(s):
        if s not in seen:
            seen.add(s)
            corpus.append(s)

    for s in SENTENCES + CODE:
        add(s)
    for s in named:
        add(s)
        add("x" + s + "y")
        add(" " + s + " ")
    # words of the fixed sentences, and substrings of them
    frags = []
    for s in SENTENCES + CODE:
        frags.extend(s.split(" "))
        frags.extend(s.split("\n"))
    frags = [f for f in frags if f]
    for s in SENTENCES + CODE:
        for _ in range(6):
            i = rng.randrange(len(s))
            j = rng.randrange(i, len(s) + 1)
            add(s[i:j])
    # whitespace runs and combinations
    for a in WS:
        for n in (1, 2, 3, 7, 16):
            add(a * n)
            add("x" + a * n + "y")
            add(a * n + "word")
            add("word" + a * n)
            add("1" + a * n + "2")
            add("." + a * n + "!")
    for _ in range(300):
        add("".join(rng.choice(WS) for _ in range(rng.randrange(1, 8))).join(
            rng.choice(frags) for _ in range(rng.randrange(2, 5))))
    # digits
    for _ in range(200):
        n = rng.randrange(1, 30)
        ds = "".join(rng.choice("0123456789") for _ in range(n))
        add(ds)
        add("v" + ds + "x " + ds[: n // 2] + "." + ds[n // 2:])
    for d in ["١٢٣٤٥", "०१२३", "①②③④", "²³¹", "½⅓¼", "ⅠⅡⅢⅣⅤ", "𝟙𝟚𝟛", "١2३4"]:
        add(d)
        add("abc" + d + "def")
    # emoji
    for _ in range(300):
        k = rng.randrange(1, 6)
        add("".join(rng.choice(EMOJI + [" ", "a", "中", "!", "\u200d", "\ufe0f"]) for _ in range(k)))
    # combining marks
    for _ in range(200):
        base = rng.choice("aeiouxyzAEIOUабв中ñ ")
        marks = "".join(chr(rng.randrange(0x300, 0x370)) for _ in range(rng.randrange(1, 6)))
        add(rng.choice(frags) + base + marks + rng.choice(["", " ", "x", "!", "1"]))
    # special-token literals embedded in text, including partial ones
    for _ in range(500):
        sp = rng.choice(named)
        cut = rng.random()
        if cut < 0.2 and len(sp) > 2:
            sp = sp[: rng.randrange(1, len(sp))]
        parts = [rng.choice(frags), sp, rng.choice(frags)]
        if rng.random() < 0.5:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(named))
        add(rng.choice(["", " ", "\n"]).join(parts))
    # random bytes decoded as UTF-8 (U+FFFD replacements, stray valid sequences)
    for _ in range(600):
        n = rng.randrange(1, 48)
        b = bytes(rng.randrange(256) for _ in range(n))
        add(b.decode("utf-8", errors="replace"))
    # random UTF-8 encodings of random code points
    for _ in range(600):
        add("".join(rand_codepoint(rng) for _ in range(rng.randrange(1, 20))))
    # random mixtures of fragments
    while len(corpus) < N_TARGET:
        k = rng.randrange(1, 8)
        pieces = []
        for _ in range(k):
            r = rng.random()
            if r < 0.5:
                pieces.append(rng.choice(frags))
            elif r < 0.65:
                pieces.append(rng.choice(WS) * rng.randrange(1, 4))
            elif r < 0.75:
                pieces.append(rng.choice(EMOJI))
            elif r < 0.85:
                pieces.append(str(rng.randrange(10 ** rng.randrange(1, 12))))
            elif r < 0.92:
                pieces.append(rng.choice(named))
            else:
                pieces.append(rand_codepoint(rng))
        add(rng.choice(["", " ", "", "\n"]).join(pieces))
    # a few long documents
    for _ in range(20):
        add("\n".join(rng.choice(SENTENCES + CODE) for _ in range(rng.randrange(5, 30))))
    return corpus


def write_unicode_table():
    assert unicodedata2.unidata_version == "16.0.0", unicodedata2.unidata_version
    bit = {"L": 1, "M": 2, "N": 4, "P": 8, "S": 16}
    runs = []  # [lo, hi, bits]
    for c in range(0x80, 0x110000):
        b = 0 if 0xD800 <= c <= 0xDFFF else bit.get(unicodedata2.category(chr(c))[0], 0)
        if runs and runs[-1][2] == b and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c, b])
    runs = [r for r in runs if r[2]]
    lines = [
        "// Code generated by tools/gen_tokenizer_goldens.py from unicodedata2 16.0.0; DO NOT EDIT.",
        "",
        "package tokenizer",
        "",
        "// unicode16 lists, for runes >= 0x80, the maximal ranges [lo, hi] of one general-category",
        "// class of Unicode 16.0 (the version of Oniguruma in HF tokenizers): 1 L, 2 M, 4 N, 8 P,",
        "// 16 S. Runes in no range are in none of these classes.",
        "var unicode16 = [...]classRange{",
    ]
    for lo, hi, b in runs:
        lines.append(f"\t{{0x{lo:X}, 0x{hi:X}, {b}}},")
    lines.append("}")
    with open(os.path.join(ROOT, "tokenizer", "unicode16_table.go"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(runs)


FLAG_TOKENS = [
    {"id": 128815, "content": "[MASK]", "single_word": False, "lstrip": True, "rstrip": False,
     "normalized": False, "special": True},
    {"id": 128816, "content": "<rs>", "single_word": False, "lstrip": False, "rstrip": True,
     "normalized": True, "special": False},
    {"id": 128817, "content": "hello", "single_word": True, "lstrip": False, "rstrip": False,
     "normalized": False, "special": False},
    {"id": 128818, "content": "<both>", "single_word": False, "lstrip": True, "rstrip": True,
     "normalized": True, "special": True},
    {"id": 128819, "content": "ΩΩ", "single_word": True, "lstrip": True, "rstrip": False,
     "normalized": True, "special": False},
    {"id": 128820, "content": "[MASK]X", "single_word": False, "lstrip": False, "rstrip": True,
     "normalized": True, "special": False},
]


def write_flags():
    with gzip.open(os.path.join(TD, "deepseek-v3", "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    d["added_tokens"].extend(FLAG_TOKENS)
    tok = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok_es = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok_es.encode_special_tokens = True
    rng = random.Random(SEED + 2)
    parts = ["[MASK]", "<rs>", "hello", "<both>", "ΩΩ", "[MASK]X", " ", "  ", "\t", "\n", "\u3000", "x", "hello",
             "helloworld", "ΩΩΩ", "ß", "1", "_", "é", "\u0301", "!", "<｜User｜>", "<｜begin▁of▁sentence｜>"]
    n = 0
    with gzip.GzipFile(os.path.join(TD, "flags.jsonl.gz"), "wb", mtime=0) as gz:
        gz.write((json.dumps({"added": FLAG_TOKENS}, ensure_ascii=False) + "\n").encode("utf-8"))
        for _ in range(1500):
            text = "".join(rng.choice(parts) for _ in range(rng.randrange(1, 9)))
            rec = {"text": text, "ids": tok.encode(text, add_special_tokens=False).ids,
                   "ids_es": tok_es.encode(text, add_special_tokens=False).ids}
            gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
            n += 1
    return n


def _split(pattern, behavior, invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern},
            "behavior": behavior, "invert": invert}


_BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}

PRETOK_VARIANTS = {
    "bytelevel_regex": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "bytelevel_prefix": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "removed": {"type": "Sequence", "pretokenizers": [_split(r"\s+", "Removed"), _BL]},
    "merged_prev": {"type": "Sequence", "pretokenizers": [_split(r"\s+", "MergedWithPrevious"), _BL]},
    "merged_next": {"type": "Sequence", "pretokenizers": [_split(r"\s+", "MergedWithNext"), _BL]},
    "contiguous": {"type": "Sequence", "pretokenizers": [_split(r"\p{N}", "Contiguous"), _BL]},
    "invert_isolated": {"type": "Sequence", "pretokenizers": [_split(r"\p{L}+", "Isolated", True), _BL]},
    "invert_removed": {"type": "Sequence", "pretokenizers": [_split(r"\p{L}+", "Removed", True), _BL]},
    "invert_merged_prev": {"type": "Sequence", "pretokenizers": [_split(r"[.!?]", "MergedWithPrevious", True), _BL]},
    "string": {"type": "Sequence", "pretokenizers": [_split(" ", "Isolated", literal=True),
                                                     _split("ab", "MergedWithNext", literal=True), _BL]},
}


def write_pretok(corpus):
    with gzip.open(os.path.join(TD, "deepseek-v3", "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    texts = corpus[:60] + corpus[-20:] + ["ab abab  ab\t1 22 333 a1b2", "  lead and trail  ", "Hi! Ho? Hu.", ""]
    n = 0
    with gzip.GzipFile(os.path.join(TD, "pretok.jsonl.gz"), "wb", mtime=0) as gz:
        for name, pre in PRETOK_VARIANTS.items():
            d["pre_tokenizer"] = pre
            tok = tokenizers.Tokenizer.from_str(json.dumps(d))
            gz.write((json.dumps({"variant": name, "pre_tokenizer": pre}) + "\n").encode("utf-8"))
            for t in texts:
                rec = {"text": t, "ids": tok.encode(t, add_special_tokens=False).ids}
                gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
                n += 1
    return n


EXTRA_POOL = (
    list("aZé中あカ한б0719²!'\"-._`~{$+<=、。！（«—…€©∑😀👩 \t\n\r") +
    ["\r\n", "\u200d", "\ufe0f", "\u0301", "\u093f", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b",
     "\ufffd", "<｜User｜>", "<think>", "｜DSML｜", "<｜end▁of▁sentence｜>", "<dsml:", "<", "｜", "ab", "the", " the",
     "  ", "    ", "123", "1234"]
)


def write_extra(n, path):
    v3, v4 = load("deepseek-v3"), load("deepseek-v4")
    rng = random.Random(SEED + 3)
    with gzip.GzipFile(path, "wb", mtime=0) as gz:
        for _ in range(n):
            k = rng.randrange(1, 30)
            parts = []
            for _ in range(k):
                parts.append(rand_codepoint(rng) if rng.random() < 0.15 else rng.choice(EXTRA_POOL))
            s = "".join(parts)
            rec = {"text": s, "v3": v3.encode(s, add_special_tokens=False).ids,
                   "v4": v4.encode(s, add_special_tokens=False).ids}
            gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
    print(f"wrote {n} strings to {path}", file=sys.stderr)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--extra":
        write_extra(int(sys.argv[2]), sys.argv[3])
        return
    n_ranges = write_unicode_table()
    n_flags = write_flags()
    v3 = load("deepseek-v3")
    v4 = load("deepseek-v4")
    v3es = load("deepseek-v3")
    v3es.encode_special_tokens = True
    v4es = load("deepseek-v4")
    v4es.encode_special_tokens = True
    corpus = build_corpus()
    n_pretok = write_pretok(corpus)
    n_es = 0
    with gzip.GzipFile(os.path.join(TD, "corpus.jsonl.gz"), "wb", mtime=0) as gz:
        for s in corpus:
            rec = {"text": s}
            for key, tok in (("v3", v3), ("v4", v4)):
                rec[key] = tok.encode(s, add_special_tokens=False).ids
            for key, tok, base in (("v3_es", v3es, "v3"), ("v4_es", v4es, "v4")):
                ids = tok.encode(s, add_special_tokens=False).ids
                if ids != rec[base]:
                    rec[key] = ids
                    n_es += 1
            gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
    # decode goldens: random id sequences
    rng = random.Random(SEED + 1)
    n_dec = 0
    with gzip.GzipFile(os.path.join(TD, "decode.jsonl.gz"), "wb", mtime=0) as gz:
        for name, tok in (("v3", v3), ("v4", v4)):
            vs = tok.get_vocab_size(with_added_tokens=True)
            maxid = max(tok.get_vocab(with_added_tokens=True).values())
            for i in range(400):
                n = rng.randrange(0, 40)
                ids = []
                for _ in range(n):
                    r = rng.random()
                    if r < 0.6:
                        ids.append(rng.randrange(3, 259))  # raw byte tokens: partial UTF-8
                    elif r < 0.9:
                        ids.append(rng.randrange(0, 128000))
                    else:
                        ids.append(rng.randrange(128000, maxid + 1))
                rec = {"tok": name, "ids": ids,
                       "text": tok.decode(ids, skip_special_tokens=False),
                       "text_skip": tok.decode(ids, skip_special_tokens=True)}
                gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
                n_dec += 1
    print(f"tokenizers {tokenizers.__version__}: {len(corpus)} corpus strings "
          f"({n_es} encode_special_tokens variants), {n_dec} decode cases, "
          f"{n_ranges} Unicode 16.0 class ranges, {n_flags} added-token flag cases, "
          f"{n_pretok} pre-tokenizer cases", file=sys.stderr)


if __name__ == "__main__":
    main()
