package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// post sends body to path and returns the status and the response body.
func post(t *testing.T, url, path, body string) (int, []byte) {
	t.Helper()
	resp, b := roundTrip(t, http.MethodPost, url+path, body)
	return resp.StatusCode, b
}

// roundTrip sends body (as JSON) with method to url and returns the
// response, its body read to the end and closed.
func roundTrip(t *testing.T, method, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// choiceOut is one choice as a client assembles it, from a response or
// from the stream's chunks.
type choiceOut struct {
	Text, Reasoning string
	Finish          string
	Matched         any
	// Reason is stop_reason's JSON on the choice's finishing chunk ("" when
	// absent there).
	Reason     string
	Tokens     []string
	TextOffset []int
}

// wireChoice decodes a chat or completions choice, whole or streamed.
type wireChoice struct {
	Index   int    `json:"index"`
	Text    string `json:"text"`
	Message *struct {
		Content          *string `json:"content"`
		ReasoningContent *string `json:"reasoning_content"`
	} `json:"message"`
	Delta *struct {
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
	} `json:"delta"`
	Logprobs *struct {
		Tokens     []string `json:"tokens"`
		TextOffset []int    `json:"text_offset"`
		Content    []struct {
			Token string `json:"token"`
		} `json:"content"`
	} `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	MatchedStop  any             `json:"matched_stop"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

func (c *choiceOut) add(w wireChoice) {
	c.Text += w.Text
	if w.Message != nil {
		if w.Message.Content != nil {
			c.Text += *w.Message.Content
		}
		if w.Message.ReasoningContent != nil {
			c.Reasoning += *w.Message.ReasoningContent
		}
	}
	if w.Delta != nil {
		c.Text += w.Delta.Content
		c.Reasoning += w.Delta.ReasoningContent
	}
	if w.Logprobs != nil {
		c.Tokens = append(c.Tokens, w.Logprobs.Tokens...)
		c.TextOffset = append(c.TextOffset, w.Logprobs.TextOffset...)
		for _, e := range w.Logprobs.Content {
			c.Tokens = append(c.Tokens, e.Token)
		}
	}
	if w.FinishReason != nil {
		c.Finish = *w.FinishReason
		c.Matched = w.MatchedStop
		c.Reason = string(w.StopReason)
	}
}

// generate posts a chat or completions request (stream decides the form)
// and returns its choices.
func generate(t *testing.T, url, path, body string, stream bool) []choiceOut {
	t.Helper()
	if stream {
		body = strings.TrimSuffix(body, "}") + `,"stream":true}`
	}
	status, b := post(t, url, path, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s: status %d: %s", path, body, status, b)
	}
	var out []choiceOut
	addAll := func(cs []wireChoice) {
		for _, w := range cs {
			for len(out) <= w.Index {
				out = append(out, choiceOut{})
			}
			out[w.Index].add(w)
		}
	}
	if !stream {
		var r struct{ Choices []wireChoice }
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		addAll(r.Choices)
		return out
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct{ Choices []wireChoice }
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("bad chunk %q: %v", line, err)
		}
		addAll(ch.Choices)
	}
	return out
}

// TestParamErrors: the request values that vLLM / OpenAI refuse and that
// were once accepted get a 400 invalid_request_error naming the field.
func TestParamErrors(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, path, body, param string
	}{
		{"repetition_penalty 0", "/v1/chat/completions", `{` + msgs + `,"repetition_penalty":0}`, "repetition_penalty"},
		{"repetition_penalty negative", "/v1/chat/completions", `{` + msgs + `,"repetition_penalty":-0.5}`, "repetition_penalty"},
		{"completions repetition_penalty 0", "/v1/completions", `{"prompt":"x","repetition_penalty":0}`, "repetition_penalty"},
		{"parameters string", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "tools[0].function.parameters"},
		{"parameters array", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{}}},{"type":"function","function":{"name":"g","parameters":[]}}]}`, "tools[1].function.parameters"},
		{"best_of 3", "/v1/completions", `{"prompt":"x","best_of":3}`, "best_of"},
		{"best_of above n", "/v1/completions", `{"prompt":"x","n":2,"best_of":3}`, "best_of"},
		{"tool_choice unknown string", "/v1/chat/completions", `{` + msgs + `,"tool_choice":"sometimes"}`, "tool_choice"},
		{"tool_choice number", "/v1/chat/completions", `{` + msgs + `,"tool_choice":5}`, "tool_choice"},
		{"tool_choice object", "/v1/chat/completions", `{` + msgs + `,"tool_choice":{"type":"x"}}`, "tool_choice"},
		{"content number", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":5}]}`, "messages[1].content"},
		{"content object", "/v1/chat/completions", `{"messages":[{"role":"user","content":{}}]}`, "messages[0].content"},
		{"content parts", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":[5]}]}`, "messages[2].content"},
		{"role number", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":7,"content":"b"}]}`, "messages[1].role"},
		{"empty task", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a","task":""}]}`, "messages[0].task"},
		{"mixed prompt", "/v1/completions", `{"prompt":["a",[3]]}`, "prompt"},
		{"prompt object", "/v1/completions", `{"prompt":{}}`, "prompt"},
		{"tokenize content number", "/tokenize", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b := post(t, ts.URL, tc.path, tc.body)
			var e struct {
				Error struct {
					Type, Param, Message string
				}
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if status != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Param != tc.param {
				t.Errorf("status %d %s, want 400 with param %q", status, b, tc.param)
			}
			if strings.HasPrefix(tc.param, "messages[") && !strings.Contains(e.Error.Message, tc.param) {
				t.Errorf("message %q does not name %s", e.Error.Message, tc.param)
			}
		})
	}
	// The values next to them are accepted.
	for _, tc := range []struct{ name, path, body string }{
		{"repetition_penalty 1.2", "/v1/chat/completions", `{` + msgs + `,"repetition_penalty":1.2,"max_tokens":2}`},
		{"parameters null", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":null}}],"max_tokens":2}`},
		{"best_of n", "/v1/completions", `{"prompt":"x","n":2,"best_of":2,"max_tokens":2}`},
		{"best_of 1", "/v1/completions", `{"prompt":"x","best_of":1,"max_tokens":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, b := post(t, ts.URL, tc.path, tc.body); status != http.StatusOK {
				t.Errorf("status %d %s", status, b)
			}
		})
	}
}

// TestThinkingKwargTruthy: chat_template_kwargs.thinking is read with
// Jinja's truthiness ("yes" selects thinking mode, "" does not).
func TestThinkingKwargTruthy(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	for _, tc := range []struct {
		name, value string
		thinking    bool
	}{
		{"yes", `"yes"`, true},
		{"1", `1`, true},
		{"empty", `""`, false},
		{"0", `0`, false},
		{"false", `false`, false},
	} {
		for _, stream := range []bool{false, true} {
			body := `{"messages":[{"role":"user","content":"hi"}],"temperature":0,"chat_template_kwargs":{"thinking":` + tc.value + `}}`
			c := generate(t, ts.URL, "/v1/chat/completions", body, stream)[0]
			if (c.Reasoning == "Thinking about it.") != tc.thinking || c.Text != "You said: hi" {
				t.Errorf("%s stream=%v: reasoning %q content %q, want thinking %v", tc.name, stream, c.Reasoning, c.Text, tc.thinking)
			}
		}
	}
}

// TestStopTokenIDsStreamAgree: a non-special stop token id ends the output
// without being part of its text (vLLM V1 and SGLang), with finish_reason
// "stop" and matched_stop the id, alike in the response and the stream, for
// chat and completions.
func TestStopTokenIDsStreamAgree(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	tok := ts.b.tok
	ans := tok.Encode("You said: hello", tokenizer.EncodeOptions{})
	if len(ans) < 3 {
		t.Fatalf("answer tokens %v", ans)
	}
	stop := ans[1] // " said"
	if tok.IsSpecial(stop) {
		t.Fatalf("token %d is special", stop)
	}
	before, _ := tok.Decode(ans[:1], tokenizer.DecodeOptions{})
	prompt := `<｜User｜>hello<｜Assistant｜></think>`
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"temperature":0,"logprobs":true,"stop_token_ids":[` + itoa(int(stop)) + `]}`},
		{"completions", "/v1/completions", `{"prompt":"` + prompt + `","temperature":0,"logprobs":0,"stop_token_ids":[` + itoa(int(stop)) + `]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]choiceOut
			for i, stream := range []bool{false, true} {
				got[i] = generate(t, ts.URL, tc.path, tc.body, stream)[0]
				c := got[i]
				if c.Text != before || c.Finish != "stop" || c.Matched != float64(stop) || len(c.Tokens) != 2 {
					t.Errorf("stream=%v: text %q finish %q matched %v tokens %q; want %q stop %d and 2 tokens", stream, c.Text, c.Finish, c.Matched, c.Tokens, before, stop)
				}
			}
			if got[0].Text != got[1].Text || got[0].Finish != got[1].Finish || got[0].Matched != got[1].Matched {
				t.Errorf("response %+v and stream %+v differ", got[0], got[1])
			}
		})
	}
}

// TestIncludeStopStrInOutputServer: vLLM's include_stop_str_in_output
// request field keeps a matched stop string, and a non-special stop token,
// in the text; finish_reason "stop" and matched_stop are unchanged, and the
// streamed deltas add up to the non-streamed text, for chat and
// completions.
func TestIncludeStopStrInOutputServer(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	ans := ts.b.tok.Encode("You said: héllo 世界", tokenizer.EncodeOptions{})
	stop := ans[1] // " said"
	ids := `,"stop_token_ids":[` + itoa(int(stop)) + `]`
	for _, tc := range []struct {
		name, fields, text string
		matched            any
		reason             string // stop_reason (vLLM), JSON
	}{
		{"stop string dropped", `,"stop":["llo 世"]`, "You said: hé", "llo 世", `"llo 世"`},
		{"stop string kept", `,"stop":["llo 世"],"include_stop_str_in_output":true`, "You said: héllo 世", "llo 世", `"llo 世"`},
		{"stop token dropped", ids, "You", float64(stop), itoa(int(stop))},
		{"stop token kept", ids + `,"include_stop_str_in_output":true`, "You said", float64(stop), itoa(int(stop))},
		{"eos kept out", `,"include_stop_str_in_output":true`, "You said: héllo 世界", float64(idEOS), "null"},
	} {
		for _, ep := range []struct{ path, body string }{
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"héllo 世界"}],"temperature":0` + tc.fields + `}`},
			{"/v1/completions", `{"prompt":"<｜User｜>héllo 世界<｜Assistant｜></think>","temperature":0,"max_tokens":30` + tc.fields + `}`},
		} {
			for _, stream := range []bool{false, true} {
				c := generate(t, ts.URL, ep.path, ep.body, stream)[0]
				if c.Text != tc.text || c.Finish != "stop" || c.Matched != tc.matched || c.Reason != tc.reason {
					t.Errorf("%s %s stream=%v: text %q finish %q matched %v stop_reason %s; want %q stop %v %s", tc.name, ep.path, stream, c.Text, c.Finish, c.Matched, c.Reason, tc.text, tc.matched, tc.reason)
				}
			}
		}
	}
}

// TestEchoTextOffset: with echo, a completion's logprobs cover the prompt
// tokens first (vLLM's prompt_logprobs under echo) and text_offset values
// are positions in the returned text, the echoed prompt included (vLLM's
// text_offset), counted in code points as vLLM counts Python strs, not
// bytes; each offset is where that token's text starts (the first prompt
// token's 0, the first generated token's the prompt's length), and the
// stop token's (reported, not in the text) is the text's end. The prompts
// carry non-ASCII text ("｜" of the special tokens, "héllo 世界" echoed
// back by the mock), so a byte count would differ; streamed and
// non-streamed offsets are the same.
func TestEchoTextOffset(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	prompt := "<｜User｜>Hello<｜Assistant｜></think>"
	uprompt := "<｜User｜>héllo 世界 ☃<｜Assistant｜></think>"
	ids := ts.b.tok.Encode(prompt, tokenizer.EncodeOptions{})
	idsJSON, _ := json.Marshal(ids)
	uids := ts.b.tok.Encode(uprompt, tokenizer.EncodeOptions{})
	uidsJSON, _ := json.Marshal(uids)
	runes := func(s string) int { return len([]rune(s)) }
	for _, tc := range []struct {
		name, prompt string
		echoed       string // the prompt's text
		echo         bool
		n            int
		start        int // the first generated token's offset
		first        int // its index in the logprobs (the echoed prompt tokens')
	}{
		{"text echo", `"` + prompt + `"`, prompt, true, 1, runes(prompt), len(ids)},
		{"ids echo", string(idsJSON), prompt, true, 1, runes(prompt), len(ids)},
		{"no echo", `"` + prompt + `"`, prompt, false, 1, 0, 0},
		{"echo n=2", `"` + prompt + `"`, prompt, true, 2, runes(prompt), len(ids)},
		{"non-ascii text echo", `"` + uprompt + `"`, uprompt, true, 1, runes(uprompt), len(uids)},
		{"non-ascii ids echo", string(uidsJSON), uprompt, true, 1, runes(uprompt), len(uids)},
		{"non-ascii no echo", `"` + uprompt + `"`, uprompt, false, 1, 0, 0},
	} {
		var offsets [2][]int
		for si, stream := range []bool{false, true} {
			body := `{"prompt":` + tc.prompt + `,"temperature":0,"logprobs":1,"max_tokens":20,"n":` + itoa(tc.n)
			if tc.echo {
				body += `,"echo":true`
			}
			body += `}`
			choices := generate(t, ts.URL, "/v1/completions", body, stream)
			if len(choices) != tc.n {
				t.Fatalf("%s: %d choices", tc.name, len(choices))
			}
			offsets[si] = choices[0].TextOffset
			for i, c := range choices {
				if len(c.TextOffset) <= tc.first || len(c.TextOffset) != len(c.Tokens) {
					t.Fatalf("%s stream=%v choice %d: offsets %v tokens %q", tc.name, stream, i, c.TextOffset, c.Tokens)
				}
				if c.TextOffset[0] != 0 || c.TextOffset[tc.first] != tc.start {
					t.Errorf("%s stream=%v choice %d: offsets %d and %d (token %d), want 0 and %d", tc.name, stream, i, c.TextOffset[0], c.TextOffset[tc.first], tc.first, tc.start)
				}
				if tc.echo && !strings.HasPrefix(c.Text, tc.echoed) {
					t.Errorf("%s: text %q does not start with the prompt", tc.name, c.Text)
				}
				text := []rune(c.Text)
				splits := 0
				for k, off := range c.TextOffset {
					if k == len(c.TextOffset)-1 && c.Finish == "stop" {
						// the stop token (EOS): reported, not in the text
						if off != len(text) {
							t.Errorf("%s stream=%v choice %d: stop token at %d, want the text's end %d", tc.name, stream, i, off, len(text))
						}
						continue
					}
					// A byte-level token holding part of a character ("☃"
					// is split) reads U+FFFD on the wire: only its whole
					// characters are checked (a token continuing a
					// character has that character's offset: dsv4.TextPos).
					tok := c.Tokens[k]
					if j := strings.IndexRune(tok, utf8.RuneError); j >= 0 {
						tok = tok[:j]
						splits++
					}
					if off > len(text) || !strings.HasPrefix(string(text[off:]), tok) {
						t.Errorf("%s stream=%v choice %d: token %d %q not at offset %d of %q", tc.name, stream, i, k, c.Tokens[k], off, c.Text)
					}
				}
				if tc.echoed == uprompt && splits == 0 {
					t.Errorf("%s: no token splits a character (tokens %q): the case is not covered", tc.name, c.Tokens)
				}
			}
		}
		if !slices.Equal(offsets[0], offsets[1]) {
			t.Errorf("%s: offsets %v, streamed %v", tc.name, offsets[0], offsets[1])
		}
	}
}

// TestContinuousUsageStats: stream_options.continuous_usage_stats (with
// include_usage, vLLM's extension) puts the choice's usage so far on every
// chunk, chat and completions; with include_usage alone the choice chunks
// carry none and only the last chunk has usage.
func TestContinuousUsageStats(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	for _, ep := range []struct{ path, req string }{
		{"/v1/chat/completions", `"messages":[{"role":"user","content":"hello"}]`},
		{"/v1/completions", `"prompt":"<｜User｜>hello<｜Assistant｜></think>"`},
	} {
		for _, continuous := range []bool{false, true} {
			opts := `{"include_usage":true}`
			if continuous {
				opts = `{"include_usage":true,"continuous_usage_stats":true}`
			}
			status, b := post(t, ts.URL, ep.path, `{`+ep.req+`,"temperature":0,"max_tokens":5,"stream":true,"stream_options":`+opts+`}`)
			if status != http.StatusOK {
				t.Fatalf("%s: %d %s", ep.path, status, b)
			}
			withUsage, chunks, lastCompletion := 0, 0, 0
			for line := range strings.SplitSeq(string(b), "\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var ch struct {
					Choices []json.RawMessage
					Usage   *dsv4.Usage
				}
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatal(err)
				}
				chunks++
				if ch.Usage == nil {
					continue
				}
				withUsage++
				u := ch.Usage
				if u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.CompletionTokens < lastCompletion {
					t.Errorf("%s continuous=%v: usage %+v after %d completion tokens", ep.path, continuous, *u, lastCompletion)
				}
				lastCompletion = u.CompletionTokens
			}
			want := 1
			if continuous {
				want = chunks
			}
			if withUsage != want || lastCompletion == 0 {
				t.Errorf("%s continuous=%v: %d of %d chunks with usage (want %d), last completion tokens %d", ep.path, continuous, withUsage, chunks, want, lastCompletion)
			}
		}
	}
}

