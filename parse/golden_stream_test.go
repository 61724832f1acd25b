package parse

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestOfficialV4StreamedToolCalls streams every reference-encoder completion
// that holds tool calls one rune at a time (finer than any tokenization),
// holding the block and with StreamCalls, and checks the stream's
// tool-call shape against the OpenAI / vLLM convention: a call's first
// delta carries index, id, type "function" and the name with no
// arguments, its later deltas only the index and argument fragments; the
// fragments concatenate to exactly the arguments of Parse and of the
// golden row; and the merged stream equals Parse. With StreamCalls the
// first call's header and argument fragments come before the block's
// closing marker has been seen.
func TestOfficialV4StreamedToolCalls(t *testing.T) {
	rows := loadOfficial(t)
	n := 0
	for i, r := range rows {
		if len(r.ToolCalls) == 0 {
			continue
		}
		n++
		for _, eager := range []bool{false, true} {
			t.Run(fmt.Sprintf("row%d/stream=%v", i, eager), func(t *testing.T) {
				opts := officialOptions(r.Mode)
				opts.StreamCalls = eager
				opts.NewID = func(idx int) string { return fmt.Sprintf("call_%d", idx) }
				want, err := Parse(r.Text, opts)
				if err != nil {
					t.Fatal(err)
				}
				s, err := NewStream(opts)
				if err != nil {
					t.Fatal(err)
				}
				var all []Delta
				end := strings.LastIndex(r.Text, "</｜DSML｜tool_calls>")
				before := -1 // deltas with tool calls before the block's end
				for rest := r.Text; rest != ""; {
					if before < 0 && len(r.Text)-len(rest) >= end {
						before = 0
						for _, d := range all {
							before += len(d.ToolCalls)
						}
					}
					_, size := utf8.DecodeRuneInString(rest)
					all = append(all, s.Push(rest[:size])...)
					rest = rest[size:]
				}
				all = append(all, s.Close()...)
				if end < 0 {
					t.Fatal("no closing marker")
				}
				if eager && before < 2 {
					t.Errorf("%d tool-call deltas before the block closed, want the header and fragments", before)
				}
				if !eager && before != 0 {
					t.Errorf("%d tool-call deltas before the block closed, want none", before)
				}

				seen := map[int]bool{}
				args := map[int]*strings.Builder{}
				for _, d := range all {
					for _, tc := range d.ToolCalls {
						if !seen[tc.Index] {
							seen[tc.Index] = true
							args[tc.Index] = &strings.Builder{}
							if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" || tc.Function.Arguments != "" {
								t.Fatalf("first delta of call %d: %+v, want id, type function, name, no arguments", tc.Index, tc)
							}
							continue
						}
						if tc.ID != "" || tc.Type != "" || tc.Function.Name != "" {
							t.Fatalf("later delta of call %d repeats the header: %+v", tc.Index, tc)
						}
						args[tc.Index].WriteString(tc.Function.Arguments)
					}
				}
				if len(seen) != len(r.ToolCalls) || len(want.ToolCalls) != len(r.ToolCalls) {
					t.Fatalf("%d streamed calls, %d parsed, %d golden", len(seen), len(want.ToolCalls), len(r.ToolCalls))
				}
				for j, c := range r.ToolCalls {
					got := args[j].String()
					if got != c.Arguments || got != want.ToolCalls[j].Function.Arguments {
						t.Errorf("call %d: fragments concatenate to %q, golden %q, Parse %q", j, got, c.Arguments, want.ToolCalls[j].Function.Arguments)
					}
					if want.ToolCalls[j].Function.Name != c.Name {
						t.Errorf("call %d: name %q, golden %q", j, want.ToolCalls[j].Function.Name, c.Name)
					}
				}
				got := Merge(all)
				want.Diagnostics = nil
				if !reflect.DeepEqual(got, want) {
					t.Errorf("merged stream %+v\nParse %+v", got, want)
				}
			})
		}
	}
	if n < 50 {
		t.Fatalf("only %d golden rows with tool calls", n)
	}
}

// TestStreamCallsChunkingProperty: with StreamCalls, for every corpus
// output that parses without a diagnostic (well-formed), every chunking's
// merged stream equals Parse; for the others (cut, corrupted), the
// stream keeps the delta shape and never panics.
func TestStreamCallsChunkingProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	clean := 0
	for _, e := range corpus() {
		opts := e.opts
		opts.NewID = seqIDs
		whole, err := Parse(e.text, opts)
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		opts.StreamCalls = true
		ok := whole.Err() == nil
		if ok {
			clean++
		}
		for _, chunks := range chunkings(rng, e.text, 20) {
			merged, own, deltas := streamResult(t, opts, chunks)
			checkDeltaShape(t, deltas)
			if !ok {
				continue
			}
			if !reflect.DeepEqual(merged, whole) || !reflect.DeepEqual(own, whole) {
				t.Fatalf("%s: chunks %q\nstream: %#v\nwhole:  %#v", e.name, chunks, merged, whole)
			}
		}
	}
	if clean < 50 {
		t.Fatalf("%d well-formed outputs", clean)
	}
}

// TestStreamCallsCutBlock pins StreamCalls' documented divergence: a block
// cut inside an invoke (max_tokens) after the call's header was emitted
// keeps the call in the stream, and the block's text is content as well;
// Parse (and a held stream) has that text as content and no call.
func TestStreamCallsCutBlock(t *testing.T) {
	in := "Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Par"
	opts := Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", NewID: seqIDs}
	whole, err := Parse(in, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.ToolCalls) != 0 || whole.Content != in {
		t.Fatalf("Parse: %+v", whole)
	}
	opts.StreamCalls = true
	merged, _, deltas := streamResult(t, opts, []string{in})
	checkDeltaShape(t, deltas)
	if len(merged.ToolCalls) != 1 || merged.ToolCalls[0].Function.Name != "get_weather" ||
		merged.ToolCalls[0].Function.Arguments != `{"city": "Par` || merged.Content != in {
		t.Fatalf("StreamCalls: %+v", merged)
	}
}
