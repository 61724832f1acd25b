package parse

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Peer cases re-expressed as data. Sources (inputs and expected results,
// not code): DeepSeek's reference encoder encoding_dsv4.py and its test
// vectors (dsv4-formats.md §3.1), vLLM tests/tool_parsers/test_deepseekv{3,31,32,4}_tool_parser.py
// and tests/reasoning/test_deepseek{r1,v3,v4}_reasoning_parser.py, SGLang
// test_deepseekv{31,32}_detector.py and test_reasoning_parser.py,
// TensorRT-LLM PR #17573, SGLang PR #31351, ai-dynamo
// lib/llm/tests/data/vllm/deepseek-*/ recorded streams (test-data.md §3, §2.4).
// Where our result differs from a peer on purpose the case says why.

// Abbreviations of the V3 / V3.1 markers (test-data.md §3).
const (
	SB  = v3CallsBegin
	SE  = v3CallsEnd
	CB  = v3CallBegin
	CE  = v3CallEnd
	SEP = v3Sep
	EOS = eosToken
)

// f28Head is the start of BREAKER F28's output, up to a string value.
const f28Head = "Sure.<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">"

// dsmlBlock builds a DSML block the way the reference encoder renders one.
type dparam struct{ name, str, val string }
type dinvoke struct {
	name   string
	params []dparam
}

func dsml(block string, invokes ...dinvoke) string {
	var b strings.Builder
	b.WriteString("<｜DSML｜" + block + ">\n")
	for i, inv := range invokes {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(`<｜DSML｜invoke name="` + inv.name + "\">\n")
		for j, p := range inv.params {
			if j > 0 {
				b.WriteString("\n")
			}
			b.WriteString(`<｜DSML｜parameter name="` + p.name + `" string="` + p.str + `">` + p.val + "</｜DSML｜parameter>")
		}
		if len(inv.params) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("</｜DSML｜invoke>")
	}
	b.WriteString("\n</｜DSML｜" + block + ">")
	return b.String()
}

// vllmV4Block is vLLM's build_tool_call helper output shape: every
// parameter string="true", each followed by "\n".
func vllmV4Block(name string, kv ...string) string {
	var b strings.Builder
	b.WriteString("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"" + name + "\">\n")
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(`<｜DSML｜parameter name="` + kv[i] + `" string="true">` + kv[i+1] + "</｜DSML｜parameter>\n")
	}
	b.WriteString("</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
	return b.String()
}

type call struct{ name, args string }

type peerCase struct {
	name   string
	opts   Options
	in     string   // whole text (chunks joined when chunks is set)
	chunks []string // recorded / peer chunking, optional
	rc     string   // reasoning_content
	ct     string   // content
	calls  []call
	diags  []error // expected diagnostic kinds, in order
}

var (
	optV4Think = Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true}
	optV4Chat  = Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4"}
	optV4Tools = Options{Tools: "deepseek_v4"}
	optV32     = Options{Tools: "deepseekv32"}
	optV31     = Options{Tools: "deepseekv31"}
	optV3      = Options{Tools: "deepseekv3"}
	optR1      = Options{Reasoning: "deepseek-r1"}
)

func tools(decl ...string) []Tool {
	// decl: name, schema, name, schema ...
	var out []Tool
	for i := 0; i+1 < len(decl); i += 2 {
		out = append(out, Tool{Name: decl[i], Parameters: json.RawMessage(decl[i+1])})
	}
	return out
}

func withTools(o Options, coerce bool, t []Tool) Options {
	o.ToolsDecl = t
	o.Coerce = coerce
	return o
}

