package parse

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"unicode/utf8"
)

// TestStreamCallsAwkwardValues: StreamCalls on well-formed blocks whose
// names and values hold JSON-awkward text ('<', '"', '\', unicode,
// U+2028, control characters, text that looks like DSML), several calls
// in one block, non-string parameters, thinking with the block after
// </think>, and content around the block: every chunking's merged stream
// equals Parse, the delta shape holds, and call i carries index i.
func TestStreamCallsAwkwardValues(t *testing.T) {
	const (
		open  = "<｜DSML｜tool_calls>\n"
		close = "</｜DSML｜tool_calls>"
	)
	inv := func(name, params string) string {
		return "<｜DSML｜invoke name=\"" + name + "\">\n" + params + "</｜DSML｜invoke>\n"
	}
	str := func(k, v string) string {
		return "<｜DSML｜parameter name=\"" + k + "\" string=\"true\">" + v + "</｜DSML｜parameter>\n"
	}
	raw := func(k, v string) string {
		return "<｜DSML｜parameter name=\"" + k + "\" string=\"false\">" + v + "</｜DSML｜parameter>\n"
	}
	cases := []struct {
		name     string
		thinking bool
		text     string
		calls    int
	}{
		{"awkward strings", false, "Let me check <b>&amp;</b>.\n\n" + open +
			inv("search", str("q", `a<b && "c" \d \u003c`+"\u2028\t\x01é中🙂")+str("path", `C:\dir\"x"`)) + close, 1},
		{"tag-looking text", false, open + inv("echo", str("text", "<｜User｜> </parameter> & </b>")) + close, 1},
		{"three calls", false, open + inv("a", str("x", "1")) + inv("b", raw("n", "42")+raw("o", `{"k": [1, "<>"]}`)) +
			inv("c", "") + close, 3},
		{"thinking then call", true, "plan <tool> here</think>ok " + open + inv("get_weather", str("city", "Zürich \"<>\"")) + close, 1},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range cases {
		opts := Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: c.thinking, NewID: seqIDs}
		whole, err := Parse(c.text, opts)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Err() != nil || len(whole.ToolCalls) != c.calls {
			t.Fatalf("%s: Parse: %d calls, %v", c.name, len(whole.ToolCalls), whole.Err())
		}
		opts.StreamCalls = true
		var runes []string
		for _, r := range c.text {
			runes = append(runes, string(r))
		}
		for _, chunks := range append(chunkings(rng, c.text, 30), runes, []string{c.text}) {
			merged, own, deltas := streamResult(t, opts, chunks)
			checkDeltaShape(t, deltas)
			if !reflect.DeepEqual(merged, whole) || !reflect.DeepEqual(own, whole) {
				t.Fatalf("%s: chunks %q\nstream: %#v\nwhole:  %#v", c.name, chunks, merged, whole)
			}
			next := 0
			for _, d := range deltas {
				for _, tc := range d.ToolCalls {
					if tc.ID != "" {
						if tc.Index != next || tc.ID != seqIDs(next) {
							t.Fatalf("%s: header %+v, want index %d", c.name, tc, next)
						}
						next++
					}
				}
			}
		}
	}
}

// TestStreamCallsCutPrefix: a well-formed three-call block cut at every
// character boundary (max_tokens, a stop string), streamed with StreamCalls: nothing is
// taken back, so every call streamed from the cut text must be a call of
// the whole text's answer with arguments that are a prefix of its
// arguments (same index, same name), and headers come in index order.
// (Close may then add text held back as a possible marker start, such as
// a final '<', to the open call: the cut text's value does end there.)
func TestStreamCallsCutPrefix(t *testing.T) {
	text := "Let me look.\n\n<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"q\" string=\"true\">a<b \"c\" é</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"n\" string=\"false\">{\"k\": [1, 2]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"open\">\n<｜DSML｜parameter name=\"url\" string=\"true\">https://x/?a=1&b=2</｜DSML｜parameter>\n</｜DSML｜invoke>\n" +
		"</｜DSML｜tool_calls>"
	opts := Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", NewID: seqIDs}
	whole, err := Parse(text, opts)
	if err != nil || whole.Err() != nil || len(whole.ToolCalls) != 3 {
		t.Fatalf("Parse: %+v %v", whole, err)
	}
	opts.StreamCalls = true
	for cut := 0; cut <= len(text); cut++ {
		if cut < len(text) && !utf8.RuneStart(text[cut]) {
			continue // a cut inside a character ends the text with an invalid byte (U+FFFD)
		}
		in := text[:cut]
		st, err := NewStream(opts)
		if err != nil {
			t.Fatal(err)
		}
		var pushed []Delta
		for _, r := range in {
			pushed = append(pushed, st.Push(string(r))...)
		}
		merged := Merge(pushed)
		next := 0
		for _, d := range pushed {
			for _, tc := range d.ToolCalls {
				if tc.ID != "" && tc.Index != next {
					t.Fatalf("cut %d: header of call %d, want %d", cut, tc.Index, next)
				} else if tc.ID != "" {
					next++
				}
			}
		}
		checkDeltaShape(t, append(pushed, st.Close()...))
		if len(merged.ToolCalls) > len(whole.ToolCalls) {
			t.Fatalf("cut %d: %d calls", cut, len(merged.ToolCalls))
		}
		for i, c := range merged.ToolCalls {
			w := whole.ToolCalls[i]
			if c.Function.Name != w.Function.Name || len(c.Function.Arguments) > len(w.Function.Arguments) ||
				w.Function.Arguments[:len(c.Function.Arguments)] != c.Function.Arguments {
				t.Fatalf("cut %d (%q): call %d %s %q, whole %s %q", cut, in[max(0, cut-30):], i,
					c.Function.Name, c.Function.Arguments, w.Function.Name, w.Function.Arguments)
			}
		}
	}
}
