package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// sseData returns the JSON of each "data:" line of an SSE body, [DONE]
// left out.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok && line != "[DONE]" {
			out = append(out, line)
		}
	}
	return out
}

// TestHTMLCharsLiteral: '<', '>' and '&' in generated text, logprob tokens,
// error messages and /detokenize come out as themselves, as vLLM's JSON
// (pydantic) writes them, not as Go's \u003c, \u003e, \u0026, in JSON
// bodies and SSE data lines, for chat and completions.
func TestHTMLCharsLiteral(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	const want = "<think>&"
	prompt := `<｜User｜>a ` + want + ` b<｜Assistant｜></think>`
	cases := []struct{ name, path, body string }{
		{"completions", "/v1/completions", `{"prompt":"` + prompt + `","temperature":0,"logprobs":1}`},
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a <b>& c"}],"temperature":0,"logprobs":true,"top_logprobs":1}`},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			body := tc.body
			if stream {
				body = strings.TrimSuffix(body, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
			}
			status, b := post(t, ts.URL, tc.path, body)
			if status != http.StatusOK {
				t.Fatalf("%s: %d %s", tc.name, status, b)
			}
			lit := want
			if tc.name == "chat" {
				lit = "<b>&"
			}
			if !strings.Contains(string(b), "<") || !strings.Contains(string(b), "&") {
				t.Errorf("%s stream=%v: no literal < or & in %s", tc.name, stream, b)
			}
			if got := generate(t, ts.URL, tc.path, tc.body, stream)[0].Text; !strings.Contains(got, lit) {
				t.Errorf("%s stream=%v: text %q lacks %q", tc.name, stream, got, lit)
			}
			for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
				if strings.Contains(string(b), esc) {
					t.Errorf("%s stream=%v: %s in %s", tc.name, stream, esc, b)
				}
			}
		}
	}
	for _, c := range [][2]string{
		{"/detokenize", `{"tokens":[128803,128804]}`},
		{"/v1/chat/completions", `{"model":"<x>&","messages":[{"role":"user","content":"hi"}]}`},
	} {
		_, b := post(t, ts.URL, c[0], c[1])
		if strings.Contains(string(b), `\u00`) || !strings.Contains(string(b), "<") {
			t.Errorf("%s %s: %s", c[0], c[1], b)
		}
	}
}

// TestStreamEndChunk: as vLLM (serving_chat.py, serving_completion.py:
// each engine step is one chunk, its delta, logprobs and finish_reason
// together), a streamed choice's last token, the end-of-sentence token
// whose text is dropped, comes with its logprobs in the chunk that carries
// finish_reason, not in a chunk of its own before it. The streamed
// logprobs are the non-streamed ones, one per completion token (the EOS
// included, as vLLM counts it).
func TestStreamEndChunk(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	const eos = "<｜end▁of▁sentence｜>"
	prompt := `<｜User｜>hello<｜Assistant｜></think>`
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"temperature":0,"logprobs":true}`},
		{"completions", "/v1/completions", `{"prompt":"` + prompt + `","temperature":0,"logprobs":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := generate(t, ts.URL, tc.path, tc.body, false)[0]
			status, b := post(t, ts.URL, tc.path, strings.TrimSuffix(tc.body, "}")+`,"stream":true,"stream_options":{"include_usage":true}}`)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, b)
			}
			var streamed choiceOut
			var usage *dsv4.Usage
			var last wireChoice
			choiceChunks := 0
			for _, line := range sseData(t, b) {
				var ch struct {
					Choices []wireChoice
					Usage   *dsv4.Usage
				}
				if err := json.Unmarshal([]byte(line), &ch); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				if ch.Usage != nil {
					usage = ch.Usage
				}
				for _, c := range ch.Choices {
					if last.FinishReason != nil {
						t.Errorf("a chunk after finish_reason: %s", line)
					}
					streamed.add(c)
					last = c
					choiceChunks++
				}
			}
			if last.FinishReason == nil || *last.FinishReason != "stop" {
				t.Fatalf("no finish chunk in %s", b)
			}
			var lastTokens []string
			if last.Logprobs != nil {
				lastTokens = append(last.Logprobs.Tokens, func() (s []string) {
					for _, e := range last.Logprobs.Content {
						s = append(s, e.Token)
					}
					return
				}()...)
			}
			if len(lastTokens) != 1 || lastTokens[0] != eos {
				t.Errorf("finish chunk's logprobs tokens %q, want [%q]", lastTokens, eos)
			}
			if usage == nil || usage.CompletionTokens != len(streamed.Tokens) {
				t.Errorf("usage %+v, %d streamed logprobs", usage, len(streamed.Tokens))
			}
			if strings.Join(whole.Tokens, "|") != strings.Join(streamed.Tokens, "|") || whole.Text != streamed.Text ||
				strings.Join(intsToStrings(whole.TextOffset), ",") != strings.Join(intsToStrings(streamed.TextOffset), ",") {
				t.Errorf("response %+v\nstream   %+v", whole, streamed)
			}
			// one chunk per token (and the chat role chunk), none for the finish alone
			wantChunks := len(whole.Tokens)
			if tc.name == "chat" {
				wantChunks++
			}
			if choiceChunks != wantChunks {
				t.Errorf("%d choice chunks for %d tokens: %s", choiceChunks, len(whole.Tokens), b)
			}
		})
	}
}

func intsToStrings(v []int) []string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = itoa(x)
	}
	return s
}

// TestPing: GET and POST /ping answer as /health (vLLM's api_server.py
// serves /ping, SageMaker's health check, with its health handler): 200
// with an empty body, 503 while draining.
func TestPing(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		resp, b := roundTrip(t, m, ts.URL+"/ping", "")
		if resp.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("%s /ping: %d %q", m, resp.StatusCode, b)
		}
	}
	ts.srv.Drain()
	if resp, _ := roundTrip(t, http.MethodGet, ts.URL+"/ping", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ping while draining: %d", resp.StatusCode)
	}
}