// TestMaxTokensOverContext: max_tokens beyond the context, alone or with
// the prompt, gets vLLM's context message with param max_tokens and code
// context_length_exceeded, chat (max_tokens or max_completion_tokens) and
// completions; below 1 it is a 400 naming the field.
func TestMaxTokensOverContext(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	ctxLen := ts.eng.MaxContext()
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, path, body, param, code, prefix string
	}{
		{"chat max_tokens context+1", "/v1/chat/completions", `{` + msgs + `,"max_tokens":` + itoa(ctxLen+1) + `}`, "max_tokens", "context_length_exceeded",
			"'max_tokens' or 'max_completion_tokens' is too large: " + itoa(ctxLen+1) + ". This model's maximum context length is " + itoa(ctxLen) + " tokens and your request has "},
		{"chat prompt + max_tokens", "/v1/chat/completions", `{` + msgs + `,"max_tokens":` + itoa(ctxLen-1) + `}`, "max_tokens", "context_length_exceeded",
			"'max_tokens' or 'max_completion_tokens' is too large: " + itoa(ctxLen-1) + "."},
		{"chat max_completion_tokens", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":` + itoa(ctxLen+1) + `}`, "max_tokens", "context_length_exceeded",
			"'max_tokens' or 'max_completion_tokens' is too large: " + itoa(ctxLen+1) + "."},
		{"completions", "/v1/completions", `{"prompt":"hi","max_tokens":` + itoa(ctxLen+1) + `}`, "max_tokens", "context_length_exceeded",
			"'max_tokens' or 'max_completion_tokens' is too large: " + itoa(ctxLen+1) + "."},
		{"zero", "/v1/chat/completions", `{` + msgs + `,"max_tokens":0}`, "max_tokens", "", "max_tokens must be at least 1"},
	} {
		status, b := post(t, ts.URL, tc.path, tc.body)
		var e struct {
			Error struct {
				Message, Param string
				Code           *string
			}
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: %s", tc.name, b)
		}
		code := ""
		if e.Error.Code != nil {
			code = *e.Error.Code
		}
		if status != http.StatusBadRequest || e.Error.Param != tc.param || code != tc.code || !strings.HasPrefix(e.Error.Message, tc.prefix) {
			t.Errorf("%s: %d %s; want param %q code %q message %q...", tc.name, status, b, tc.param, tc.code, tc.prefix)
		}
	}
}

