package main

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/dsv4go/dsv4go/dsv4"
)

// wirePosition is one entry of vLLM's prompt_logprobs as a client reads it.
type wirePosition map[string]struct {
	Logprob      *float64 `json:"logprob"`
	Rank         *int     `json:"rank"`
	DecodedToken *string  `json:"decoded_token"`
}

// wireLegacy is a completions logprobs object as a client reads it.
type wireLegacy struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// checkPromptLogprobs checks vLLM's prompt_logprobs shape for prompt ids:
// one entry per prompt token, the first null, then an object keyed by
// token id strings holding the prompt token (rank ≥ 1) and at most k
// others, each with logprob ≤ 0, rank and decoded_token.
func checkPromptLogprobs(t *testing.T, pl []wirePosition, prompt []int32, k int) {
	t.Helper()
	if len(pl) != len(prompt) || pl[0] != nil {
		t.Fatalf("prompt_logprobs: %d entries for %d prompt tokens (first %v)", len(pl), len(prompt), pl[0])
	}
	for i, pos := range pl[1:] {
		own, ok := pos[strconv.Itoa(int(prompt[i+1]))]
		if !ok || len(pos) > k+1 || len(pos) < max(k, 1) {
			t.Fatalf("position %d: %d entries %v, want the prompt token %d and %d others", i+1, len(pos), pos, prompt[i+1], k)
		}
		for id, e := range pos {
			if e.Logprob == nil || *e.Logprob > 0 || e.Rank == nil || *e.Rank < 1 || e.DecodedToken == nil {
				t.Fatalf("position %d token %s: %+v", i+1, id, e)
			}
		}
		if *own.Rank > k+1 && len(pos) != k+1 {
			t.Errorf("position %d: rank %d outside the top %d, but %d entries", i+1, *own.Rank, k, len(pos))
		}
	}
}

