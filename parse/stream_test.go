package parse

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// corpusEntry is one raw completion with the options to parse it.
type corpusEntry struct {
	name string
	opts Options
	text string
}

// corpus returns the raw outputs the chunking property runs on: every peer
// case, plus synthetic completions of all four formats (well-formed,
// truncated and corrupted) from a fixed seed.
func corpus() []corpusEntry {
	var out []corpusEntry
	for _, tc := range peerCases() {
		in := tc.in
		if tc.chunks != nil {
			in = strings.Join(tc.chunks, "")
		}
		out = append(out, corpusEntry{"peer/" + tc.name, tc.opts, in})
	}
	official, _ := readOfficial() // TestOfficialV4 reports a read error
	for i, r := range official {
		if i%2 == 0 { // half of the reference-encoder outputs
			out = append(out, corpusEntry{fmt.Sprintf("official/%d", i), officialOptions(r.Mode), r.Text})
		}
	}
	rng := rand.New(rand.NewPCG(6, 2026))
	gens := []struct {
		name string
		opts Options
	}{
		{"v4-thinking", Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true}},
		{"v4-chat", Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4"}},
		{"v4-coerce", Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true, Coerce: true, ToolsDecl: synthTools}},
		{"v32-thinking", Options{Reasoning: "deepseek-v3", Tools: "deepseekv32", Thinking: true}},
		{"v31-thinking", Options{Reasoning: "deepseek-v3", Tools: "deepseekv31", Thinking: true}},
		{"v3-r1", Options{Reasoning: "deepseek-r1", Tools: "deepseekv3"}},
		{"v3-coerce", Options{Tools: "deepseekv3", Coerce: true, ToolsDecl: synthTools}},
	}
	for i := 0; i < 14; i++ {
		for _, g := range gens {
			text := synthOutput(rng, g.opts)
			switch rng.IntN(10) {
			case 0, 1, 2: // truncated anywhere, even inside a rune
				text = text[:rng.IntN(len(text)+1)]
			case 3: // a byte range deleted
				a := rng.IntN(len(text) + 1)
				b := min(len(text), a+rng.IntN(12))
				text = text[:a] + text[b:]
			case 4: // a stray marker inserted
				a := rng.IntN(len(text) + 1)
				text = text[:a] + strayPool[rng.IntN(len(strayPool))] + text[a:]
			}
			out = append(out, corpusEntry{fmt.Sprintf("synth/%s/%d", g.name, i), g.opts, text})
		}
	}
	return out
}

var synthTools = tools(
	"get_weather", `{"type":"object","properties":{"location":{"type":"string"},"days":{"type":"integer"},"detail":{"type":"boolean"}}}`,
	"search", `{"type":"object","properties":{"query":{"type":"string"},"filters":{"type":"object"},"limit":{"type":["integer","null"]}}}`,
	"write_file", `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"}}}`,
)

var textPool = []string{
	"The", " user", " wants", " weather", ",", ".", " 北京", "天气", " 🚀", "✨", " é", " —", "\n", "\n\n", " <", "<b>", " </", "</thin",
	"<thi", "｜", "<｜", "<｜DSML", "｜DSML", " ```", "{", "}", "\"", "\\", "\t", " x < y > z", "▁", "<｜tool", "\x01", " 42", " ok",
}

var strayPool = []string{"</think>", "<think>", "｜DSML｜", "<｜DSML｜invoke name=\"x\">", "\n\n<｜DSML｜invoke name=\"search\">\n", "</｜DSML｜invoke>",
	"<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "</｜DSML｜parameter>", v3CallBegin, v3Sep, v3CallEnd, v3CallsEnd, "\n\n<｜DSML｜tool_calls>", eosToken}

func synthText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(textPool[rng.IntN(len(textPool))])
	}
	return b.String()
}

