package dsv4

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// wantParam checks that err is a *ParamError wrapping ErrInvalidParams that
// names param, or nil when param is "".
func wantParam(t *testing.T, err error, param string) {
	t.Helper()
	if param == "" {
		if err != nil {
			t.Fatalf("valid request refused: %v", err)
		}
		return
	}
	var pe *ParamError
	if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("got %v, want a ParamError for %s", err, param)
	}
	if pe.Param != param {
		t.Errorf("param %q, want %q (%v)", pe.Param, param, err)
	}
}

// drain runs a chunk iterator to its end.
func drain(t *testing.T, stream func(func(*ChatChunk, error) bool)) {
	t.Helper()
	for _, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRepetitionPenaltyRange: vLLM refuses repetition_penalty <= 0 with a
// 400; an explicit 0 on the wire is refused too (SamplingParams reads 0 as
// unset), for chat and completions alike.
func TestRepetitionPenaltyRange(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	for _, tc := range []struct {
		name, field, param string // field "" = absent; param "" = valid
	}{
		{"absent", ``, ""},
		{"1", `"repetition_penalty":1`, ""},
		{"small", `"repetition_penalty":0.01`, ""},
		{"10", `"repetition_penalty":10`, ""},
		{"null", `"repetition_penalty":null`, ""},
		{"0", `"repetition_penalty":0`, "repetition_penalty"},
		{"0.0", `"repetition_penalty":0.0`, "repetition_penalty"},
		{"-0", `"repetition_penalty":-0`, "repetition_penalty"},
		{"negative", `"repetition_penalty":-1`, "repetition_penalty"},
		{"too big", `"repetition_penalty":10.5`, "repetition_penalty"},
	} {
		extra := ""
		if tc.field != "" {
			extra = "," + tc.field
		}
		t.Run("chat "+tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"max_tokens":2`+extra+`}`), &r); err != nil {
				t.Fatal(err)
			}
			_, err := e.Chat(context.Background(), &r)
			wantParam(t, err, tc.param)
		})
		t.Run("completions "+tc.name, func(t *testing.T) {
			var r CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q","max_tokens":2`+extra+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := e.CompleteStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err == nil {
				drain(t, s)
			}
		})
	}
}

// TestThinkingTruthiness: chat_template_kwargs.thinking / enable_thinking
// select thinking mode by Jinja's truthiness, as apply_chat_template's
// kwargs do in a template's `{% if thinking %}`.
func TestThinkingTruthiness(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("r</think>ok")}, EngineOptions{})
	defer closeEngine(t, e)
	for _, tc := range []struct {
		name, kwargs string
		thinking     bool
	}{
		{"absent", `{}`, false},
		{"true", `{"thinking":true}`, true},
		{"false", `{"thinking":false}`, false},
		{"yes", `{"thinking":"yes"}`, true},
		{"string false", `{"thinking":"false"}`, true},
		{"empty string", `{"thinking":""}`, false},
		{"1", `{"thinking":1}`, true},
		{"0", `{"thinking":0}`, false},
		{"0.5", `{"thinking":0.5}`, true},
		{"null", `{"thinking":null}`, false},
		{"list", `{"thinking":[0]}`, true},
		{"empty list", `{"thinking":[]}`, false},
		{"object", `{"thinking":{"a":1}}`, true},
		{"empty object", `{"thinking":{}}`, false},
		{"enable_thinking yes", `{"enable_thinking":"yes"}`, true},
		{"enable_thinking 0", `{"enable_thinking":0}`, false},
		{"either truthy", `{"thinking":0,"enable_thinking":"on"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"temperature":0,"chat_template_kwargs":`+tc.kwargs+`}`), &r); err != nil {
				t.Fatal(err)
			}
			if got := r.thinkingMode(); got != tc.thinking {
				t.Fatalf("thinkingMode %v, want %v", got, tc.thinking)
			}
			resp, err := e.Chat(context.Background(), &r)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			gotThinking := c.Message.ReasoningContent != nil && *c.Message.ReasoningContent == "r"
			if gotThinking != tc.thinking || (resp.Usage.CompletionTokensDetails != nil) != tc.thinking {
				t.Errorf("reasoning %v usage %+v, want thinking %v", c.Message.ReasoningContent, resp.Usage, tc.thinking)
			}
		})
	}
}