func peerCases() []peerCase {
	weather := tools("get_weather", `{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}}}`)
	p9 := tools(
		"toggle", `{"type":"object","properties":{"enabled":{"type":"boolean"},"count":{"type":"integer"}}}`,
		"set_value", `{"type":"object","properties":{"value":{"type":"integer"}}}`,
		"set_text", `{"type":"object","properties":{"text":{"type":"string"}}}`,
		"set_nullable", `{"type":"object","properties":{"value":{"type":["integer","null"]}}}`,
		"schedule", `{"type":"object","properties":{"wait":{"anyOf":[{"type":"object"},{"type":"integer"}]},"patches":{"oneOf":[{"type":"array"},{"type":"null"}]}}}`,
		"get_weather", `{"type":"object","properties":{"location":{"type":"string"}}}`,
		"get_time", `{"type":"object","properties":{}}`,
		"measure", `{"type":"object","properties":{"ratio":{"type":"number"},"whole":{"type":"number"}}}`,
		"coerce", `{"type":"object","properties":{"union_value":{"type":["null","string"]},"bad_int":{"type":"integer"},"nullable_string":{"type":["null","string"]},"null_string":{"type":"string"},"whole_number":{"type":"number"}}}`,
		"set_val", `{"type":"object","properties":{"count":{"type":["integer","null"]},"label":{"type":["string","null"]}}}`,
		"set_timer", `{"type":"object","properties":{"wait":{"anyOf":[{"type":"object"},{"type":"null"}]}}}`,
		"emit", `{"type":"object","properties":{"text":{"type":"string"}}}`,
	)
	note := tools("write_note", `{"type":"object","properties":{"payload":{"type":"object"}}}`)

	fc := func(inv ...dinvoke) string { return dsml("function_calls", inv...) }
	tc := func(inv ...dinvoke) string { return dsml("tool_calls", inv...) }

	return []peerCase{
		// ---- DeepSeek reference parser (encoding_dsv4.py), dsv4-formats.md §3.1 ----
		{name: "dsv4/single-call-mixed-types", opts: optV4Think,
			in: "The user wants Beijing weather; call get_weather.</think>\n\n" + tc(dinvoke{"get_weather", []dparam{{"location", "true", "Beijing"}, {"days", "false", "3"}}}) + EOS,
			rc: "The user wants Beijing weather; call get_weather.", ct: "",
			calls: []call{{"get_weather", `{"location": "Beijing", "days": 3}`}}},
		{name: "dsv4/parallel-object-zero-params", opts: optV4Think,
			in: "Two independent lookups, do them in parallel.</think>Let me check both.\n\n" + tc(
				dinvoke{"search", []dparam{{"query", "true", "DeepSeek V4 release date"}, {"filters", "false", `{"lang": ["en", "zh"], "recent": true}`}}},
				dinvoke{"get_time", nil}) + EOS,
			rc: "Two independent lookups, do them in parallel.", ct: "Let me check both.",
			calls: []call{{"search", `{"query": "DeepSeek V4 release date", "filters": {"lang": ["en", "zh"], "recent": true}}`}, {"get_time", `{}`}}},
		{name: "dsv4/plain-answer", opts: optV4Think,
			in: "</think>Paris is the capital of France." + EOS, ct: "Paris is the capital of France."},
		{name: "dsv4/plain-answer-chat-mode", opts: optV4Chat,
			in: "Paris is the capital of France." + EOS, ct: "Paris is the capital of France."},
		{name: "dsv4/test-vector-1-first-turn", opts: withTools(optV4Think, false, weather),
			in:    "The user wants to know the weather in Beijing. I should use the get_weather tool.</think>\n\n" + tc(dinvoke{"get_weather", []dparam{{"location", "true", "Beijing"}, {"unit", "true", "celsius"}}}) + EOS,
			rc:    "The user wants to know the weather in Beijing. I should use the get_weather tool.",
			calls: []call{{"get_weather", `{"location": "Beijing", "unit": "celsius"}`}}},
		{name: "dsv4/test-vector-1-final-turn", opts: optV4Think,
			in: "Got the weather data. Let me format a nice response.</think>The weather in Beijing is currently sunny with a temperature of 22°C and 45% humidity." + EOS,
			rc: "Got the weather data. Let me format a nice response.", ct: "The weather in Beijing is currently sunny with a temperature of 22°C and 45% humidity."},
		{name: "dsv4/test-vector-2", opts: optV4Think,
			in: "The user asks about the capital of France. It is Paris.</think>The capital of France is Paris." + EOS,
			rc: "The user asks about the capital of France. It is Paris.", ct: "The capital of France is Paris."},

		// ---- vLLM test_deepseekv4_tool_parser.py ----
		{name: "vllm-v4/content-then-call", opts: optV4Tools,
			in: "Let me check. " + vllmV4Block("get_weather", "location", "Beijing", "unit", "celsius"),
			ct: "Let me check. ", calls: []call{{"get_weather", `{"location": "Beijing", "unit": "celsius"}`}}},
		{name: "vllm-v4/function_calls-block-is-content", opts: optV4Tools,
			in:    strings.ReplaceAll(vllmV4Block("search", "query", "vllm"), "tool_calls", "function_calls"),
			ct:    strings.ReplaceAll(vllmV4Block("search", "query", "vllm"), "tool_calls", "function_calls"),
			diags: []error{ErrStrayMarker}},
		{name: "vllm-v4/stream-5-byte-chunks", opts: optV4Tools,
			in: vllmV4Block("search", "query", "deepseek v4"), chunks: fixedChunks(vllmV4Block("search", "query", "deepseek v4"), 5),
			calls: []call{{"search", `{"query": "deepseek v4"}`}}},

		// ---- vLLM test_deepseekv4_reasoning_parser.py: tool block inside reasoning ----
		// vLLM keeps the "\n\n" in the reasoning; the reference format makes it
		// part of the block envelope, so we drop it, and flag the missing </think>.
		{name: "vllm-v4-reasoning/tool-block-ends-reasoning", opts: optV4Think,
			in:    "Let me search.\n\n" + tc(dinvoke{"read_file", []dparam{{"path", "true", "/tmp/example.lean"}}}),
			rc:    "Let me search.",
			calls: []call{{"read_file", `{"path": "/tmp/example.lean"}`}},
			diags: []error{ErrMissingThinkEnd}},

		// ---- SGLang test_deepseekv32_detector.py (P8): string="false" value that is not JSON ----
		{name: "sglang-v32/non-json-false-value-streamed", opts: withTools(optV32, false, note),
			chunks: []string{"<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"write_note\">\n", "<｜DSML｜parameter name=\"payload\" string=\"false\">Здра", "вствуйте, мир", "! Это тест", "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
			calls:  []call{{"write_note", `{"payload": "Здравствуйте, мир! Это тест"}`}},
			diags:  []error{ErrInvalidArguments}},
		{name: "sglang-v32/json-false-value-streamed", opts: withTools(optV32, false, note),
			chunks: []string{"<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"write_note\">\n", "<｜DSML｜parameter name=\"payload\" string=\"false\">{\"ci", "ty\": \"San", " Francisco\"}", "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
			calls:  []call{{"write_note", `{"payload": {"city": "San Francisco"}}`}}},
		{name: "sglang-v4/non-json-false-value-streamed", opts: withTools(optV4Tools, false, note),
			chunks: []string{"<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"write_note\">\n", "<｜DSML｜parameter name=\"payload\" string=\"false\">Здра", "вствуйте, мир", "! Это тест", "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
			calls:  []call{{"write_note", `{"payload": "Здравствуйте, мир! Это тест"}`}},
			diags:  []error{ErrInvalidArguments}},

		// ---- vLLM test_deepseekv32_tool_parser.py (P9): types and schema coercion ----
		{name: "vllm-v32/bool-and-int", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"toggle", []dparam{{"enabled", "false", "true"}, {"count", "false", "42"}}}),
			calls: []call{{"toggle", `{"enabled": true, "count": 42}`}}},
		{name: "vllm-v32/string-true-coerced-to-integer", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"set_value", []dparam{{"value", "true", "42"}}}),
			calls: []call{{"set_value", `{"value": 42}`}}},
		{name: "vllm-v32/string-true-kept-without-coercion", opts: withTools(optV32, false, p9),
			in:    fc(dinvoke{"set_value", []dparam{{"value", "true", "42"}}}),
			calls: []call{{"set_value", `{"value": "42"}`}}},
		{name: "vllm-v32/json-null-where-string-declared", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"set_text", []dparam{{"text", "false", "null"}}}),
			calls: []call{{"set_text", `{"text": "null"}`}}},
		{name: "vllm-v32/null-for-nullable-integer", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"set_nullable", []dparam{{"value", "false", "null"}}}),
			calls: []call{{"set_nullable", `{"value": null}`}}},
		{name: "vllm-v32/anyOf-oneOf-object-array", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"schedule", []dparam{{"wait", "false", `{"type":"for","minutes":2880}`}, {"patches", "false", `[{"op":"replace","path":"/a","value":1}]`}}}),
			calls: []call{{"schedule", `{"wait": {"type": "for", "minutes": 2880}, "patches": [{"op": "replace", "path": "/a", "value": 1}]}`}}},
		{name: "vllm-v32/unwrap-arguments", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"get_weather", []dparam{{"arguments", "false", `{"location":"Beijing"}`}}}),
			calls: []call{{"get_weather", `{"location": "Beijing"}`}}},
		{name: "vllm-v32/unwrap-input", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"get_weather", []dparam{{"input", "false", `{"location":"Beijing"}`}}}),
			calls: []call{{"get_weather", `{"location": "Beijing"}`}}},
		{name: "coerce/wrapper-followed-by-param-is-kept", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"get_weather", []dparam{{"arguments", "false", `{"location":"Beijing"}`}, {"location", "true", "Paris"}}}),
			calls: []call{{"get_weather", `{"arguments": {"location": "Beijing"}, "location": "Paris"}`}}},
		{name: "coerce/python-literals", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"toggle", []dparam{{"enabled", "true", "True"}, {"count", "true", " 7 "}}}, dinvoke{"set_nullable", []dparam{{"value", "true", "None"}}}),
			calls: []call{{"toggle", `{"enabled": true, "count": 7}`}, {"set_nullable", `{"value": null}`}}},
		{name: "vllm-v32/no-params", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"get_time", nil}),
			calls: []call{{"get_time", `{}`}}},
		{name: "vllm-v32/whole-float-number", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"measure", []dparam{{"ratio", "false", "3.14"}, {"whole", "false", "5.0"}}}),
			calls: []call{{"measure", `{"ratio": 3.14, "whole": 5}`}}},
		{name: "vllm-v32/fallback-mix", opts: withTools(optV32, true, p9),
			in: fc(dinvoke{"coerce", []dparam{{"union_value", "false", "hello"}, {"bad_int", "false", "abc"}, {"nullable_string", "false", "null"},
				{"null_string", "false", "null"}, {"whole_number", "false", "3.0"}}}),
			calls: []call{{"coerce", `{"union_value": "hello", "bad_int": "abc", "nullable_string": null, "null_string": "null", "whole_number": 3}`}},
			diags: []error{ErrInvalidArguments, ErrInvalidArguments}},
		{name: "vllm-v32/multi-typed", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"set_val", []dparam{{"count", "false", "42"}, {"label", "false", "hello"}}}),
			calls: []call{{"set_val", `{"count": 42, "label": "hello"}`}}, diags: []error{ErrInvalidArguments}},
		{name: "vllm-v32/string-true-coerced-by-composed-schema", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"set_timer", []dparam{{"wait", "true", `{"type":"for","minutes":2880}`}}}),
			calls: []call{{"set_timer", `{"wait": {"type": "for", "minutes": 2880}}`}}},
		{name: "vllm-v32/input-wrapper-string-true", opts: withTools(optV32, true, p9),
			in:    fc(dinvoke{"get_weather", []dparam{{"input", "true", `{"location":"Beijing"}`}}}),
			calls: []call{{"get_weather", `{"location": "Beijing"}`}}},
		{name: "vllm-v32/no-schema-parses-json", opts: optV32,
			in:    fc(dinvoke{"unknown_fn", []dparam{{"count", "false", "42"}, {"flag", "false", "true"}}}),
			calls: []call{{"unknown_fn", `{"count": 42, "flag": true}`}}},
		{name: "vllm-v32/params-without-newlines", opts: optV32,
			in:    "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">SF</｜DSML｜parameter><｜DSML｜parameter name=\"date\" string=\"true\">2024-01-16</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
			calls: []call{{"get_weather", `{"location": "SF", "date": "2024-01-16"}`}}},
		{name: "vllm-v32/false-partial-marker", opts: optV32,
			chunks: fixedChunks("<｜DSM some regular text", 3), ct: "<｜DSM some regular text"},
		{name: "vllm-v32/no-marker-leak-with-prefix", opts: optV32,
			chunks: fixedChunks("Hello!"+fc(dinvoke{"fn", []dparam{{"a", "true", "b"}}}), 5),
			ct:     "Hello!", calls: []call{{"fn", `{"a": "b"}`}}},
		{name: "vllm-v32/content-before-block", opts: optV32,
			in: "Sure, let me check! " + fc(dinvoke{"get_weather", []dparam{{"location", "true", "Tokyo"}}}),
			ct: "Sure, let me check! ", calls: []call{{"get_weather", `{"location": "Tokyo"}`}}},
		{name: "vllm-v32/parallel", opts: optV32,
			in:    fc(dinvoke{"get_weather", []dparam{{"location", "true", "Tokyo"}}}, dinvoke{"get_weather", []dparam{{"location", "true", "Paris"}}}),
			calls: []call{{"get_weather", `{"location": "Tokyo"}`}, {"get_weather", `{"location": "Paris"}`}}},

		// ---- vLLM test_deepseekv3_tool_parser.py (P1-P5) ----
		{name: "vllm-v3/single", opts: optV3,
			in:    SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}\n```" + CE + SE,
			calls: []call{{"get_weather", `{"city": "Tokyo", "unit": "celsius"}`}}},
		{name: "vllm-v3/parallel", opts: optV3,
			in: SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" + CE +
				CB + "function" + SEP + "search_hotels\n```json\n{\"location\": \"Tokyo\", \"check_in\": \"2025-01-15\"}\n```" + CE + SE,
			calls: []call{{"get_weather", `{"city": "Tokyo"}`}, {"search_hotels", `{"location": "Tokyo", "check_in": "2025-01-15"}`}}},
		{name: "vllm-v3/text-before", opts: optV3,
			in: "Let me check the weather for you." + SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + CE + SE,
			ct: "Let me check the weather for you.", calls: []call{{"get_weather", `{"city": "Paris"}`}}},
		{name: "vllm-v3/escaped-strings", opts: optV3,
			in:    SB + CB + "function" + SEP + "write\n```json\n{\"text\": \"He said \\\"hello\\\"\", \"path\": \"C:\\\\Users\\\\file\", \"newline\": \"line1\\nline2\"}\n```" + CE + SE,
			calls: []call{{"write", `{"text": "He said \"hello\"", "path": "C:\\Users\\file", "newline": "line1\nline2"}`}}},
		{name: "vllm-v3/various-types", opts: optV3,
			in:    SB + CB + "function" + SEP + "f\n```json\n{\"s\": \"x\", \"i\": 42, \"f\": 3.14, \"b\": true, \"n\": null, \"a\": [1, 2], \"o\": {\"k\": \"v\"}, \"ea\": [], \"eo\": {}}\n```" + CE + SE,
			calls: []call{{"f", `{"s": "x", "i": 42, "f": 3.14, "b": true, "n": null, "a": [1, 2], "o": {"k": "v"}, "ea": [], "eo": {}}`}}},
		{name: "vllm-v3/malformed-unclosed-json", opts: optV3,
			in:    SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"\n```" + CE + SE,
			ct:    SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"\n```" + CE + SE,
			diags: []error{ErrInvalidArguments, ErrMalformedToolCall}},
		{name: "vllm-v3/malformed-no-call-markers", opts: optV3,
			in:    SB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" + SE,
			ct:    SB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" + SE,
			diags: []error{ErrMalformedToolCall, ErrMalformedToolCall}},

		// ---- vLLM test_deepseekv31_tool_parser.py (P5, P6) ----
		{name: "vllm-v31/call-with-text", opts: optV31,
			in: "normal text" + SB + CB + "foo" + SEP + `{"x":1}` + CE + SE,
			ct: "normal text", calls: []call{{"foo", `{"x":1}`}}},
		// vLLM drops " some suffix text"; we keep it (never lose text) and flag it.
		{name: "vllm-v31/two-calls-suffix-kept", opts: optV31,
			in: "some prefix text" + SB + CB + "foo" + SEP + `{"x":1}` + CE + CB + "bar" + SEP + `{"y":2}` + CE + SE + " some suffix text",
			ct: "some prefix text some suffix text", calls: []call{{"foo", `{"x":1}`}, {"bar", `{"y":2}`}},
			diags: []error{ErrTextAfterToolCalls}},
		{name: "vllm-v31/unparsable-truncated", opts: optV31,
			in: "Let me look that up." + SB + " get_weather", ct: "Let me look that up." + SB + " get_weather",
			diags: []error{ErrMalformedToolCall, ErrUnterminatedToolCall}},
		{name: "vllm-v31/unparsable-no-call-begin", opts: optV31,
			in: SB + "foo" + SEP + `{"x":1}` + SE, ct: SB + "foo" + SEP + `{"x":1}` + SE,
			diags: []error{ErrMalformedToolCall, ErrMalformedToolCall}},

		// ---- SGLang test_deepseekv31_detector.py (P7) ----
		{name: "sglang-v31/two-calls-streamed", opts: optV31,
			chunks: []string{SB + CB + "get_weather" + SEP, `{"city": "Tokyo"}` + CE + CB + "get_weather" + SEP, `{"city": "Paris"}` + CE + SE},
			calls:  []call{{"get_weather", `{"city": "Tokyo"}`}, {"get_weather", `{"city": "Paris"}`}}},
		{name: "sglang-v31/progressive-args", opts: optV31,
			chunks: []string{SB + CB + "get_weather" + SEP, `{"city": "Tok`, `yo"}`, CE + SE},
			calls:  []call{{"get_weather", `{"city": "Tokyo"}`}}},

		// ---- SGLang test/registered/function_call DeepSeekV3/V31 detector tests ----
		// A malformed call does not discard the valid one before it; the bad
		// call's text stays content (without the block envelope).
		{name: "sglang-v3/malformed-call-keeps-valid-call", opts: withTools(optV3, false, tools("get_weather", `{"type":"object","properties":{}}`, "search", `{"type":"object","properties":{}}`)),
			in: "Sure. " + SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Boston\"}\n```" + CE +
				CB + "function" + SEP + "search\n```json\n{bad json\n```" + CE + SE,
			ct:    "Sure. " + CB + "function" + SEP + "search\n```json\n{bad json\n```" + CE,
			calls: []call{{"get_weather", `{"city": "Boston"}`}}, diags: []error{ErrInvalidArguments}},
		{name: "sglang-v31/malformed-call-keeps-valid-call", opts: withTools(optV31, false, tools("get_weather", `{"type":"object","properties":{}}`, "search", `{"type":"object","properties":{}}`)),
			in:    "Sure. " + SB + CB + "get_weather" + SEP + `{"city": "Boston"}` + CE + CB + "search" + SEP + "{bad json" + CE + SE,
			ct:    "Sure. " + CB + "search" + SEP + "{bad json" + CE,
			calls: []call{{"get_weather", `{"city": "Boston"}`}}, diags: []error{ErrInvalidArguments}},
		// SGLang strips the trailing blank of the leading text when parsing
		// whole text (but not when streaming); we keep the text as written.
		{name: "sglang-v3/leading-text-kept-verbatim", opts: optV3,
			in: "I will check the weather for you. " + SB + CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" + CE + SE,
			ct: "I will check the weather for you. ", calls: []call{{"get_weather", `{"city": "Tokyo"}`}}},
		{name: "sglang-v3/streaming-text-then-call", opts: optV3,
			chunks: []string{"Sure, let me check. ", SB + CB + "function" + SEP + "get_weather\n```json\n", `{"city": "Tokyo"}` + "\n```", CE + SE},
			ct:     "Sure, let me check. ", calls: []call{{"get_weather", `{"city": "Tokyo"}`}}},
		{name: "v31/coerce-to-schema", opts: withTools(optV31, true, tools("get_weather", `{"type":"object","properties":{"location":{"type":"string"},"days":{"type":"integer"}}}`)),
			in:    SB + CB + "get_weather" + SEP + `{"location":"北京","days":"3"}` + CE + SE,
			calls: []call{{"get_weather", `{"location": "北京", "days": 3}`}}},

		// ---- SGLang test_deepseek_dsml_streaming_normal_text (#34214) ----
		{name: "sglang-v4/content-in-opener-chunk", opts: optV4Tools,
			chunks: []string{"Sure, let me ", "look that up. ", "One moment please.\n\n" + vllmV4Block("get_current_weather", "city", "Beijing")},
			ct:     "Sure, let me look that up. One moment please.", calls: []call{{"get_current_weather", `{"city": "Beijing"}`}}},
		{name: "sglang-v32/opener-split-across-chunks", opts: optV32,
			chunks: []string{"Checking the forecast now.<｜DSML｜", strings.TrimPrefix(strings.ReplaceAll(vllmV4Block("get_current_weather", "city", "Beijing"), "tool_calls", "function_calls"), "<｜DSML｜")},
			ct:     "Checking the forecast now.", calls: []call{{"get_current_weather", `{"city": "Beijing"}`}}},
		{name: "sglang-v4/bare-invoke", opts: optV4Tools,
			in: "Here you go.\n\n<｜DSML｜invoke name=\"get_current_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Beijing</｜DSML｜parameter>\n</｜DSML｜invoke>",
			ct: "Here you go.", calls: []call{{"get_current_weather", `{"city": "Beijing"}`}}},
		{name: "bare-invoke-then-text", opts: optV4Tools,
			in: "<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\nDone.",
			ct: "\nDone.", calls: []call{{"f", `{}`}}, diags: []error{ErrTextAfterToolCalls}},
		{name: "bare-invoke-malformed-is-content", opts: optV4Tools,
			in: "x <｜DSML｜invoke nom=\"f\">y</｜DSML｜invoke> z", ct: "x <｜DSML｜invoke nom=\"f\">y</｜DSML｜invoke> z",
			// no call was made, so " z" is not text after tool calls (since 2026-11-30)
			diags: []error{ErrMalformedToolCall}},

		// ---- TensorRT-LLM tests/unittest/llmapi/apps/test_tool_parsers.py ----
		// (TensorRT-LLM strips the leading text, "Lead"; we keep it as written.)
		{name: "trtllm-v3/single", opts: optV3,
			in: "Lead " + SB + CB + "function" + SEP + "get_weather\n```json\n{\"location\": \"Tokyo\"}\n```" + CE + SE,
			ct: "Lead ", calls: []call{{"get_weather", `{"location": "Tokyo"}`}}},
		{name: "trtllm-v3/repeated-block-opener", opts: optV3,
			in: SB + CB + "function" + SEP + "get_weather\n```json\n{\"location\": \"Paris\"}\n```" + CE +
				SB + CB + "function" + SEP + "search_web\n```json\n{\"query\": \"AI\"}\n```" + CE + SE,
			calls: []call{{"get_weather", `{"location": "Paris"}`}, {"search_web", `{"query": "AI"}`}}},
		{name: "trtllm-v3/single-quoted-json-is-content", opts: optV3,
			in:    SB + CB + "function" + SEP + "get_weather\n```json\n{'location': 'Paris'}\n```" + CE + SE,
			ct:    SB + CB + "function" + SEP + "get_weather\n```json\n{'location': 'Paris'}\n```" + CE + SE,
			diags: []error{ErrInvalidArguments, ErrMalformedToolCall}},
		{name: "trtllm-v3/parameters-key-kept", opts: optV3,
			in:    SB + CB + "function" + SEP + "search_web\n```json\n{\"parameters\": {\"query\": \"TensorRT\"}}\n```" + CE + SE,
			calls: []call{{"search_web", `{"parameters": {"query": "TensorRT"}}`}}},
		{name: "trtllm-v3/undefined-tool", opts: withTools(optV3, false, tools("get_weather", `{}`)),
			in:    SB + CB + "function" + SEP + "unknown\n```json\n{\"x\": 1}\n```" + CE + SE,
			ct:    SB + CB + "function" + SEP + "unknown\n```json\n{\"x\": 1}\n```" + CE + SE,
			diags: []error{ErrUnknownTool, ErrMalformedToolCall}},
		{name: "trtllm-v3/partial-bot-token", opts: optV3, chunks: []string{"<｜tool▁cal"}, ct: "<｜tool▁cal"},
		{name: "trtllm-v31/single", opts: optV31,
			in: "Intro " + SB + CB + "get_weather" + SEP + `{"location": "Tokyo"}` + CE + SE,
			ct: "Intro ", calls: []call{{"get_weather", `{"location": "Tokyo"}`}}},
		{name: "trtllm-v31/repeated-block-opener", opts: optV31,
			in:    SB + CB + "get_weather" + SEP + `{"location": "Paris"}` + CE + SB + CB + "search_web" + SEP + `{"query": "AI"}` + CE + SE,
			calls: []call{{"get_weather", `{"location": "Paris"}`}, {"search_web", `{"query": "AI"}`}}},
		{name: "trtllm-v31/single-quoted-json-is-content", opts: optV31,
			in: SB + CB + "get_weather" + SEP + "{'location':'Paris'}" + CE + SE, ct: SB + CB + "get_weather" + SEP + "{'location':'Paris'}" + CE + SE,
			diags: []error{ErrInvalidArguments, ErrMalformedToolCall}},
		{name: "trtllm-v32/space-separated", opts: optV32,
			in: "Normal text<｜DSML｜function_calls> <｜DSML｜invoke name=\"get_weather\"> <｜DSML｜parameter name=\"location\" string=\"true\">NYC</｜DSML｜parameter> </｜DSML｜invoke> </｜DSML｜function_calls>",
			ct: "Normal text", calls: []call{{"get_weather", `{"location": "NYC"}`}}},
		{name: "trtllm-v32/direct-json-second-invoke", opts: optV32,
			in:    "<｜DSML｜function_calls> <｜DSML｜invoke name=\"get_weather\"> <｜DSML｜parameter name=\"location\" string=\"true\">NYC</｜DSML｜parameter> </｜DSML｜invoke> <｜DSML｜invoke name=\"search_web\"> { \"query\": \"AI\" } </｜DSML｜invoke> </｜DSML｜function_calls>",
			calls: []call{{"get_weather", `{"location": "NYC"}`}, {"search_web", `{"query": "AI"}`}}},
		{name: "trtllm-v32/ascii-bars-are-text", opts: optV32,
			in: `<|DSML|function_calls> <|DSML|invoke name="get_weather"> </|DSML|invoke> </|DSML|function_calls>`,
			ct: `<|DSML|function_calls> <|DSML|invoke name="get_weather"> </|DSML|invoke> </|DSML|function_calls>`},

		// ---- TensorRT-LLM PR #17573 (P13): text that only looks like a marker start ----
		{name: "trtllm/partial-marker-in-text", opts: optV31,
			chunks: []string{"Use ", "<", "div> for a block element."}, ct: "Use <div> for a block element."},
		// ---- SGLang PR #31351 (P14): begin marker split across chunks ----
		{name: "sglang/split-begin-marker", opts: optV3,
			chunks: []string{SB[0:4], SB[4:9], SB[9:], CB + "function" + SEP + "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" + CE + SE},
			calls:  []call{{"get_weather", `{"city": "Tokyo"}`}}},
		{name: "sglang-v31/split-begin-marker", opts: optV31,
			chunks: []string{SB[0:4], SB[4:9], SB[9:], CB + "get_weather" + SEP + `{"city": "Tokyo"}` + CE + SE},
			calls:  []call{{"get_weather", `{"city": "Tokyo"}`}}},

		// ---- vLLM test_deepseekr1_reasoning_parser.py (P12) ----
		{name: "vllm-r1/split", opts: optR1, in: "This is a reasoning section</think>This is the rest",
			rc: "This is a reasoning section", ct: "This is the rest"},
		{name: "vllm-r1/no-content", opts: optR1, in: "This is a reasoning section</think>", rc: "This is a reasoning section"},
		{name: "vllm-r1/no-end-tag", opts: optR1, in: "This is content", rc: "This is content", diags: []error{ErrMissingThinkEnd}},
		{name: "vllm-r1/empty-reasoning", opts: optR1, in: "</think>This is the rest", ct: "This is the rest"},
		{name: "vllm-r1/start-tag-multiline", opts: optR1, in: "<think>This\nThat</think>This is the rest\nThat",
			rc: "This\nThat", ct: "This is the rest\nThat"},
		{name: "vllm-r1/newline-before-start-tag", opts: optR1, in: "\n<think>This is a reasoning section</think>\nThis is the rest",
			rc: "This is a reasoning section", ct: "\nThis is the rest"},
		{name: "vllm-r1/empty", opts: optR1, in: ""},
		// vllm test_deepseekv3_reasoning_parser.py: thinking=false is the identity parser.
		{name: "vllm-v3-reasoning/thinking-off-is-identity", opts: Options{Reasoning: "deepseek-v3"},
			in: "This is a reasoning section</think>This is the rest", ct: "This is a reasoning section</think>This is the rest",
			diags: []error{ErrStrayMarker}},
		{name: "vllm-v3-reasoning/thinking-on", opts: Options{Reasoning: "deepseek-v3", Thinking: true},
			in: "This is a reasoning section</think>This is the rest", rc: "This is a reasoning section", ct: "This is the rest"},
		// SGLang test_reasoning_parser.py
		{name: "sglang-reasoning/partial-tags", opts: optR1,
			chunks: []string{"<thi", "nk>reason", "ing</thi", "nk>normal"}, rc: "reasoning", ct: "normal"},
		{name: "sglang-reasoning/one-chunk", opts: optR1, in: "<think>reasoning</think>normal", rc: "reasoning", ct: "normal"},
		{name: "sglang-reasoning/force-reasoning", opts: Options{Reasoning: "deepseek-v3", Thinking: true},
			in: "I think this is the answer</think>The final answer is 42.", rc: "I think this is the answer", ct: "The final answer is 42."},

		// ---- ai-dynamo recorded streams (lib/llm/tests/data/vllm/deepseek-*), chunks as recorded ----
		{name: "dynamo-v4/tool", opts: optV4Think,
			chunks: []string{"<think>User wants the current weather in Beijing. I'll call get_current_weather with celsius units.</think>",
				"<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"get_current_weather\">\n",
				"<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"format\" string=\"true\">celsius</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"},
			rc:    "User wants the current weather in Beijing. I'll call get_current_weather with celsius units.",
			calls: []call{{"get_current_weather", `{"location": "Beijing", "format": "celsius"}`}}},
		{name: "dynamo-v4/content-before-tool", opts: optV4Think,
			chunks: []string{"<think>The user wants today's weather in Tokyo. I'll acknowledge the request, then call get_weather.</think>",
				"Let me check the forecast for Tokyo right now.", "<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"get_weather\">\n",
				"<｜DSML｜parameter name=\"location\" string=\"true\">Tokyo</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"unit\" string=\"true\">celsius</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"},
			rc: "The user wants today's weather in Tokyo. I'll acknowledge the request, then call get_weather.",
			ct: "Let me check the forecast for Tokyo right now.", calls: []call{{"get_weather", `{"location": "Tokyo", "unit": "celsius"}`}}},
		{name: "dynamo-v4/mixed-param-types", opts: optV4Think,
			chunks: []string{"<think>The user asked me to send a high-priority overdue-billing notification. I'll call send_notification with the appropriate parameters.</think>",
				"<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"send_notification\">\n",
				"<｜DSML｜parameter name=\"recipient\" string=\"true\">user@example.com</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"priority\" string=\"false\">3</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"urgent\" string=\"false\">true</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"tags\" string=\"false\">[\"billing\", \"overdue\"]</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"metadata\" string=\"false\">{\"ticket\": \"T-42\", \"retries\": 2}</｜DSML｜parameter>\n",
				"</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"},
			rc:    "The user asked me to send a high-priority overdue-billing notification. I'll call send_notification with the appropriate parameters.",
			calls: []call{{"send_notification", `{"recipient": "user@example.com", "priority": 3, "urgent": true, "tags": ["billing", "overdue"], "metadata": {"ticket": "T-42", "retries": 2}}`}}},
		{name: "dynamo-v4/special-chars", opts: optV4Think,
			chunks: []string{"<think>The user wants me to save a multiline note with special characters, quotes, unicode, and emoji. I'll call save_note.</think>",
				"<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"save_note\">\n", "<｜DSML｜parameter name=\"note\" string=\"true\">",
				"He said \"hello\".\n\t'world' `backtick` ", "— 中文测试 — 🚀✨ ", "<not_a_sentinel> & </not_a_sentinel>.</｜DSML｜parameter>\n",
				"</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"},
			rc:    "The user wants me to save a multiline note with special characters, quotes, unicode, and emoji. I'll call save_note.",
			calls: []call{{"save_note", `{"note": "He said \"hello\".\n\t'world' ` + "`backtick`" + ` — 中文测试 — 🚀✨ <not_a_sentinel> & </not_a_sentinel>."}`}}},
		{name: "dynamo-v4/multi-tool", opts: optV4Think,
			chunks: []string{"<think>The user wants to check the weather in Beijing and Shanghai, I need to call the get_current_weather tool to get this information.</think>",
				"<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"get_current_weather\">\n",
				"<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"format\" string=\"true\">celsius</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n",
				"<｜DSML｜invoke name=\"get_current_weather\">\n",
				"<｜DSML｜parameter name=\"location\" string=\"true\">Shanghai</｜DSML｜parameter>\n",
				"<｜DSML｜parameter name=\"format\" string=\"true\">celsius</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"},
			rc: "The user wants to check the weather in Beijing and Shanghai, I need to call the get_current_weather tool to get this information.",
			calls: []call{{"get_current_weather", `{"location": "Beijing", "format": "celsius"}`},
				{"get_current_weather", `{"location": "Shanghai", "format": "celsius"}`}}},
		{name: "dynamo-v4/no-params", opts: optV4Think,
			chunks: []string{"<think>The user asked for the current time. I'll call get_current_time which takes no parameters.</think>",
				"<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"get_current_time\">\n", "\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"},
			rc:    "The user asked for the current time. I'll call get_current_time which takes no parameters.",
			calls: []call{{"get_current_time", `{}`}}},
		{name: "dynamo-v4/no-tool", opts: optV4Think,
			chunks: []string{"<think>User greeted me politely. A short friendly reply is appropriate; no tools needed.</think>",
				"Hi! I'm here to help — ", "what would you like to work on today?"},
			rc: "User greeted me politely. A short friendly reply is appropriate; no tools needed.",
			ct: "Hi! I'm here to help — what would you like to work on today?"},
		{name: "dynamo-v4/fragmented-tokens", opts: optV4Think,
			chunks: append(append(append([]string{"<think>"}, runeChunks("Break tokens apart aggressively.")...), "</think>"),
				runeChunks("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"ping\">\n<｜DSML｜parameter name=\"host\" string=\"true\">example.com</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>")...),
			rc: "Break tokens apart aggressively.", calls: []call{{"ping", `{"host": "example.com"}`}}},
		{name: "dynamo-v31/tool", opts: Options{Reasoning: "deepseek-v3", Tools: "deepseekv31", Thinking: true},
			chunks: []string{"<think>The user wants to check the weather in Beijing and Shanghai, I need to call the get_current_weather tool to get this information.</think>",
				SB, CB, "get_current_weather", SEP, `{"location": "Beijing", "format": "celsius"}`, CE, CB, "get_current_weather", SEP,
				`{"location": "Shanghai", "format": "celsius"}`, CE, SE},
			rc: "The user wants to check the weather in Beijing and Shanghai, I need to call the get_current_weather tool to get this information.",
			calls: []call{{"get_current_weather", `{"location": "Beijing", "format": "celsius"}`},
				{"get_current_weather", `{"location": "Shanghai", "format": "celsius"}`}}},
		{name: "dynamo-v31/no-tool", opts: Options{Reasoning: "deepseek-v3", Tools: "deepseekv31", Thinking: true},
			chunks: []string{"<think>The user asked about the weather in Beijing, I will provide relevant weather information.</think>",
				"The weather in Beijing today is sunny with temperatures between 15 and 22 degrees Celsius. It's suitable for outdoor activities."},
			rc: "The user asked about the weather in Beijing, I will provide relevant weather information.",
			ct: "The weather in Beijing today is sunny with temperatures between 15 and 22 degrees Celsius. It's suitable for outdoor activities."},
		{name: "dynamo-v3/tool", opts: Options{Reasoning: "deepseek-r1", Tools: "deepseekv3"},
			chunks: []string{"<think>The user wants to check the weather in Beijing and Shanghai, I need to call the get_current_weather tool to get this information.</think>",
				SB, CB, "function", SEP, "get_current_weather", "\n```json\n", "{\"location\": \"Beijing\", \"format\": \"celsius\"}\n", "```", CE,
				CB, "function", SEP, "get_current_weather", "\n```json\n", "{\"location\": \"Shanghai\", \"format\": \"celsius\"}\n", "```", CE, SE},
			rc: "The user wants to check the weather in Beijing and Shanghai, I need to call the get_current_weather tool to get this information.",
			calls: []call{{"get_current_weather", `{"location": "Beijing", "format": "celsius"}`},
				{"get_current_weather", `{"location": "Shanghai", "format": "celsius"}`}}},
		{name: "dynamo-v3/no-tool", opts: Options{Reasoning: "deepseek-r1", Tools: "deepseekv3"},
			chunks: []string{"<think>The user asked about the weather in Beijing, I will provide relevant weather information.</think>",
				"The weather in Beijing today is sunny with temperatures between 15 and 22 degrees Celsius. It's suitable for outdoor activities."},
			rc: "The user asked about the weather in Beijing, I will provide relevant weather information.",
			ct: "The weather in Beijing today is sunny with temperatures between 15 and 22 degrees Celsius. It's suitable for outdoor activities."},

		// ---- malformed output named by the issue: text kept, typed diagnostic ----
		{name: "malformed/unterminated-invoke", opts: optV4Think,
			in: "r</think>ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"true\">partial",
			rc: "r", ct: "ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"true\">partial",
			diags: []error{ErrUnterminatedToolCall}},
		{name: "malformed/unterminated-invoke-header", opts: optV4Think,
			in: "r</think>ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f",
			rc: "r", ct: "ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f",
			diags: []error{ErrUnterminatedToolCall}},
		{name: "malformed/invalid-json-false-param", opts: optV4Think,
			in: "r</think>" + "\n\n" + tc(dinvoke{"f", []dparam{{"n", "false", "{bad"}}}),
			rc: "r", calls: []call{{"f", `{"n": "{bad"}`}}, diags: []error{ErrInvalidArguments}},
		{name: "malformed/unknown-tool", opts: withTools(optV4Think, false, weather),
			in: "r</think>" + "\n\n" + tc(dinvoke{"launch", []dparam{{"n", "true", "1"}}}),
			rc: "r", ct: "\n\n" + tc(dinvoke{"launch", []dparam{{"n", "true", "1"}}}),
			diags: []error{ErrUnknownTool, ErrMalformedToolCall}},
		{name: "malformed/unknown-then-known-tool", opts: withTools(optV4Think, false, weather),
			in: "r</think>" + "\n\n" + tc(dinvoke{"launch", nil}, dinvoke{"get_weather", []dparam{{"location", "true", "Oslo"}}}),
			rc: "r", ct: "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"launch\">\n</｜DSML｜invoke>",
			calls: []call{{"get_weather", `{"location": "Oslo"}`}}, diags: []error{ErrUnknownTool}},
		{name: "malformed/no-think-end", opts: optV4Think,
			in: "thinking forever, truncated", rc: "thinking forever, truncated", diags: []error{ErrMissingThinkEnd}},
		{name: "malformed/markers-in-content", opts: optV4Think,
			in: "r</think>a </think> b ｜DSML｜ c", rc: "r", ct: "a </think> b ｜DSML｜ c",
			diags: []error{ErrStrayMarker, ErrStrayMarker}},
		{name: "malformed/duplicate-parameter", opts: optV4Chat,
			in: tc(dinvoke{"f", []dparam{{"a", "true", "1"}, {"a", "true", "2"}}}),
			ct: `<｜DSML｜parameter name="a" string="true">2</｜DSML｜parameter>`, calls: []call{{"f", `{"a": "1"}`}},
			diags: []error{ErrDuplicateParameter}},
		{name: "malformed/unterminated-block", opts: optV4Chat,
			in: tc(dinvoke{"f", nil})[:len(tc(dinvoke{"f", nil}))-len("</｜DSML｜tool_calls>")],
			ct: tc(dinvoke{"f", nil})[:len(tc(dinvoke{"f", nil}))-len("</｜DSML｜tool_calls>")], diags: []error{ErrUnterminatedToolCall}},
		{name: "sglang-v4/direct-json-invoke-body", opts: optV4Chat,
			in:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n{\"city\": \"SF\"}\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
			calls: []call{{"f", `{"city": "SF"}`}}},
		{name: "format/eos-after-content-v3", opts: optV3, in: "hello" + EOS, ct: "hello"},
		{name: "format/eos-inside-unterminated-block", opts: optV4Chat,
			in: "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n" + EOS + "</｜DSML｜invoke>\n" + EOS,
			ct: "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n", diags: []error{ErrUnterminatedToolCall}},
		// ---- BREAKER F28: unclosed / truncated DSML is never a tool call ----
		{name: "f28/dsml-marker-in-value", opts: optV4Chat,
			in:    f28Head + `Paris of Italy<｜DSML｜parameter name="true">fahrenheit</｜DSML｜tool_calls>`,
			ct:    f28Head + `Paris of Italy<｜DSML｜parameter name="true">fahrenheit</｜DSML｜tool_calls>`,
			diags: []error{ErrMalformedToolCall, ErrUnterminatedToolCall, ErrMalformedToolCall}},
		{name: "f28/dsml-marker-in-value-then-closers", opts: optV4Chat,
			in: f28Head + "Paris of Italy<｜DSML｜parameter name=\"true\">fahrenheit</｜DSML｜parameter>\n</｜DSML｜invoke>\n" +
				"<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" string=\"true\">Tokyo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
			ct:    f28Head + "Paris of Italy<｜DSML｜parameter name=\"true\">fahrenheit</｜DSML｜parameter>\n</｜DSML｜invoke>",
			calls: []call{{"get_weather", `{"location": "Tokyo"}`}}, diags: []error{ErrMalformedToolCall}},
		{name: "f28/closing-marker-in-false-value", opts: optV4Chat,
			in:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"false\">1</｜DSML｜x>2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
			ct:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"false\">1</｜DSML｜x>2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
			diags: []error{ErrMalformedToolCall, ErrMalformedToolCall}},
		{name: "f28/invoke-closed-with-parameter-open", opts: optV4Chat,
			in:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
			ct:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
			diags: []error{ErrUnterminatedToolCall, ErrMalformedToolCall}},
		{name: "f28/block-closed-with-invoke-open", opts: optV4Chat,
			in:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜tool_calls>",
			ct:    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜tool_calls>",
			diags: []error{ErrUnterminatedToolCall, ErrMalformedToolCall}},
		// max_tokens cuts (the addendum): every cut keeps the block as content, no call.
		{name: "f28/cut-in-invoke-header", opts: optV4Chat,
			in: "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather", ct: "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather",
			diags: []error{ErrUnterminatedToolCall}},
		{name: "f28/cut-in-parameter-header", opts: optV4Chat,
			in: "\n\n" + f28Head[len("Sure."):len(f28Head)-len(`true">`)], ct: "\n\n" + f28Head[len("Sure."):len(f28Head)-len(`true">`)],
			diags: []error{ErrUnterminatedToolCall}},
		{name: "f28/cut-in-value", opts: optV4Think,
			in: "r</think>" + f28Head + "Par", rc: "r", ct: f28Head + "Par",
			diags: []error{ErrUnterminatedToolCall}},
		{name: "f28/cut-after-invoke", opts: optV4Chat,
			in: f28Head + "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n", ct: f28Head + "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n",
			diags: []error{ErrUnterminatedToolCall}},
		{name: "f28/cut-before-block-end", opts: optV4Chat,
			in: f28Head + "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_ca", ct: f28Head + "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_ca",
			diags: []error{ErrMalformedToolCall, ErrUnterminatedToolCall}},
		{name: "f28/v32-cut-in-value", opts: Options{Tools: "deepseekv32"},
			in: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x", ct: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x",
			diags: []error{ErrUnterminatedToolCall}},
		// Bare invokes (no block marker, SGLang): a closed one stays a call, the cut one is content.
		{name: "f28/bare-invokes-cut", opts: optV4Chat,
			in: "ok\n\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"g\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x",
			ct: "ok<｜DSML｜invoke name=\"g\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x", calls: []call{{"f", `{}`}},
			diags: []error{ErrUnterminatedToolCall}},
		{name: "f28/v3-block-cut-after-call", opts: optV31,
			in: SB + CB + "foo" + SEP + `{"x":1}` + CE, ct: SB + CB + "foo" + SEP + `{"x":1}` + CE,
			diags: []error{ErrUnterminatedToolCall}},
		{name: "format/python-style-escapes", opts: optV4Chat,
			in:    tc(dinvoke{"f", []dparam{{"s", "true", "tab\there \"q\" back\\slash \x01 \u2028 é"}}}),
			calls: []call{{"f", `{"s": "tab\there \"q\" back\\slash \u0001 ` + "\u2028" + ` é"}`}}},
	}
}

func fixedChunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func runeChunks(s string) []string {
	var out []string
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

func seqIDs(i int) string { return fmt.Sprintf("call_%d", i) }

func checkMessage(t *testing.T, tc peerCase, got Message) {
	t.Helper()
	if got.ReasoningContent != tc.rc {
		t.Errorf("reasoning_content = %q, want %q", got.ReasoningContent, tc.rc)
	}
	if got.Content != tc.ct {
		t.Errorf("content = %q, want %q", got.Content, tc.ct)
	}
	if len(got.ToolCalls) != len(tc.calls) {
		t.Fatalf("tool_calls = %+v, want %+v", got.ToolCalls, tc.calls)
	}
	for i, c := range tc.calls {
		g := got.ToolCalls[i]
		if g.Function.Name != c.name || g.Function.Arguments != c.args {
			t.Errorf("call %d = %s %s, want %s %s", i, g.Function.Name, g.Function.Arguments, c.name, c.args)
		}
		if !json.Valid([]byte(g.Function.Arguments)) {
			t.Errorf("call %d arguments not JSON: %s", i, g.Function.Arguments)
		}
		if g.ID == "" || g.Type != "function" {
			t.Errorf("call %d id/type = %q/%q", i, g.ID, g.Type)
		}
	}
}

func TestPeerCases(t *testing.T) {
	for _, tc := range peerCases() {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if tc.chunks != nil {
				in = strings.Join(tc.chunks, "")
			}
			opts := tc.opts
			opts.NewID = seqIDs
			got, err := Parse(in, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkMessage(t, tc, got)
			if len(got.Diagnostics) != len(tc.diags) {
				t.Errorf("diagnostics = %v, want kinds %v", got.Diagnostics, tc.diags)
			} else {
				for i, want := range tc.diags {
					if !errors.Is(got.Diagnostics[i], want) {
						t.Errorf("diagnostic %d = %v, want %v", i, got.Diagnostics[i], want)
					}
				}
			}
			if (got.Err() == nil) != (len(tc.diags) == 0) {
				t.Errorf("Err() = %v", got.Err())
			}
			// The peer's own chunking (or 7-byte chunks) gives the same message.
			chunks := tc.chunks
			if chunks == nil {
				chunks = fixedChunks(in, 7)
			}
			s, _ := NewStream(opts)
			var deltas []Delta
			for _, c := range chunks {
				deltas = append(deltas, s.Push(c)...)
			}
			deltas = append(deltas, s.Close()...)
			checkMessage(t, tc, Merge(deltas))
			checkDeltaShape(t, deltas)
			for _, d := range deltas {
				if strings.Contains(d.Content, dsmlToken) && len(tc.calls) > 0 && !strings.Contains(tc.ct, dsmlToken) {
					t.Errorf("content delta carries a DSML marker: %q", d.Content)
				}
			}
		})
	}
}

// checkDeltaShape: each delta carries one kind of field; a call's first
// delta has id, type and name and comes before its argument fragments; no
// fragment repeats the previous one's text by accident of re-emission.
func checkDeltaShape(t *testing.T, deltas []Delta) {
	t.Helper()
	seen := map[int]bool{}
	for i, d := range deltas {
		n := 0
		if d.ReasoningContent != "" {
			n++
		}
		if d.Content != "" {
			n++
		}
		if len(d.ToolCalls) > 0 {
			n++
		}
		if n != 1 {
			t.Errorf("delta %d carries %d kinds: %+v", i, n, d)
		}
		for _, tc := range d.ToolCalls {
			if tc.ID != "" {
				if seen[tc.Index] || tc.Function.Name == "" || tc.Type != "function" || tc.Function.Arguments != "" {
					t.Errorf("bad header delta %d: %+v", i, tc)
				}
				seen[tc.Index] = true
			} else if !seen[tc.Index] {
				t.Errorf("arguments before header for call %d", tc.Index)
			}
		}
	}
}