func synthValue(rng *rand.Rand) (str, val string) {
	switch rng.IntN(8) {
	case 0:
		return "false", fmt.Sprint(rng.IntN(1000))
	case 1:
		return "false", []string{"true", "false", "null", "3.0", "-1.5e3"}[rng.IntN(5)]
	case 2:
		return "false", `{"lang": ["en", "zh"], "n": {"k": null}, "s": "a\"b"}`
	case 3:
		return "false", `[1, 2, "三"]`
	case 4:
		return "false", "{broken " + synthText(rng, 2)
	case 5:
		return "true", fmt.Sprint(rng.IntN(50))
	default:
		return "true", synthText(rng, 1+rng.IntN(8))
	}
}

var namePool = []string{"get_weather", "search", "write_file", "unknown_tool"}
var paramPool = []string{"location", "days", "detail", "query", "filters", "limit", "path", "content", "mode", "arguments"}

func synthOutput(rng *rand.Rand, opts Options) string {
	var b strings.Builder
	thinking := opts.Thinking || normName(opts.Reasoning) == "deepseekr1"
	if thinking {
		if rng.IntN(3) == 0 {
			b.WriteString("<think>")
		}
		b.WriteString(synthText(rng, rng.IntN(12)))
		b.WriteString("</think>")
	}
	b.WriteString(synthText(rng, rng.IntN(10)))
	ncalls := rng.IntN(4)
	if ncalls > 0 {
		tk, _ := toolsKind(opts.Tools)
		switch tk {
		case toolV4, toolV32:
			block := "tool_calls"
			if tk == toolV32 {
				block = "function_calls"
			}
			var invs []dinvoke
			for i := 0; i < ncalls; i++ {
				inv := dinvoke{name: namePool[rng.IntN(len(namePool))]}
				used := map[string]bool{}
				for j := rng.IntN(4); j > 0; j-- {
					p := paramPool[rng.IntN(len(paramPool))]
					if used[p] && rng.IntN(4) != 0 {
						continue
					}
					used[p] = true
					str, val := synthValue(rng)
					inv.params = append(inv.params, dparam{p, str, val})
				}
				invs = append(invs, inv)
			}
			if rng.IntN(2) == 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(dsml(block, invs...))
		case toolV31, toolV3:
			b.WriteString(v3CallsBegin)
			for i := 0; i < ncalls; i++ {
				name := namePool[rng.IntN(len(namePool))]
				args := `{"location": "北京", "days": ` + fmt.Sprint(rng.IntN(9)) + `}`
				if rng.IntN(5) == 0 {
					args = `{"query": "` + strings.ReplaceAll(synthText(rng, 3), `"`, `'`) + `"`
				}
				b.WriteString(v3CallBegin)
				if tk == toolV3 {
					b.WriteString("function" + v3Sep + name + "\n```json\n" + args + "\n```")
				} else {
					b.WriteString(name + v3Sep + args)
				}
				b.WriteString(v3CallEnd)
			}
			b.WriteString(v3CallsEnd)
		}
		if rng.IntN(4) == 0 {
			b.WriteString(synthText(rng, 2))
		}
	}
	if rng.IntN(2) == 0 {
		b.WriteString(eosToken)
	}
	return b.String()
}

// streamResult feeds chunks to a fresh Stream and returns the merged
// deltas, the stream's own message and the deltas.
func streamResult(t testing.TB, opts Options, chunks []string) (Message, Message, []Delta) {
	s, err := NewStream(opts)
	if err != nil {
		t.Fatal(err)
	}
	var deltas []Delta
	for _, c := range chunks {
		deltas = append(deltas, s.Push(c)...)
	}
	deltas = append(deltas, s.Close()...)
	merged := Merge(deltas)
	merged.Diagnostics = s.Diagnostics()
	if len(merged.Diagnostics) == 0 {
		merged.Diagnostics = nil
	}
	return merged, s.Message(), deltas
}

func cutAt(text string, cuts []int) []string {
	sort.Ints(cuts)
	var out []string
	prev := 0
	for _, c := range cuts {
		if c <= prev || c >= len(text) {
			continue
		}
		out = append(out, text[prev:c])
		prev = c
	}
	return append(out, text[prev:])
}