// TestToolParametersObject: a tool's parameters, when present and not
// null, must be a JSON object (OpenAI's API refuses anything else).
func TestToolParametersObject(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	tool := func(name, params string) string {
		s := `{"type":"function","function":{"name":"` + name + `"`
		if params != "" {
			s += `,"parameters":` + params
		}
		return s + `}}`
	}
	for _, tc := range []struct {
		name, tools, param string
	}{
		{"absent", tool("f", ""), ""},
		{"null", tool("f", "null"), ""},
		{"empty object", tool("f", "{}"), ""},
		{"schema", tool("f", `{"type":"object","properties":{"a":{"type":"string"}}}`), ""},
		{"string", tool("f", `"x"`), "tools[0].function.parameters"},
		{"number", tool("f", `5`), "tools[0].function.parameters"},
		{"array", tool("f", `[{"type":"object"}]`), "tools[0].function.parameters"},
		{"bool", tool("f", `true`), "tools[0].function.parameters"},
		{"second tool", tool("f", "{}") + "," + tool("g", `"x"`), "tools[1].function.parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"max_tokens":2,"tools":[`+tc.tools+`]}`), &r); err != nil {
				t.Fatal(err)
			}
			_, err := e.Chat(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err != nil && !strings.Contains(err.Error(), "JSON object") {
				t.Errorf("message %q does not say what is expected", err)
			}
		})
	}
}

// TestCompletionBestOf: best_of is accepted only where it selects nothing
// (absent, 1, or n); any other value is a 400 naming best_of rather than
// being ignored.
func TestCompletionBestOf(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	for _, tc := range []struct {
		name, fields, param string
		choices             int
	}{
		{"absent", ``, "", 1},
		{"1", `,"best_of":1`, "", 1},
		{"null", `,"best_of":null`, "", 1},
		{"equal n", `,"n":3,"best_of":3`, "", 3},
		{"1 with n", `,"n":2,"best_of":1`, "", 2},
		{"stream equal n", `,"n":2,"best_of":2,"stream":true`, "", 2},
		{"3", `,"best_of":3`, "best_of", 0},
		{"above n", `,"n":2,"best_of":4`, "best_of", 0},
		{"below n", `,"n":3,"best_of":2`, "best_of", 0},
		{"0", `,"best_of":0`, "best_of", 0},
		{"negative", `,"best_of":-1`, "best_of", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q","max_tokens":2,"temperature":0`+tc.fields+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := e.CompleteStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err != nil {
				return
			}
			finished := 0
			for ch, err := range s {
				if err != nil {
					t.Fatal(err)
				}
				if ch.FinishReason != "" {
					finished++
				}
			}
			if finished != tc.choices {
				t.Errorf("%d choices, want %d", finished, tc.choices)
			}
		})
	}
}

// TestStopTokenIDsText: a stop token id ends the output and is not part of
// its text whether it is special or not (vLLM V1's detokenizer skips a
// stop-terminated step's last token; SGLang trims a matched stop token);
// finish_reason is "stop", matched_stop the id, its logprob is reported,
// and the streamed deltas add up to the same text as the response.
func TestStopTokenIDsText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		stop    []int32
		content string
		matched any
		tokens  int // completion tokens, the stop token included
	}{
		{"plain token", "ab9cd", []int32{'9'}, "ab", int32('9'), 3},
		{"first token", "9cd", []int32{'9'}, "", int32('9'), 1},
		{"special token", "ab<A>cd", []int32{fakeAsst}, "ab", int32(fakeAsst), 3},
		{"first of two ids", "abcd", []int32{'d', 'c'}, "ab", int32('c'), 3},
		{"eos", "ab", []int32{'z'}, "ab", int32(fakeEOS), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText(tc.script)}, EngineOptions{})
			defer closeEngine(t, e)
			req := chatReq("q")
			req.StopTokenIDs = tc.stop
			req.Logprobs = true
			resp, err := e.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			if *c.Message.Content != tc.content || c.FinishReason != "stop" || c.MatchedStop != tc.matched {
				t.Errorf("content %q finish %q matched %v; want %q stop %v", *c.Message.Content, c.FinishReason, c.MatchedStop, tc.content, tc.matched)
			}
			if resp.Usage.CompletionTokens != tc.tokens || c.Logprobs == nil || len(c.Logprobs.Content) != tc.tokens {
				t.Errorf("completion tokens %d, logprobs %v; want %d", resp.Usage.CompletionTokens, c.Logprobs, tc.tokens)
			}
			stream, err := e.ChatStream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for ch, err := range stream {
				if err != nil {
					t.Fatal(err)
				}
				text.WriteString(ch.Delta.Content)
			}
			if text.String() != tc.content {
				t.Errorf("streamed %q, want %q", text.String(), tc.content)
			}
		})
	}
}

