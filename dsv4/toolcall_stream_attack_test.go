package dsv4

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestChatStreamCallsParallelAndStop drives ChatStream with StreamCalls
// (req.Stream) on a block of two calls, n = 2: with parallel_tool_calls
// false only call 0 is streamed (header then fragments, in both choices)
// and the accumulated stream equals Chat's answer; with a stop string
// landing inside the second call's value the first call stays whole.
func TestChatStreamCallsParallelAndStop(t *testing.T) {
	text := "Checking.\n\n<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Zürich \"<&>\" \\n</｜DSML｜parameter>\n</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"tz\" string=\"true\">Europe/Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n" +
		"</｜DSML｜tool_calls>"
	run := func(t *testing.T, extra string, stream bool) (*ChatResponse, []*ChatChunk) {
		e := newFakeEngine(&fakeBackend{script: scriptText(text)}, EngineOptions{})
		defer e.Close(context.Background())
		e.chat.newParser = v4Parsers(t)
		body := `{"messages":[{"role":"user","content":"q"}],"tools":[` +
			`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},` +
			`{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}],` +
			`"max_tokens":400,"temperature":0,"n":2` + extra + `}`
		var req ChatRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		req.Stream = stream
		if !stream {
			r, err := e.Chat(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			return r, nil
		}
		it, err := e.ChatStream(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		var acc ChatAccumulator
		var chunks []*ChatChunk
		for ch, err := range it {
			if err != nil {
				t.Fatal(err)
			}
			acc.Add(ch)
			c := *ch
			chunks = append(chunks, &c)
		}
		return acc.Response(), chunks
	}
	strip := func(r *ChatResponse) string {
		for _, ch := range r.Choices {
			for k := range ch.Message.ToolCalls {
				ch.Message.ToolCalls[k].ID = ""
			}
		}
		b, _ := json.Marshal(r.Choices)
		return string(b)
	}
	t.Run("parallel false", func(t *testing.T) {
		streamed, chunks := run(t, `,"parallel_tool_calls":false`, true)
		whole, _ := run(t, `,"parallel_tool_calls":false`, false)
		seen := map[[2]int]int{}
		for _, ch := range chunks {
			for _, tc := range ch.Delta.ToolCalls {
				seen[[2]int{ch.Index, tc.Index}]++
			}
		}
		if len(seen) != 2 || seen[[2]int{0, 0}] < 2 || seen[[2]int{1, 0}] < 2 {
			t.Fatalf("tool-call deltas per (choice, call): %v", seen)
		}
		if s, w := strip(streamed), strip(whole); s != w {
			t.Fatalf("stream %s\nwhole  %s", s, w)
		}
		for _, ch := range whole.Choices {
			if len(ch.Message.ToolCalls) != 1 || ch.FinishReason != "tool_calls" ||
				ch.Message.ToolCalls[0].Function.Arguments != `{"city": "Zürich \"<&>\" \\n"}` {
				t.Fatalf("choice %d: %+v", ch.Index, ch)
			}
		}
	})
	t.Run("parallel", func(t *testing.T) {
		streamed, _ := run(t, "", true)
		whole, _ := run(t, "", false)
		for _, ch := range streamed.Choices {
			if len(ch.Message.ToolCalls) != 2 || ch.Message.ToolCalls[1].Function.Arguments != `{"tz": "Europe/Paris"}` ||
				ch.Message.ToolCalls[0].ID == ch.Message.ToolCalls[1].ID {
				t.Fatalf("choice %d: %+v", ch.Index, ch.Message.ToolCalls)
			}
		}
		if s, w := strip(streamed), strip(whole); s != w {
			t.Fatalf("stream %s\nwhole  %s", s, w)
		}
	})
	t.Run("stop inside the second call", func(t *testing.T) {
		streamed, chunks := run(t, `,"stop":["Paris"]`, true)
		for _, ch := range streamed.Choices {
			if len(ch.Message.ToolCalls) < 1 || ch.Message.ToolCalls[0].Function.Arguments != `{"city": "Zürich \"<&>\" \\n"}` {
				t.Fatalf("choice %d: %+v", ch.Index, ch.Message.ToolCalls)
			}
			if ch.Message.Content != nil && strings.Contains(*ch.Message.Content, "Paris") {
				t.Fatalf("stop string in content: %q", *ch.Message.Content)
			}
		}
		fin := 0
		for _, ch := range chunks {
			if ch.FinishReason != "" {
				fin++
			}
		}
		if fin != 2 {
			t.Fatalf("%d finish chunks", fin)
		}
	})
}