// chunkings returns the ways to cut text that the property checks: n
// random cuttings, one byte at a time, one rune at a time, every marker
// occurrence cut at each inner byte, and every multi-byte rune cut inside.
func chunkings(rng *rand.Rand, text string, n int) [][]string {
	var out [][]string
	for i := 0; i < n; i++ {
		k := 1 + rng.IntN(max(1, min(len(text), 40)))
		if i%4 == 0 {
			k = 1 + rng.IntN(max(1, len(text)))
		}
		cuts := make([]int, k)
		for j := range cuts {
			cuts[j] = rng.IntN(len(text) + 1)
		}
		out = append(out, cutAt(text, cuts))
	}
	var bytesOne, runesOne []string
	for i := 0; i < len(text); i++ {
		bytesOne = append(bytesOne, text[i:i+1])
	}
	for i := 0; i < len(text); {
		_, sz := utf8.DecodeRuneInString(text[i:])
		runesOne = append(runesOne, text[i:i+sz])
		i += sz
	}
	out = append(out, bytesOne, runesOne)
	for _, m := range []string{dsmlToken, thinkClose, thinkOpen, "<｜DSML｜tool_calls>", "</｜DSML｜parameter>", eosToken, v3CallsBegin, v3CallBegin, v3Sep, v3CallEnd} {
		var starts []int
		for i := 0; ; {
			j := strings.Index(text[i:], m)
			if j < 0 {
				break
			}
			starts = append(starts, i+j)
			i += j + 1
		}
		if len(starts) == 0 {
			continue
		}
		for off := 1; off < len(m); off++ {
			var cuts []int
			for _, s := range starts {
				cuts = append(cuts, s+off)
			}
			out = append(out, cutAt(text, cuts))
		}
	}
	var mid []int
	for i := 0; i < len(text); {
		_, sz := utf8.DecodeRuneInString(text[i:])
		for k := 1; k < sz; k++ {
			mid = append(mid, i+k)
		}
		i += sz
	}
	if len(mid) > 0 {
		out = append(out, cutAt(text, mid))
	}
	return out
}