// TestIncludeStopStrInOutput: vLLM's include_stop_str_in_output (default
// false) keeps a matched stop string in the text (cut after it:
// StopChecker.check_stop_strings with include_in_output) and detokenizes a
// non-special stop token (vllm/v1/engine/detokenizer.py skips the last
// token of a stop-terminated step only without it; skip_special_tokens
// still drops a special one, EOS included). finish_reason stays "stop" and
// matched_stop the string or id; chat and completions, streamed or not,
// give the same text.
func TestIncludeStopStrInOutput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		fields  string // JSON fields added to the request
		text    string
		matched any
	}{
		{"stop string off", "one two three", `"stop":[" thr","zzz"]`, "one two", " thr"},
		{"stop string on", "one two three", `"stop":[" thr","zzz"],"include_stop_str_in_output":true`, "one two thr", " thr"},
		{"stop string explicit false", "one two three", `"stop":[" thr"],"include_stop_str_in_output":false`, "one two", " thr"},
		{"stop string in one token on", "abcdef", `"stop":["c"],"include_stop_str_in_output":true`, "abc", "c"},
		{"non-ascii stop string on", "héllo 世界!", `"stop":["世"],"include_stop_str_in_output":true`, "héllo 世", "世"},
		{"stop token off", "ab9cd", `"stop_token_ids":[57]`, "ab", int32('9')},
		{"stop token on", "ab9cd", `"stop_token_ids":[57],"include_stop_str_in_output":true`, "ab9", int32('9')},
		{"special stop token on", "ab<A>cd", `"stop_token_ids":[258],"include_stop_str_in_output":true`, "ab", int32(fakeAsst)},
		{"eos on", "ab", `"include_stop_str_in_output":true`, "ab", int32(fakeEOS)},
		{"no stop on", "abc", `"stop":["zz"],"include_stop_str_in_output":true`, "abc", int32(fakeEOS)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText(tc.script)}, EngineOptions{})
			defer closeEngine(t, e)
			check := func(kind, text, finish string, matched any) {
				t.Helper()
				if text != tc.text || finish != "stop" || matched != tc.matched {
					t.Errorf("%s: text %q finish %q matched %v; want %q stop %v", kind, text, finish, matched, tc.text, tc.matched)
				}
			}
			// chat, non-streamed and streamed
			var cr ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"temperature":0,"max_tokens":32,`+tc.fields+`}`), &cr); err != nil {
				t.Fatal(err)
			}
			resp, err := e.Chat(context.Background(), &cr)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			content := ""
			if c.Message.Content != nil {
				content = *c.Message.Content
			}
			check("chat", content, c.FinishReason, c.MatchedStop)
			stream, err := e.ChatStream(context.Background(), &cr)
			if err != nil {
				t.Fatal(err)
			}
			text, finish, matched := streamText(t, stream)
			check("chat stream", text, finish, matched)
			// completions (prompt ends with the fake assistant token, where
			// the script starts), streamed deltas only: the server's
			// non-streamed response is their concatenation
			var pr CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q<A>","temperature":0,"max_tokens":32,`+tc.fields+`}`), &pr); err != nil {
				t.Fatal(err)
			}
			cs, err := e.CompleteStream(context.Background(), &pr)
			if err != nil {
				t.Fatal(err)
			}
			text, finish, matched = streamText(t, cs)
			check("completion", text, finish, matched)
		})
	}
}

// streamText concatenates a one-choice stream's content deltas and returns
// its finish reason and matched stop.
func streamText(t *testing.T, stream func(func(*ChatChunk, error) bool)) (string, string, any) {
	t.Helper()
	var text strings.Builder
	finish := ""
	var matched any
	for ch, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ch.Delta.Content)
		if ch.FinishReason != "" {
			finish, matched = ch.FinishReason, ch.MatchedStop
		}
	}
	return text.String(), finish, matched
}