// TestEchoLogprobsShape: /v1/completions with echo and logprobs on the
// embedded tiny model answers as vLLM does: logprobs cover the prompt
// tokens first (the first token's token_logprobs and top_logprobs null;
// each later token in its own top_logprobs object with at most logprobs
// alternatives; text_offset from 0, in code points), then the generated
// ones; the choice carries prompt_logprobs (vLLM sets prompt_logprobs to
// logprobs under echo), whose logprob for each prompt token equals its
// token_logprobs entry; streamed, the same logprobs arrive. With
// prompt_logprobs and no echo, the choice has prompt_logprobs and the
// logprobs cover the generated tokens only; chat puts prompt_logprobs at
// the top level. vLLM itself is not run here (it needs a GPU for this
// model): the shapes are checked against its source (protocol.py,
// serving_completion.py, vllm/logprobs.py).
func TestEchoLogprobsShape(t *testing.T) {
	ts := startTinyServer(t)
	const text = "What is 17*23? Number only."
	prompt, err := ts.eng.Tokenize(text)
	if err != nil {
		t.Fatal(err)
	}
	type completion struct {
		Choices []struct {
			Text           string         `json:"text"`
			Logprobs       *wireLegacy    `json:"logprobs"`
			PromptLogprobs []wirePosition `json:"prompt_logprobs"`
		} `json:"choices"`
	}
	for _, tc := range []struct {
		name, body string
		echo       bool
		k          int // logprobs
		pk         int // prompt_logprobs (-1: absent)
	}{
		{"echo logprobs 2", `{"prompt":` + jsonString(text) + `,"echo":true,"logprobs":2,"max_tokens":3,"temperature":0}`, true, 2, -1},
		{"echo logprobs 0", `{"prompt":` + jsonString(text) + `,"echo":true,"logprobs":0,"max_tokens":3,"temperature":0}`, true, 0, -1},
		{"prompt_logprobs 3, no echo", `{"prompt":` + jsonString(text) + `,"logprobs":1,"prompt_logprobs":3,"max_tokens":3,"temperature":0}`, false, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b := post(t, ts.url, "/v1/completions", tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			var r completion
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			c := r.Choices[0]
			pk := tc.pk
			if pk < 0 {
				pk = tc.k
			}
			checkPromptLogprobs(t, c.PromptLogprobs, prompt, pk)
			lp := c.Logprobs
			nPrompt := 0
			if tc.echo {
				nPrompt = len(prompt)
				if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil || lp.TextOffset[0] != 0 {
					t.Errorf("first prompt token: %v %v offset %d, want null null 0", lp.TokenLogprobs[0], lp.TopLogprobs[0], lp.TextOffset[0])
				}
			}
			if len(lp.Tokens) <= nPrompt || len(lp.TokenLogprobs) != len(lp.Tokens) || len(lp.TopLogprobs) != len(lp.Tokens) || len(lp.TextOffset) != len(lp.Tokens) {
				t.Fatalf("logprobs lengths: %d tokens for %d prompt tokens: %+v", len(lp.Tokens), nPrompt, lp)
			}
			for i := 1; i < len(lp.Tokens); i++ {
				top := lp.TopLogprobs[i]
				if lp.TokenLogprobs[i] == nil || top == nil || top[lp.Tokens[i]] != *lp.TokenLogprobs[i] || len(top) > tc.k+1 {
					t.Errorf("token %d %q: logprob %v, top_logprobs %v (logprobs %d)", i, lp.Tokens[i], lp.TokenLogprobs[i], top, tc.k)
				}
				if lp.TextOffset[i] < lp.TextOffset[i-1] {
					t.Errorf("text_offset %v not increasing", lp.TextOffset)
				}
				if i < nPrompt {
					own := c.PromptLogprobs[i][strconv.Itoa(int(prompt[i]))]
					if float32(*own.Logprob) != float32(*lp.TokenLogprobs[i]) {
						t.Errorf("prompt token %d: token_logprobs %v, prompt_logprobs %v", i, *lp.TokenLogprobs[i], *own.Logprob)
					}
				}
			}
			if tc.echo {
				if lp.TextOffset[nPrompt] != len([]rune(text)) {
					t.Errorf("first generated token at %d, want %d", lp.TextOffset[nPrompt], len([]rune(text)))
				}
				var st []choiceOut = generate(t, ts.url, "/v1/completions", tc.body, true)
				if !reflect.DeepEqual(st[0].Tokens, lp.Tokens) || !reflect.DeepEqual(st[0].TextOffset, lp.TextOffset) || st[0].Text != c.Text {
					t.Errorf("streamed tokens %q offsets %v, non-streamed %q %v", st[0].Tokens, st[0].TextOffset, lp.Tokens, lp.TextOffset)
				}
			}
		})
	}
	t.Run("chat prompt_logprobs", func(t *testing.T) {
		body := `{"messages":[{"role":"user","content":` + jsonString(text) + `}],"prompt_logprobs":2,"max_tokens":4,"temperature":0,"n":2}`
		cp := tokenizeOK(t, ts.url, body).Tokens // the chat prompt's ids (TestTokenizeChatMatchesChatPrompt)
		status, b := post(t, ts.url, "/v1/chat/completions", body)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		var r struct {
			PromptLogprobs []wirePosition    `json:"prompt_logprobs"`
			Choices        []json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		checkPromptLogprobs(t, r.PromptLogprobs, cp, 2)
		if len(r.Choices) != 2 {
			t.Errorf("%d choices", len(r.Choices))
		}
	})
}

// TestPromptLogprobsParamErrors: prompt_logprobs values vLLM refuses get a
// 400 invalid_request_error naming prompt_logprobs, on both endpoints:
// negative (vLLM's -1, the whole vocabulary, is not served either), above
// the logprobs limit (20, as logprobs / top_logprobs), above 0 with stream;
// 0 with stream, and the limit, pass.
func TestPromptLogprobsParamErrors(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		req := func(fields string) string {
			if path == "/v1/completions" {
				return `{"prompt":"hi","max_tokens":2` + fields + `}`
			}
			return `{` + msgs + `,"max_tokens":2` + fields + `}`
		}
		for _, tc := range []struct {
			name, fields string
			status       int
		}{
			{"-1", `,"prompt_logprobs":-1`, 400},
			{"-5", `,"prompt_logprobs":-5`, 400},
			{"21", `,"prompt_logprobs":21`, 400},
			{"1 streamed", `,"prompt_logprobs":1,"stream":true`, 400},
			{"string", `,"prompt_logprobs":"2"`, 400},
			{"0 streamed", `,"prompt_logprobs":0,"stream":true`, 200},
			{"20", `,"prompt_logprobs":20`, 200},
		} {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				status, b := post(t, ts.URL, path, req(tc.fields))
				if status != tc.status {
					t.Fatalf("status %d %s, want %d", status, b, tc.status)
				}
				if status == 200 {
					return
				}
				var e struct{ Error struct{ Type, Param string } }
				if err := json.Unmarshal(b, &e); err != nil || e.Error.Type != "invalid_request_error" || e.Error.Param != "prompt_logprobs" {
					t.Errorf("%s: want invalid_request_error naming prompt_logprobs", b)
				}
			})
		}
	}
}

