package parse

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzCheck parses text whole and in chunks cut from seed, and checks the
// invariants: no panic, stream == whole, arguments are JSON objects (with
// no DSML markup for the DSML parsers), text
// is only taken from the input, valid UTF-8 in gives valid UTF-8 out.
func fuzzCheck(t *testing.T, opts Options, text string, seed uint64) {
	opts.NewID = seqIDs
	whole, err := Parse(text, opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	cuts := make([]int, rng.IntN(len(text)+1))
	for i := range cuts {
		cuts[i] = rng.IntN(len(text) + 1)
	}
	merged, _, deltas := streamResult(t, opts, cutAt(text, cuts))
	if !reflect.DeepEqual(merged, whole) {
		t.Fatalf("stream %#v\nwhole %#v", merged, whole)
	}
	for _, c := range whole.ToolCalls {
		// A JSON object as text: numbers are kept as written (1E700 is valid JSON that does
		// not fit a float64; the parsers pass non-string DSML parameters through verbatim).
		var obj map[string]any
		dec := json.NewDecoder(strings.NewReader(c.Function.Arguments))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil || dec.More() {
			t.Fatalf("arguments of %s not a JSON object: %q", c.Function.Name, c.Function.Arguments)
		}
		if opts.Tools == "deepseek-v4" || opts.Tools == "deepseekv32" {
			if strings.Contains(c.Function.Arguments, "<"+dsmlToken) || strings.Contains(c.Function.Arguments, "</"+dsmlToken) {
				t.Fatalf("DSML markup inside the arguments of %s: %q", c.Function.Name, c.Function.Arguments)
			}
		}
	}
	if !isSubsequence(whole.ReasoningContent, text) || !isSubsequence(whole.Content, text) {
		t.Fatalf("text invented: %+v", whole)
	}
	if utf8.ValidString(text) {
		for _, d := range deltas {
			if !utf8.ValidString(d.Content) || !utf8.ValidString(d.ReasoningContent) {
				t.Fatalf("delta splits a rune: %+v", d)
			}
		}
	}
	checkDeltaShape(t, deltas)
}

func addSeeds(f *testing.F) {
	for i, e := range corpus() {
		f.Add(e.text, uint64(i), uint8(i))
	}
}

// FuzzReasoning fuzzes the reasoning parsers (no tool parser).
func FuzzReasoning(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, text string, seed uint64, mode uint8) {
		opts := []Options{
			{Reasoning: "deepseek-r1"},
			{Reasoning: "deepseek-v4", Thinking: true},
			{Reasoning: "deepseek-v3", Thinking: true},
			{Reasoning: "deepseek-v4"},
		}[int(mode)%4]
		fuzzCheck(t, opts, text, seed)
	})
}

// FuzzToolCalls fuzzes the four tool-call parsers, with and without
// reasoning, declared tools and coercion.
func FuzzToolCalls(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, text string, seed uint64, mode uint8) {
		opts := Options{Tools: []string{"deepseek-v4", "deepseekv32", "deepseekv31", "deepseekv3"}[int(mode)%4]}
		if mode&4 != 0 {
			opts.Reasoning, opts.Thinking = "deepseek-v4", true
		}
		if mode&8 != 0 {
			opts.ToolsDecl, opts.Coerce = synthTools, mode&16 != 0
		}
		fuzzCheck(t, opts, text, seed)
	})
}