// TestTextOffsetCodePoints: text_offset counts code points, as vLLM's
// len() of Python strs, not bytes; a token that splits a UTF-8 character
// (byte-level BPE) is held until the character completes, so the token
// continuing it starts at that character, and the offsets of one stream
// fed in pieces equal those of the whole.
func TestTextOffsetCodePoints(t *testing.T) {
	sh := "世" // 3 bytes: split over tokens below
	for _, tc := range []struct {
		name   string
		start  int
		tokens []string
		want   []int
		end    int
	}{
		{"ascii", 0, []string{"ab", "c", " d"}, []int{0, 2, 3}, 5},
		{"latin accents", 0, []string{"h", "é", "llo"}, []int{0, 1, 2}, 5},
		{"cjk tokens", 6, []string{"世界", "!", "é"}, []int{6, 8, 9}, 10},
		{"split character", 0, []string{"a", sh[:2], sh[2:], "b"}, []int{0, 1, 1, 2}, 3},
		{"split in three", 1, []string{sh[:1], sh[1:2], sh[2:] + "x"}, []int{1, 1, 1}, 3},
		{"invalid byte", 0, []string{"\xff", "a"}, []int{0, 1}, 2},
		{"empty token", 0, []string{"", "a"}, []int{0, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var entries []LogprobEntry
			for _, s := range tc.tokens {
				entries = append(entries, LogprobEntry{Token: s})
			}
			whole := LegacyLogprobs(entries, tc.start)
			if !slices.Equal(whole.TextOffset, tc.want) {
				t.Errorf("whole: offsets %v, want %v", whole.TextOffset, tc.want)
			}
			pos := &TextPos{}
			pos.Advance(strings.Repeat("x", tc.start))
			var pieces []int
			for _, e := range entries {
				pieces = append(pieces, LegacyLogprobsAt([]LogprobEntry{e}, pos).TextOffset...)
			}
			if !slices.Equal(pieces, tc.want) || pos.Offset() != tc.end {
				t.Errorf("pieces: offsets %v end %d, want %v %d", pieces, pos.Offset(), tc.want, tc.end)
			}
		})
	}
}

// TestStopReason: vLLM's stop_reason is nil for the model's EOS and for
// "length", the id for a stop_token_ids hit (also the EOS id when
// ignore_eos), the string for a stop-string hit; the same in the chat
// response, the chat stream's last chunk and a completion stream, and
// matched_stop (SGLang) is kept beside it.
func TestStopReason(t *testing.T) {
	for _, tc := range []struct {
		name, script, fields string
		finish               string
		reason, matched      any
	}{
		{"eos", "ab", `"max_tokens":32`, "stop", nil, int32(fakeEOS)},
		{"eos listed in stop_token_ids", "ab", `"stop_token_ids":[` + strconv.Itoa(fakeEOS) + `]`, "stop", nil, int32(fakeEOS)},
		{"eos with ignore_eos", "ab", `"ignore_eos":true,"stop_token_ids":[` + strconv.Itoa(fakeEOS) + `]`, "stop", int32(fakeEOS), int32(fakeEOS)},
		{"stop token", "ab9cd", `"stop_token_ids":[57]`, "stop", int32('9'), int32('9')},
		{"stop string", "one two three", `"stop":[" thr"]`, "stop", " thr", " thr"},
		{"length", "abcdef", `"max_tokens":2`, "length", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText(tc.script)}, EngineOptions{})
			defer closeEngine(t, e)
			check := func(kind, finish string, reason, matched any) {
				t.Helper()
				if finish != tc.finish || reason != tc.reason || matched != tc.matched {
					t.Errorf("%s: finish %q stop_reason %#v matched_stop %#v; want %q %#v %#v", kind, finish, reason, matched, tc.finish, tc.reason, tc.matched)
				}
			}
			cr, pr := fakeRequests(t, ","+tc.fields, ","+tc.fields)
			resp, err := e.Chat(context.Background(), cr)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			check("chat", c.FinishReason, c.StopReason, c.MatchedStop)
			for kind, s := range bothStreams(t, e, cr, pr) {
				finish, finals := "", 0
				var reason, matched any
				for ch, err := range s {
					if err != nil {
						t.Fatal(err)
					}
					if ch.StopReason != nil && ch.FinishReason == "" {
						t.Errorf("%s: stop_reason %v on a chunk without finish_reason", kind, ch.StopReason)
					}
					if ch.FinishReason != "" {
						finish, reason, matched = ch.FinishReason, ch.StopReason, ch.MatchedStop
						finals++
					}
				}
				if finals != 1 {
					t.Errorf("%s: %d chunks with finish_reason", kind, finals)
				}
				check(kind, finish, reason, matched)
			}
		})
	}
}