// TestOpenAIGoEchoLogprobs: the official openai-go client parses a
// completion with echo and logprobs, the prompt's null first entries
// included, without error, and streams one: tokens, token_logprobs (the
// null read as 0) and text_offset arrive in its fields; its TopLogprobs
// ([]map[string]float64) does not take an array holding null (vLLM and
// OpenAI's legacy API send the same null), so top_logprobs is read from
// the raw JSON it keeps; prompt_logprobs is an extra field it keeps.
func TestOpenAIGoEchoLogprobs(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	c := ts.client()
	ctx := context.Background()
	const prompt = "<｜User｜>count 2<｜Assistant｜></think>"
	ids, err := ts.eng.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	params := openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel("dsv4-script"),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(20),
		Temperature: openai.Float(0),
		Echo:        openai.Bool(true),
		Logprobs:    openai.Int(2),
	}
	comp, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := comp.Choices[0]
	if ch.Text != prompt+"w1 w2" {
		t.Errorf("text %q", ch.Text)
	}
	lp := ch.Logprobs
	var top []map[string]float64
	if err := json.Unmarshal([]byte(lp.JSON.TopLogprobs.Raw()), &top); err != nil {
		t.Fatal(err)
	}
	if n := len(lp.Tokens); n <= len(ids) || len(lp.TokenLogprobs) != n || len(top) != n || len(lp.TextOffset) != n || !lp.JSON.TokenLogprobs.Valid() {
		t.Fatalf("logprobs: %d tokens for %d prompt tokens: %+v", n, len(ids), lp)
	}
	if lp.TextOffset[0] != 0 || top[0] != nil || lp.TokenLogprobs[0] != 0 || top[1][lp.Tokens[1]] != lp.TokenLogprobs[1] {
		t.Errorf("entries: offset %d, token_logprobs %v, top_logprobs %v", lp.TextOffset[0], lp.TokenLogprobs[:2], top[:2])
	}
	f, ok := ch.JSON.ExtraFields["prompt_logprobs"]
	var pl []wirePosition
	if !ok || json.Unmarshal([]byte(f.Raw()), &pl) != nil {
		t.Fatalf("prompt_logprobs extra field: %v %q", ok, f.Raw())
	}
	checkPromptLogprobs(t, pl, ids, 2)

	stream := c.Completions.NewStreaming(ctx, params)
	var tokens []string
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			tokens = append(tokens, ch.Logprobs.Tokens...)
		}
	}
	if err := stream.Err(); err != nil || !reflect.DeepEqual(tokens, lp.Tokens) {
		t.Errorf("stream: %v tokens %q, want %q", err, tokens, lp.Tokens)
	}
}