// TestEchoWithoutGeneration: completions echo with max_tokens 0 is served
// as vLLM serves it (CompletionRequest.to_sampling_params'
// echo_without_generation: one token is generated and dropped): the text
// is the prompt, the logprobs cover the prompt tokens only (the first
// null), finish_reason is the generated token's, usage counts it; streamed
// equals not streamed. max_tokens 0 without echo stays a 400.
func TestEchoWithoutGeneration(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	prompt := "<｜User｜>Hello<｜Assistant｜></think>"
	ids := ts.b.tok.Encode(prompt, tokenizer.EncodeOptions{})
	body := `{"prompt":"` + prompt + `","temperature":0,"logprobs":1,"max_tokens":0,"echo":true}`
	var got [2]choiceOut
	for si, stream := range []bool{false, true} {
		choices := generate(t, ts.URL, "/v1/completions", body, stream)
		if len(choices) != 1 {
			t.Fatalf("stream=%v: %d choices", stream, len(choices))
		}
		c := choices[0]
		if c.Text != prompt || len(c.Tokens) != len(ids) || c.Finish == "" {
			t.Errorf("stream=%v: text %q, %d logprob tokens (want %q, %d), finish %q", stream, c.Text, len(c.Tokens), prompt, len(ids), c.Finish)
		}
		got[si] = c
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("streamed %+v, not streamed %+v", got[1], got[0])
	}
	status, b := post(t, ts.URL, "/v1/completions", body)
	var r struct {
		Usage dsv4.Usage `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); status != http.StatusOK || err != nil || r.Usage.PromptTokens != len(ids) || r.Usage.CompletionTokens != 1 {
		t.Errorf("status %d usage %+v (%v), want %d prompt tokens and 1 completion token", status, r.Usage, err, len(ids))
	}
	status, b = post(t, ts.URL, "/v1/completions", `{"prompt":"Hello","max_tokens":0}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), `"param":"max_tokens"`) {
		t.Errorf("max_tokens 0 without echo: %d %s, want 400 naming max_tokens", status, b)
	}
}