// TestRunningUsage: every chunk of a choice carries that choice's usage so
// far (vLLM's continuous_usage_stats numbers): the role delta 0 completion
// tokens, then the tokens generated up to the chunk, the finishing chunk
// the choice's total; the choices' totals add up to the final usage, chat
// and completions.
func TestRunningUsage(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("abcd")}, EngineOptions{})
	defer closeEngine(t, e)
	cr, pr := fakeRequests(t, `,"n":2,"stream":true`, `,"max_tokens":3,"stream":true`)
	pr.Prompt = Prompt{Texts: []string{"q<A>", "qq<A>"}}
	for kind, stream := range bothStreams(t, e, cr, pr) {
		last := map[int]Usage{}
		var final *Usage
		for ch, err := range stream {
			if err != nil {
				t.Fatal(err)
			}
			if ch.Usage != nil {
				if ch.RunningUsage != nil {
					t.Errorf("%s: running usage on the usage chunk", kind)
				}
				final = ch.Usage
				continue
			}
			u := ch.RunningUsage
			if u == nil || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Fatalf("%s: chunk %+v: running usage %+v", kind, ch, u)
			}
			if ch.Delta.Role != "" && u.CompletionTokens != 0 {
				t.Errorf("%s: role delta with %d completion tokens", kind, u.CompletionTokens)
			}
			if prev, ok := last[ch.Index]; ok && (u.CompletionTokens < prev.CompletionTokens || u.PromptTokens != prev.PromptTokens) {
				t.Errorf("%s choice %d: usage %+v after %+v", kind, ch.Index, *u, prev)
			}
			last[ch.Index] = *u
		}
		if final == nil || len(last) != 2 {
			t.Fatalf("%s: final usage %v, %d choices", kind, final, len(last))
		}
		if sum := last[0].CompletionTokens + last[1].CompletionTokens; sum != final.CompletionTokens || sum == 0 {
			t.Errorf("%s: choices' completion tokens add up to %d, usage %d", kind, sum, final.CompletionTokens)
		}
		if kind == "completion stream" && last[0].PromptTokens == last[1].PromptTokens {
			t.Errorf("completion: both prompts %d tokens, want their own lengths", last[0].PromptTokens)
		}
	}
}

// TestContextLengthErrorText: a request that does not fit the context
// gets vLLM's message (the limit, the prompt's tokens and max_tokens) and
// names max_tokens when that is what does not fit; errors.Is holds for
// ErrContextLength.
func TestContextLengthErrorText(t *testing.T) {
	for _, tc := range []struct {
		name         string
		prompt, maxT int
		want, param  string
	}{
		{"max_tokens over the context", 5, 4097, "'max_tokens' or 'max_completion_tokens' is too large: 4097. This model's maximum context length is 4096 tokens and your request has 5 input tokens (4097 > 4096 - 5). (parameter=max_tokens, value=4097)", "max_tokens"},
		{"prompt + max_tokens", 100, 4000, "'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's maximum context length is 4096 tokens and your request has 100 input tokens (4000 > 4096 - 100). (parameter=max_tokens, value=4000)", "max_tokens"},
		{"prompt alone", 4096, 0, "This model's maximum context length is 4096 tokens. However, your request has 4096 input tokens. Please reduce the length of the input messages.", "messages"},
	} {
		e := newFakeEngine(&fakeBackend{script: scriptText("ab"), ctxLen: 4096}, EngineOptions{})
		prompt := make([]int32, tc.prompt)
		_, err := e.Generate(context.Background(), prompt, SamplingParams{MaxTokens: tc.maxT})
		var ce *ContextLengthError
		if !errors.Is(err, ErrContextLength) || !errors.As(err, &ce) || err.Error() != tc.want || ce.Param() != tc.param {
			t.Errorf("%s: %v (param %v), want %q (param %s)", tc.name, err, ce, tc.want, tc.param)
		}
		closeEngine(t, e)
	}
}