// TestChunkingProperty: for every corpus output and every chunking, the
// merged streaming deltas equal the whole-text Parse result (including the
// diagnostics and tool-call ids).
func TestChunkingProperty(t *testing.T) {
	entries := corpus()
	if len(entries) < 50 {
		t.Fatalf("corpus has %d outputs, want >= 50", len(entries))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	runs := 0
	for _, e := range entries {
		opts := e.opts
		opts.NewID = seqIDs
		whole, err := Parse(e.text, opts)
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		for _, chunks := range chunkings(rng, e.text, 200) {
			runs++
			merged, own, deltas := streamResult(t, opts, chunks)
			if !reflect.DeepEqual(merged, whole) {
				t.Fatalf("%s: chunks %q\nstream: %#v\nwhole:  %#v", e.name, chunks, merged, whole)
			}
			if !reflect.DeepEqual(own, whole) {
				t.Fatalf("%s: Stream.Message differs from Parse", e.name)
			}
			checkDeltaShape(t, deltas)
		}
		checkNoLoss(t, e, whole)
	}
	t.Logf("%d outputs, %d chunkings", len(entries), runs)
}

// checkNoLoss: every byte of the input is accounted for: reasoning and
// content appear in order in the input, and their length plus the bytes of
// markers and tool-call syntax is the input length (checked loosely: the
// parsed texts are substrings-in-order of the input, so nothing is invented).
func checkNoLoss(t *testing.T, e corpusEntry, m Message) {
	t.Helper()
	if !isSubsequence(m.ReasoningContent, e.text) {
		t.Errorf("%s: reasoning is not taken from the input: %q", e.name, m.ReasoningContent)
	}
	if !isSubsequence(m.Content, e.text) {
		t.Errorf("%s: content is not taken from the input: %q", e.name, m.Content)
	}
	// Without any tool call or reasoning, all non-marker text is content.
	if len(m.ToolCalls) == 0 && m.ReasoningContent == "" {
		stripped := strings.ReplaceAll(e.text, eosToken, "")
		if m.Content != stripped && !e.opts.Thinking && normName(e.opts.Reasoning) != "deepseekr1" &&
			!strings.Contains(e.text, v3CallsEnd) && !strings.Contains(e.text, "_calls>") {
			t.Errorf("%s: content %q lost text of %q", e.name, m.Content, stripped)
		}
	}
}

func isSubsequence(sub, s string) bool {
	i := 0
	for j := 0; j < len(s) && i < len(sub); j++ {
		if s[j] == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

// TestHoldBack: the stream holds back only a possible marker prefix (and an
// incomplete rune) and releases it as soon as it cannot be one.
func TestHoldBack(t *testing.T) {
	s, _ := NewStream(Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true})
	steps := []struct {
		push string
		want Delta
	}{
		{"reason", Delta{ReasoningContent: "reason"}},
		{"ing </th", Delta{ReasoningContent: "ing "}},
		{"ink>", Delta{}},
		{"Use <", Delta{Content: "Use "}},
		{"div>", Delta{Content: "<div>"}},
		{" 中"[:3], Delta{Content: " "}},
		{" 中"[3:], Delta{Content: "中"}},
		{"\n", Delta{}},
		{"x", Delta{Content: "\nx"}},
		{"\n\n<｜DS", Delta{}},
		{"ML｜tool_calls>", Delta{}},
	}
	for i, st := range steps {
		got := Merge(s.Push(st.push))
		if got.ReasoningContent != st.want.ReasoningContent || got.Content != st.want.Content || len(got.ToolCalls) != 0 {
			t.Errorf("step %d push %q: got %+v, want %+v", i, st.push, got, st.want)
		}
	}
}

// TestStreamingDeltaOrder re-expresses SGLang's P7 item checks: a whole
// V3.1 call in one delta gives a header item (name, empty arguments) then
// an arguments item, and nothing is left for Close.
func TestStreamingDeltaOrder(t *testing.T) {
	s, _ := NewStream(Options{Tools: "deepseekv31", NewID: seqIDs})
	d := s.Push(SB + CB + "get_weather" + SEP + `{"city": "Tokyo"}` + CE + SE)
	want := []Delta{
		{ToolCalls: []ToolCallDelta{{Index: 0, ID: "call_0", Type: "function", Function: FunctionDelta{Name: "get_weather"}}}},
		{ToolCalls: []ToolCallDelta{{Index: 0, Function: FunctionDelta{Arguments: `{"city": "Tokyo"}`}}}},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("deltas = %+v, want %+v", d, want)
	}
	if rest := s.Close(); len(rest) != 0 {
		t.Errorf("Close = %+v, want nothing", rest)
	}
	// A DSML block's calls are held until the block closes (BREAKER F28):
	// then each comes as a header delta and one arguments delta.
	s, _ = NewStream(Options{Tools: "deepseek-v4", NewID: seqIDs})
	early := s.Push("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"w\">\n<｜DSML｜parameter name=\"text\" string=\"true\">Hello")
	early = append(early, s.Push(", wor")...)
	early = append(early, s.Push("ld</｜DSML｜parameter>\n</｜DSML｜invoke>\n")...)
	if len(early) != 0 {
		t.Errorf("deltas before the block end = %+v", early)
	}
	d = s.Push("</｜DSML｜tool_calls>")
	want = []Delta{
		{ToolCalls: []ToolCallDelta{{Index: 0, ID: "call_0", Type: "function", Function: FunctionDelta{Name: "w"}}}},
		{ToolCalls: []ToolCallDelta{{Index: 0, Function: FunctionDelta{Arguments: `{"text": "Hello, world"}`}}}},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("block end deltas = %+v, want %+v", d, want)
	}
	// Parallel calls get indexes 0, 1 and distinct default ids.
	m, _ := Parse(dsml("tool_calls", dinvoke{"a", nil}, dinvoke{"b", nil}), Options{Tools: "deepseek-v4"})
	if len(m.ToolCalls) != 2 || m.ToolCalls[0].ID == m.ToolCalls[1].ID || !strings.HasPrefix(m.ToolCalls[0].ID, "call_") {
		t.Errorf("ids = %+v", m.ToolCalls)
	}
}

func TestOptionsErrors(t *testing.T) {
	if _, err := Parse("x", Options{Tools: "qwen"}); err == nil || !errorsIs(err, ErrUnknownParser) {
		t.Errorf("unknown tools parser: %v", err)
	}
	if _, err := Parse("x", Options{Reasoning: "nope"}); !errorsIs(err, ErrUnknownParser) {
		t.Errorf("unknown reasoning parser: %v", err)
	}
	if _, err := Parse("x", Options{Tools: "deepseekv4", ToolsDecl: []Tool{{Name: "f", Parameters: []byte("{")}}}); !errorsIs(err, ErrBadToolsDecl) {
		t.Errorf("bad schema: %v", err)
	}
	for _, name := range []string{"deepseek-v4", "deepseekv4", "deepseek_v4", "DeepSeek-V4", "deepseekv32", "deepseek_v32", "deepseekv31", "deepseekv3"} {
		if _, err := Parse("x", Options{Tools: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	tl, err := ToolsFromOpenAI([]byte(`[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}},{"name":"g"}]`))
	if err != nil || len(tl) != 2 || tl[0].Name != "f" || tl[1].Name != "g" {
		t.Errorf("ToolsFromOpenAI = %+v, %v", tl, err)
	}
	if _, err := ToolsFromOpenAI([]byte(`[{}]`)); !errorsIs(err, ErrBadToolsDecl) {
		t.Errorf("nameless tool: %v", err)
	}
}

func TestMaxBytes(t *testing.T) {
	text := "abc</think>def <｜DSML｜tool_calls> ghi"
	for limit := 1; limit < len(text); limit++ {
		opts := Options{Reasoning: "deepseek-r1", Tools: "deepseek-v4", MaxBytes: limit, NewID: seqIDs}
		whole, _ := Parse(text, opts)
		if whole.ReasoningContent+whole.Content == "" || !errorsIs(whole.Err(), ErrTooLarge) {
			t.Fatalf("limit %d: %+v", limit, whole)
		}
		merged, _, _ := streamResult(t, opts, runeChunks(text))
		if !reflect.DeepEqual(merged, whole) {
			t.Fatalf("limit %d: stream %+v != whole %+v", limit, merged, whole)
		}
	}
}

func TestPushAfterClose(t *testing.T) {
	s, _ := NewStream(Options{})
	s.Push("a")
	s.Close()
	if d := s.Push("b"); d != nil {
		t.Errorf("Push after Close = %+v", d)
	}
	if d := s.Close(); d != nil {
		t.Errorf("second Close = %+v", d)
	}
	if m := s.Message(); m.Content != "a" {
		t.Errorf("content = %q", m.Content)
	}
}

func TestDiagnosticError(t *testing.T) {
	m, _ := Parse("abc", Options{Reasoning: "deepseek-r1"})
	if len(m.Diagnostics) != 1 {
		t.Fatalf("%v", m.Diagnostics)
	}
	if got := m.Diagnostics[0].Error(); got != "parse: reasoning not terminated by </think> (at byte 3)" {
		t.Errorf("Error() = %q", got)
	}
	d := Diagnostic{Err: ErrUnknownTool, Offset: 5, Detail: "f"}
	if d.Error() != "parse: call to an undeclared tool (at byte 5): f" || !errorsIs(d, ErrUnknownTool) {
		t.Errorf("Error() = %q", d.Error())
	}
	r, tl := ParserNames()
	for _, n := range append(r, tl...) {
		if _, err := NewStream(Options{Reasoning: n}); err != nil && !errorsIs(err, ErrUnknownParser) {
			t.Error(err)
		}
		if _, err := NewStream(Options{Tools: n}); err != nil && n != "deepseek-r1" && n != "deepseek-v3" {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// vLLM test_deepseekv32_tool_parser.py streaming cases. vLLM streams a long
// string value before its parameter closes (vLLM #52846) and arguments
// before the invoke closes; here a block's calls are held until the block
// closes (BREAKER F28: a call that later turns out malformed or truncated
// must not have been streamed), so the same inputs give no tool-call delta
// before the block end and the whole value after it. The start marker cut
// at every chunk size leaks nothing into content (vLLM #40801).
func TestStreamingVLLMV32(t *testing.T) {
	const fcStart = "<｜DSML｜function_calls>"
	opts := Options{Tools: "deepseekv32", ToolsDecl: tools("emit", `{"type":"object","properties":{"text":{"type":"string"}}}`), Coerce: true, NewID: seqIDs}
	body := strings.Repeat("A", 4096)
	chunks := []string{fcStart + "\n<｜DSML｜invoke name=\"emit\">\n<｜DSML｜parameter name=\"text\" string=\"true\">"}
	chunks = append(chunks, fixedChunks(body, 32)...)
	chunks = append(chunks, "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>")
	s, _ := NewStream(opts)
	var all []Delta
	for i, c := range chunks {
		d := s.Push(c)
		if i < len(chunks)-1 && len(d) > 0 {
			t.Errorf("chunk %d before the block end produced %+v", i, d)
		}
		all = append(all, d...)
	}
	all = append(all, s.Close()...)
	if m := Merge(all); len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"text": "`+body+`"}` {
		t.Errorf("merged = %+v", m)
	}

	s, _ = NewStream(Options{Tools: "deepseekv32", NewID: seqIDs})
	m := Merge(s.Push(fcStart + "\n<｜DSML｜invoke name=\"fn\">\n<｜DSML｜parameter name=\"k\" string=\"true\">val</｜DSML｜parameter>\n"))
	if len(m.ToolCalls) != 0 || m.Content != "" {
		t.Errorf("output before the block end = %+v", m)
	}

	full := fcStart + "\n<｜DSML｜invoke name=\"fn\">\n<｜DSML｜parameter name=\"k\" string=\"true\">v</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
	for size := 1; size <= len(fcStart)+1; size++ {
		merged, _, _ := streamResult(t, Options{Tools: "deepseekv32", NewID: seqIDs}, fixedChunks(full, size))
		if merged.Content != "" || len(merged.ToolCalls) != 1 || merged.ToolCalls[0].Function.Arguments != `{"k": "v"}` {
			t.Errorf("chunk size %d: %+v", size, merged)
		}
	}
}

// TestF28Streaming: BREAKER F28's output (a DSML marker inside a string
// value, and the same text cut by max_tokens at every byte) never yields a
// tool-call delta, streamed rune by rune, and the merged stream equals
// Parse: the text is content.
func TestF28Streaming(t *testing.T) {
	full := f28Head + `Paris of Italy<｜DSML｜parameter name="true">fahrenheit</｜DSML｜tool_calls>`
	for cut := 0; cut <= len(full); cut++ {
		in := full[:cut]
		whole, _ := Parse(in, Options{Tools: "deepseek-v4", Reasoning: "deepseek-v4"})
		s, _ := NewStream(Options{Tools: "deepseek-v4", Reasoning: "deepseek-v4"})
		var deltas []Delta
		for _, r := range in {
			deltas = append(deltas, s.Push(string(r))...)
		}
		deltas = append(deltas, s.Close()...)
		merged := Merge(deltas)
		if len(whole.ToolCalls) != 0 || len(merged.ToolCalls) != 0 {
			t.Fatalf("cut %d: tool calls %+v / %+v", cut, whole.ToolCalls, merged.ToolCalls)
		}
		if strings.ToValidUTF8(in, "") != in {
			continue // a cut inside a rune: compared by the chunking property
		}
		if whole.Content != in || merged.Content != in {
			t.Fatalf("cut %d: content %q / %q, want %q", cut, whole.Content, merged.Content, in)
		}
		if cut >= len("Sure.<｜DSML｜tool_calls>") && !errors.Is(whole.Err(), ErrUnterminatedToolCall) && !errors.Is(whole.Err(), ErrMalformedToolCall) {
			t.Fatalf("cut %d: diagnostics %v", cut, whole.Diagnostics)
		}
	}
}
