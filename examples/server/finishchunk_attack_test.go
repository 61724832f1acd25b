package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestFinishChunkUsageOrder: streamed with n = 2, logprobs, echo (for
// completions), include_usage and continuous_usage_stats, ending on EOS
// and on max_tokens: each choice has exactly one finish chunk and nothing
// after it, the usage-only chunk comes last, after both finish chunks, with
// the completion tokens of both choices, each finish chunk's running usage
// counts all of its choice's tokens, and the streamed tokens, text and
// text_offset equal the non-streamed answer's.
func TestFinishChunkUsageOrder(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	prompt := `<｜User｜>hello<｜Assistant｜></think>`
	for _, tc := range []struct{ name, path, body string }{
		{"chat eos", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"temperature":0,"logprobs":true,"n":2}`},
		{"chat length", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"temperature":0,"logprobs":true,"n":2,"max_tokens":2}`},
		{"completions eos echo", "/v1/completions", `{"prompt":"` + prompt + `","temperature":0,"logprobs":1,"n":2,"echo":true}`},
		{"completions length", "/v1/completions", `{"prompt":"` + prompt + `","temperature":0,"logprobs":0,"n":2,"max_tokens":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := generate(t, ts.URL, tc.path, tc.body, false)
			status, b := post(t, ts.URL, tc.path, strings.TrimSuffix(tc.body, "}")+
				`,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, b)
			}
			lines := sseData(t, b)
			streamed := make([]choiceOut, 2)
			finished := map[int]int{}
			var final *dsv4.Usage
			echoed := 0 // logprob tokens of the echoed prompt
			if strings.Contains(tc.body, `"echo":true`) {
				echoed = 4
			}
			want := func(i int) int { return len(whole[i].Tokens) - echoed }
			for i, line := range lines {
				var ch struct {
					Choices []wireChoice
					Usage   *dsv4.Usage
				}
				if err := json.Unmarshal([]byte(line), &ch); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				if len(ch.Choices) == 0 {
					if i != len(lines)-1 || ch.Usage == nil {
						t.Fatalf("usage-only chunk %d of %d: %s", i, len(lines), line)
					}
					final = ch.Usage
					continue
				}
				for _, c := range ch.Choices {
					if finished[c.Index] > 0 {
						t.Fatalf("choice %d: a chunk after its finish: %s", c.Index, line)
					}
					streamed[c.Index].add(c)
					if c.FinishReason != nil {
						finished[c.Index]++
						if ch.Usage == nil || ch.Usage.CompletionTokens != want(c.Index) {
							t.Errorf("choice %d finish chunk usage %+v, %d tokens", c.Index, ch.Usage, want(c.Index))
						}
					}
				}
			}
			if finished[0] != 1 || finished[1] != 1 {
				t.Fatalf("finish chunks %v", finished)
			}
			if final == nil || final.CompletionTokens != want(0)+want(1) {
				t.Fatalf("final usage %+v", final)
			}
			for i := range 2 {
				w, s := whole[i], streamed[i]
				if w.Text != s.Text || !slices.Equal(w.Tokens, s.Tokens) || !slices.Equal(w.TextOffset, s.TextOffset) || w.Finish != s.Finish {
					t.Errorf("choice %d: response %+v\nstream   %+v", i, w, s)
				}
			}
		})
	}
}

// TestStreamOptionsEmptyObject: stream_options {} on a non-streamed
// request is served (vLLM's validate_stream_options tests truthiness), one
// with a member is a 400 naming stream_options; chat and completions.
func TestStreamOptionsEmptyObject(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream_options":{}}`, 200},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream_options":{"include_usage":false}}`, 400},
		{"/v1/completions", `{"prompt":"hi","max_tokens":2,"stream":false,"stream_options":{ }}`, 200},
		{"/v1/completions", `{"prompt":"hi","max_tokens":2,"stream_options":{"include_usage":true}}`, 400},
	} {
		status, b := post(t, ts.URL, tc.path, tc.body)
		if status != tc.status || status == 400 && !strings.Contains(string(b), `"param":"stream_options"`) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, status, b)
		}
	}
}