// TestMinTokensStopStrings: as vLLM's detokenizer, stop strings are not
// looked for until more than min_tokens tokens were generated, and a later
// match must end after that point (it may begin inside it); chat and
// completions, with and without include_stop_str_in_output.
func TestMinTokensStopStrings(t *testing.T) {
	for _, tc := range []struct {
		name, script, fields, text string
		matched                    any
	}{
		{"stop inside min_tokens ignored", "abcabc", `"stop":["a"],"min_tokens":1`, "abc", "a"},
		{"no min_tokens", "abcabc", `"stop":["a"]`, "", "a"},
		{"stop after min_tokens", "abcabc", `"stop":["b"],"min_tokens":3`, "abca", "b"},
		{"match straddling min_tokens", "abcabc", `"stop":["cab"],"min_tokens":3`, "ab", "cab"},
		{"straddling, included", "abcabc", `"stop":["cab"],"min_tokens":3,"include_stop_str_in_output":true`, "abcab", "cab"},
		{"only inside min_tokens", "abcdef", `"stop":["bc"],"min_tokens":4`, "abcdef", int32(fakeEOS)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText(tc.script)}, EngineOptions{})
			defer closeEngine(t, e)
			cr, pr := fakeRequests(t, `,"max_tokens":32,`+tc.fields, `,"max_tokens":32,`+tc.fields)
			for kind, stream := range bothStreams(t, e, cr, pr) {
				if text, _, matched := streamText(t, stream); text != tc.text || matched != tc.matched {
					t.Errorf("%s: %q %v, want %q %v", kind, text, matched, tc.text, tc.matched)
				}
			}
		})
	}
}

// fakeRequests decodes a chat request (one user message "q") and a
// completion request (prompt "q<A>", where the fake script starts), each
// with the JSON fields given (after a leading comma).
func fakeRequests(t *testing.T, chatFields, completionFields string) (*ChatRequest, *CompletionRequest) {
	t.Helper()
	var cr ChatRequest
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"temperature":0`+chatFields+`}`), &cr); err != nil {
		t.Fatal(err)
	}
	var pr CompletionRequest
	if err := json.Unmarshal([]byte(`{"prompt":"q<A>","temperature":0`+completionFields+`}`), &pr); err != nil {
		t.Fatal(err)
	}
	return &cr, &pr
}

// bothStreams starts cr's chat stream and pr's completion stream, by kind.
func bothStreams(t *testing.T, e *Engine, cr *ChatRequest, pr *CompletionRequest) map[string]iter.Seq2[*ChatChunk, error] {
	t.Helper()
	cs, err := e.ChatStream(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := e.CompleteStream(context.Background(), pr)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]iter.Seq2[*ChatChunk, error]{"chat stream": cs, "completion stream": ps}
}

// TestVLLMRequestShapeChecks: the request-shape checks of vLLM's
// ChatCompletionRequest / CompletionRequest validators are 400s naming the
// field here too: stream_options without stream (validate_stream_options:
// "Stream options can only be defined when `stream=True`"), an empty tools
// array and a tool_choice other than "none" without tools
// (check_tool_usage). The accepted forms around them stay accepted.
func TestVLLMRequestShapeChecks(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	const tool = `{"type":"function","function":{"name":"get","parameters":{"type":"object"}}}`
	for _, tc := range []struct {
		name, fields, param string // param "" = valid
	}{
		{"stream_options without stream", `,"stream_options":{"include_usage":true}`, "stream_options"},
		{"stream_options with stream false", `,"stream":false,"stream_options":{"include_usage":true}`, "stream_options"},
		{"stream_options null", `,"stream_options":null`, ""},
		{"stream_options empty without stream", `,"stream_options":{}`, ""},
		{"stream_options false member without stream", `,"stream_options":{"include_usage":false}`, "stream_options"},
		{"stream_options with stream", `,"stream":true,"stream_options":{"include_usage":true}`, ""},
		{"tools empty", `,"tools":[]`, "tools"},
		{"tools empty, tool_choice none", `,"tools":[],"tool_choice":"none"`, "tools"},
		{"tools null", `,"tools":null`, ""},
		{"tool_choice auto without tools", `,"tool_choice":"auto"`, "tool_choice"},
		{"tool_choice none without tools", `,"tool_choice":"none"`, ""},
		{"tool_choice null without tools", `,"tool_choice":null`, ""},
		{"tool_choice auto with tools", `,"tools":[` + tool + `],"tool_choice":"auto"`, ""},
	} {
		t.Run("chat/"+tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"max_tokens":2,"temperature":0`+tc.fields+`}`), &r); err != nil {
				t.Fatal(err)
			}
			_, err := e.Chat(context.Background(), &r)
			wantParam(t, err, tc.param)
		})
	}
	for _, tc := range []struct {
		name, fields, param string
	}{
		{"stream_options without stream", `,"stream_options":{"include_usage":true}`, "stream_options"},
		{"stream_options null", `,"stream_options":null`, ""},
		{"stream_options empty without stream", `,"stream_options":{}`, ""},
		{"stream_options with stream", `,"stream":true,"stream_options":{"include_usage":true}`, ""},
	} {
		t.Run("completions/"+tc.name, func(t *testing.T) {
			var r CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q","max_tokens":2,"temperature":0`+tc.fields+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := e.CompleteStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err == nil {
				drain(t, s)
			}
		})
	}
}

