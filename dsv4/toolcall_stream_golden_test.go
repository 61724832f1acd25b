package dsv4

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/parse"
)

// TestChatStreamGoldenToolCalls streams every DeepSeek reference-encoder
// completion with tool calls (../parse/testdata/official_v4.json.gz) token
// by token through ChatStream, with the real deepseek-v4 parsers on the
// fake byte-level backend, and checks the chunks against the OpenAI / vLLM
// streaming convention (a streamed request: ChatRequest.Stream): (1) a
// call's first delta carries index, id, type
// "function" and the name, with arguments empty or a first fragment, and
// its later deltas only index and argument fragments; (2) the fragments
// concatenate to exactly the golden arguments, and come in more chunks
// than there are calls (streamed, not whole); (3) the accumulated stream
// equals the non-streamed Chat answer. Odd rows run with n = 2.
func TestChatStreamGoldenToolCalls(t *testing.T) {
	f, err := os.Open("../parse/testdata/official_v4.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Mode      string `json:"mode"`
		Text      string `json:"text"`
		ToolCalls []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
	}
	if err := json.NewDecoder(zr).Decode(&rows); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, r := range rows {
		if len(r.ToolCalls) == 0 {
			continue
		}
		n++
		nChoices := 1 + i%2 // odd rows: n = 2
		t.Run(fmt.Sprintf("row%d", i), func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText(r.Text)}, EngineOptions{})
			defer e.Close(context.Background())
			e.chat.newParser = v4Parsers(t)
			names := map[string]bool{}
			var tools []string
			for _, c := range r.ToolCalls {
				if !names[c.Name] {
					names[c.Name] = true
					tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":%q,"parameters":{"type":"object"}}}`, c.Name))
				}
			}
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"q"}],"tools":[%s],"chat_template_kwargs":{"thinking":%v},"max_tokens":%d,"temperature":0,"n":%d}`,
				strings.Join(tools, ","), r.Mode == "thinking", len(r.Text)+8, nChoices)
			newReq := func(stream bool) *ChatRequest {
				var req ChatRequest
				if err := json.Unmarshal([]byte(body), &req); err != nil {
					t.Fatal(err)
				}
				req.Stream = stream
				return &req
			}
			stream, err := e.ChatStream(context.Background(), newReq(true))
			if err != nil {
				t.Fatal(err)
			}
			var acc ChatAccumulator
			type key struct{ choice, call int }
			seen := map[key]bool{}
			args := map[key]*strings.Builder{}
			callChunks := 0
			for ch, err := range stream {
				if err != nil {
					t.Fatal(err)
				}
				acc.Add(ch)
				if len(ch.Delta.ToolCalls) > 0 {
					callChunks++
				}
				for _, tc := range ch.Delta.ToolCalls {
					k := key{ch.Index, tc.Index}
					if !seen[k] {
						seen[k] = true
						args[k] = &strings.Builder{}
						if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
							t.Fatalf("first delta of call %d: %+v, want id, type function and name", tc.Index, tc)
						}
					} else if tc.ID != "" || tc.Type != "" || tc.Function.Name != "" {
						t.Fatalf("later delta of call %d repeats the header: %+v", tc.Index, tc)
					}
					args[k].WriteString(tc.Function.Arguments)
				}
			}
			if len(seen) != nChoices*len(r.ToolCalls) {
				t.Fatalf("%d streamed calls, golden %d x %d choices", len(seen), len(r.ToolCalls), nChoices)
			}
			if callChunks <= nChoices*len(r.ToolCalls) {
				t.Errorf("tool calls in %d chunks for %d calls: not streamed", callChunks, nChoices*len(r.ToolCalls))
			}
			for c := 0; c < nChoices; c++ {
				for j, g := range r.ToolCalls {
					if got := args[key{c, j}].String(); got != g.Arguments {
						t.Errorf("choice %d call %d: fragments concatenate to %q, golden %q", c, j, got, g.Arguments)
					}
				}
			}
			streamed := acc.Response()
			whole, err := e.Chat(context.Background(), newReq(false))
			if err != nil {
				t.Fatal(err)
			}
			for _, resp := range []*ChatResponse{streamed, whole} {
				for _, ch := range resp.Choices {
					for k := range ch.Message.ToolCalls {
						ch.Message.ToolCalls[k].ID = ""
					}
				}
			}
			sj, _ := json.Marshal(streamed)
			wj, _ := json.Marshal(whole)
			if string(sj) != string(wj) {
				t.Errorf("accumulated stream %s\nnon-streamed %s", sj, wj)
			}
			for _, ch := range whole.Choices {
				for j, c := range r.ToolCalls {
					if g := ch.Message.ToolCalls[j].Function; g.Name != c.Name || g.Arguments != c.Arguments {
						t.Errorf("non-streamed choice %d call %d: %s %s, golden %s %s", ch.Index, j, g.Name, g.Arguments, c.Name, c.Arguments)
					}
				}
			}
		})
	}
	if n < 50 {
		t.Fatalf("only %d golden rows with tool calls", n)
	}
}

// v4Parsers is a fake engine's chatCodec.newParser for DeepSeek-V4 output:
// the V4 reasoning and tool-call parsers (tool calls parsed when tools is
// set, streamed as parsed when streamCalls is), as the real codec builds
// them without a tools declaration.
func v4Parsers(t *testing.T) func(thinking, tools, streamCalls bool, _ []Tool) outputParser {
	return func(thinking, tools, streamCalls bool, _ []Tool) outputParser {
		opts := parse.Options{Reasoning: "deepseek-v4", Thinking: thinking, StreamCalls: streamCalls}
		if tools {
			opts.Tools = "deepseek-v4"
		}
		s, err := parse.NewStream(opts)
		if err != nil {
			t.Fatal(err)
		}
		return parseStream{s}
	}
}
