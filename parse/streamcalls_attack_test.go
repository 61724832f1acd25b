package parse

import (
	"math/rand/v2"
	"reflect"
	"testing"
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