// TestLegacyTopLogprobsOrder: a completions top_logprobs object lists its
// keys as vLLM's _create_completion_logprobs writes them (a Python dict
// built from vLLM's per-position logprobs dict): the chosen token first,
// then the alternatives by rank, a text seen twice keeping its first place
// with the later logprob; not sorted as a Go map would be. The prompt
// positions of echo (LegacyPromptLogprobs) keep the prompt token first,
// then its alternatives by rank. The JSON reads back as it was written.
func TestLegacyTopLogprobsOrder(t *testing.T) {
	entries := []LogprobEntry{
		{Token: "b", Logprob: -1, TopLogprobs: []TopLogprob{{Token: "b", Logprob: -1}, {Token: "a", Logprob: -2}}},
		{Token: "z", Logprob: -5, TopLogprobs: []TopLogprob{{Token: "y", Logprob: -0.5}, {Token: "c", Logprob: -1.5}}},
		{Token: "x", Logprob: -1, TopLogprobs: []TopLogprob{{Token: "w", Logprob: -0.5}, {Token: "x", Logprob: -1}, {Token: "w", Logprob: -3}}},
	}
	lp := LegacyLogprobs(entries, 0)
	prompt := LegacyPromptLogprobs([]string{"p", "q"}, []PromptPosition{nil, {
		{ID: 9, Logprob: -4, Rank: 3, DecodedToken: "q"},
		{ID: 5, Logprob: -0.1, Rank: 1, DecodedToken: "m"},
		{ID: 2, Logprob: -2, Rank: 2, DecodedToken: "e"},
	}}, 2, nil)
	prompt.Append(lp)
	b, err := json.Marshal(prompt)
	if err != nil {
		t.Fatal(err)
	}
	want := `"top_logprobs":[null,{"q":-4,"m":-0.1,"e":-2},{"b":-1,"a":-2},{"z":-5,"y":-0.5,"c":-1.5},{"x":-1,"w":-3}]`
	if !strings.Contains(string(b), want) {
		t.Errorf("got %s\nwant it to contain %s", b, want)
	}
	var back CompletionLogprobs
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, err := json.Marshal(&back)
	if err != nil {
		t.Fatal(err)
	}
	if string(b2) != string(b) {
		t.Errorf("round trip:\n got %s\nwant %s", b2, b)
	}
}

// TestChatDeltaRoleChunkJSON: a stream's role chunk carries "content": ""
// beside the role, as vLLM's first chunk (DeltaMessage(role=role,
// content="")) and OpenAI's API send it; other deltas keep only the fields
// they set.
func TestChatDeltaRoleChunkJSON(t *testing.T) {
	for _, tc := range []struct {
		d    ChatDelta
		want string
	}{
		{ChatDelta{Role: "assistant"}, `{"role":"assistant","content":""}`},
		{ChatDelta{Role: "assistant", Content: "Hi"}, `{"role":"assistant","content":"Hi"}`},
		{ChatDelta{Content: "Hi"}, `{"content":"Hi"}`},
		{ChatDelta{ReasoningContent: "r"}, `{"reasoning_content":"r"}`},
		{ChatDelta{}, `{}`},
	} {
		b, err := json.Marshal(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.d, b, tc.want)
		}
		var back ChatDelta
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.d) {
			t.Errorf("%s read back as %+v (%v)", b, back, err)
		}
	}
}

// TestTokenIDRangeMessage: a negative token id in stop_token_ids or
// logit_bias is refused before the vocabulary is known (Sampling validates
// with vocab 0); the message said "out of range [0, 0)", a range no id is
// in. It now says what is wrong, and gives the range once it is known.
func TestTokenIDRangeMessage(t *testing.T) {
	for _, tc := range []struct {
		p     SamplingParams
		vocab int
		param string
		want  string
	}{
		{SamplingParams{StopTokenIDs: []int32{-5}}, 0, "stop_token_ids", "token id -5 is negative"},
		{SamplingParams{StopTokenIDs: []int32{-5}}, 100, "stop_token_ids", "token id -5 out of range [0, 100)"},
		{SamplingParams{StopTokenIDs: []int32{100}}, 100, "stop_token_ids", "token id 100 out of range [0, 100)"},
		{SamplingParams{LogitBias: map[int32]float64{-3: 1}}, 0, "logit_bias", "token id -3 is negative"},
		{SamplingParams{LogitBias: map[int32]float64{200: 1}}, 100, "logit_bias", "token id 200 out of range [0, 100)"},
	} {
		tc.p.TopP = 1
		err := tc.p.Validate(tc.vocab)
		wantParam(t, err, tc.param)
		var pe *ParamError
		if errors.As(err, &pe) && !strings.Contains(pe.Msg, tc.want) {
			t.Errorf("vocab %d: message %q, want it to contain %q", tc.vocab, pe.Msg, tc.want)
		}
	}
}

// TestAccumulatorNullContentAfterReasoning: a reply that is reasoning only
// (a thinking-mode reply cut inside its reasoning, or ending right after
// </think>) has content null, as vLLM's DeepSeek reasoning parsers return
// it ("content or None") and SGLang ("content=text if text else None");
// it was "". An empty reply without reasoning keeps content "" (vLLM
// without a reasoning split), and a reply with text keeps it.
func TestAccumulatorNullContentAfterReasoning(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deltas    []ChatDelta
		content   *string
		reasoning *string
	}{
		{"reasoning only", []ChatDelta{{Role: "assistant"}, {ReasoningContent: "17 * "}}, nil, ptr("17 * ")},
		{"reasoning and content", []ChatDelta{{Role: "assistant"}, {ReasoningContent: "r"}, {Content: "391"}}, ptr("391"), ptr("r")},
		{"empty", []ChatDelta{{Role: "assistant"}}, ptr(""), nil},
		{"content", []ChatDelta{{Role: "assistant"}, {Content: "391"}}, ptr("391"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a ChatAccumulator
			for _, d := range tc.deltas {
				a.Add(&ChatChunk{Delta: d})
			}
			a.Add(&ChatChunk{FinishReason: "length"})
			m := a.Response().Choices[0].Message
			if !reflect.DeepEqual(m.Content, tc.content) || !reflect.DeepEqual(m.ReasoningContent, tc.reasoning) {
				t.Errorf("content %s reasoning %s, want %s %s", showStr(m.Content), showStr(m.ReasoningContent), showStr(tc.content), showStr(tc.reasoning))
			}
		})
	}
}

// showStr renders an optional string for a test message ("<nil>" for nil).
func showStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return strconv.Quote(*s)
}

// TestCompletionEchoWithoutGeneration: CompleteStream with echo and
// max_tokens 0 returns the prompt only (one token generated and dropped,
// as vLLM's echo_without_generation), counts that token in the usage and
// ends with its finish_reason; max_tokens 0 without echo is a ParamError.
func TestCompletionEchoWithoutGeneration(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("okay")}, EngineOptions{})
	defer closeEngine(t, e)
	var r CompletionRequest
	if err := json.Unmarshal([]byte(`{"prompt":"hey","max_tokens":0,"echo":true,"n":2,"temperature":0}`), &r); err != nil {
		t.Fatal(err)
	}
	s, err := e.CompleteStream(context.Background(), &r)
	if err != nil {
		t.Fatal(err)
	}
	text := map[int]string{}
	finish := map[int]string{}
	var usage *Usage
	for ch, err := range s {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
			continue
		}
		text[ch.Index] += ch.Delta.Content
		if ch.FinishReason != "" {
			finish[ch.Index] = ch.FinishReason
		}
	}
	for i := range 2 {
		if text[i] != "hey" || finish[i] != "length" {
			t.Errorf("choice %d: text %q finish %q, want \"hey\" length", i, text[i], finish[i])
		}
	}
	if usage == nil || usage.CompletionTokens != 2 {
		t.Errorf("usage %+v, want 2 completion tokens (one per choice)", usage)
	}
	var r2 CompletionRequest
	if err := json.Unmarshal([]byte(`{"prompt":"hey","max_tokens":0}`), &r2); err != nil {
		t.Fatal(err)
	}
	_, err = e.CompleteStream(context.Background(), &r2)
	wantParam(t, err, "max_tokens")
}
