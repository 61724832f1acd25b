package dsv4

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

// allLogitsFake is the fake backend with every position's logits (an
// AllLogitsBackend): the fake's logits after each prefix.
type allLogitsFake struct{ *fakeBackend }

func (b allLogitsFake) PrefillAll(ctx context.Context, s BackendSequence, ids []int32) ([][]float32, error) {
	out := make([][]float32, len(ids))
	for i := range ids {
		row, err := b.Prefill(ctx, s, ids[i:i+1])
		if err != nil {
			return nil, err
		}
		out[i] = row
	}
	return out, nil
}

func newAllLogitsFakeEngine(script string) *Engine {
	b := &fakeBackend{script: scriptText(script)}
	e := newEngine(allLogitsFake{b}, EngineOptions{})
	e.s.stepHook = b.stepStart
	e.chat = newFakeCodec()
	return e
}

// TestPromptLogprobsParams: prompt_logprobs (vLLM's extra field, chat and
// completions) is refused with a *ParamError naming it when negative
// (vLLM's -1 included: the whole vocabulary is not served), above
// MaxTopLogprobs (vLLM's max_logprobs check), above 0 with stream true
// (vLLM: "not available when stream=True"; 0 passes), or on an engine
// whose backend has no every-position logits; SamplingParams.Validate and
// Generate refuse the same range.
func TestPromptLogprobsParams(t *testing.T) {
	all := newAllLogitsFakeEngine("ok")
	defer closeEngine(t, all)
	plain := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, plain)
	for _, tc := range []struct {
		name, fields, param string // param "" = valid
		e                   *Engine
	}{
		{"absent", ``, "", all},
		{"0", `,"prompt_logprobs":0`, "", all},
		{"5", `,"prompt_logprobs":5`, "", all},
		{"20", `,"prompt_logprobs":20`, "", all},
		{"null", `,"prompt_logprobs":null`, "", all},
		{"0 streamed", `,"prompt_logprobs":0,"stream":true`, "", all},
		{"-1", `,"prompt_logprobs":-1`, "prompt_logprobs", all},
		{"-3", `,"prompt_logprobs":-3`, "prompt_logprobs", all},
		{"21", `,"prompt_logprobs":21`, "prompt_logprobs", all},
		{"1 streamed", `,"prompt_logprobs":1,"stream":true`, "prompt_logprobs", all},
		{"backend without all logits", `,"prompt_logprobs":1`, "prompt_logprobs", plain},
		{"absent, backend without all logits", ``, "", plain},
	} {
		t.Run("chat "+tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"max_tokens":2`+tc.fields+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := tc.e.ChatStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err == nil {
				drain(t, s)
			}
		})
		t.Run("completions "+tc.name, func(t *testing.T) {
			var r CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q","max_tokens":2`+tc.fields+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := tc.e.CompleteStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err == nil {
				drain(t, s)
			}
		})
	}
	for _, k := range []int{-1, 21} {
		p := SamplingParams{PromptLogprobs: &k}
		wantParam(t, p.Validate(0), "prompt_logprobs")
		_, err := all.Generate(context.Background(), []int32{1, 2}, p)
		wantParam(t, err, "prompt_logprobs")
	}
}

// TestPromptLogprobsChunks: where the prompt logprobs ride. Chat: on choice
// 0 only, before its first token's chunk, and Chat's response carries them
// at the top level (one entry per prompt token, the first nil). Completions:
// every choice; with echo and logprobs (prompt_logprobs then defaults to
// logprobs, as vLLM's to_sampling_params) the echoed prompt's chunk carries
// them and the prompt tokens' texts, streamed too, and
// LegacyPromptLogprobs gives the prompt entries; on a backend without
// every-position logits echo keeps its plain form (generated tokens only).
func TestPromptLogprobsChunks(t *testing.T) {
	ctx := context.Background()
	e := newAllLogitsFakeEngine("ok")
	defer closeEngine(t, e)

	var cr ChatRequest
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"hello"}],"max_tokens":3,"n":2,"prompt_logprobs":2}`), &cr); err != nil {
		t.Fatal(err)
	}
	prompt, err := e.ChatPrompt(&cr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Chat(ctx, &cr)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.PromptLogprobs) != len(prompt) || resp.PromptLogprobs[0] != nil {
		t.Fatalf("chat: %d prompt entries for %d tokens (first %v)", len(resp.PromptLogprobs), len(prompt), resp.PromptLogprobs[0])
	}
	for i, p := range resp.PromptLogprobs[1:] {
		if len(p) < 2 || len(p) > 3 || p[0].ID != prompt[i+1] || p[0].Rank < 1 || p[0].DecodedToken != (fakeTok{}).TokenString(prompt[i+1]) {
			t.Errorf("chat position %d: %+v (prompt token %d)", i+1, p, prompt[i+1])
		}
	}
	stream, err := e.ChatStream(ctx, &cr)
	if err != nil {
		t.Fatal(err)
	}
	carried := map[int]int{}
	for ch, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
		if ch.PromptLogprobs != nil {
			carried[ch.Index]++
		}
	}
	if !maps1(carried, 0) {
		t.Errorf("chat: prompt logprobs on chunks of choices %v, want choice 0 once", carried)
	}

	for _, tc := range []struct {
		name, body string
		e          *Engine
		want       bool // prompt logprobs on the echo chunk
	}{
		{"echo logprobs 2", `{"prompt":"hey","max_tokens":3,"n":2,"echo":true,"logprobs":2}`, e, true},
		{"echo logprobs 2 streamed", `{"prompt":"hey","max_tokens":3,"echo":true,"logprobs":2,"stream":true}`, e, true},
		{"echo logprobs 1, prompt_logprobs 3", `{"prompt":"hey","max_tokens":3,"echo":true,"logprobs":1,"prompt_logprobs":3}`, e, true},
		{"echo without all logits", `{"prompt":"hey","max_tokens":3,"echo":true,"logprobs":2}`,
			newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.e != e {
				defer closeEngine(t, tc.e)
			}
			var r CompletionRequest
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			s, err := tc.e.CompleteStream(ctx, &r)
			if err != nil {
				t.Fatal(err)
			}
			first := map[int]*ChatChunk{}
			for ch, err := range s {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := first[ch.Index]; !ok && ch.Index >= 0 {
					first[ch.Index] = ch
				}
			}
			for i, ch := range first {
				if ch.Delta.Content != "hey" {
					t.Errorf("choice %d: first chunk %q, want the echoed prompt", i, ch.Delta.Content)
				}
				if (ch.PromptLogprobs != nil) != tc.want {
					t.Fatalf("choice %d: prompt logprobs %v, want them: %v", i, ch.PromptLogprobs, tc.want)
				}
				if !tc.want {
					continue
				}
				if !slices.Equal(ch.PromptTokens, []string{"h", "e", "y"}) || len(ch.PromptLogprobs) != 3 {
					t.Fatalf("choice %d: tokens %q, %d positions", i, ch.PromptTokens, len(ch.PromptLogprobs))
				}
				leg := LegacyPromptLogprobs(ch.PromptTokens, ch.PromptLogprobs, *r.Logprobs, &TextPos{})
				if leg.TokenLogprobs[0] != nil || leg.TopLogprobs[0] != nil || !slices.Equal(leg.TextOffset, []int{0, 1, 2}) {
					t.Errorf("choice %d: first entry %v %v, offsets %v", i, leg.TokenLogprobs[0], leg.TopLogprobs[0], leg.TextOffset)
				}
				for j := 1; j < 3; j++ {
					top := leg.TopLogprobs[j]
					lp, ok := top.Get(ch.PromptTokens[j])
					if !ok || lp != *leg.TokenLogprobs[j] || len(top) > *r.Logprobs+1 || len(top) < *r.Logprobs {
						t.Errorf("choice %d token %d: logprob %v, top %v (logprobs %d)", i, j, *leg.TokenLogprobs[j], top, *r.Logprobs)
					}
				}
			}
		})
	}
}

// maps1 reports whether m holds exactly key k with count 1.
func maps1(m map[int]int, k int) bool { return len(m) == 1 && m[k] == 1 }

// TestPromptPositionJSON: a PromptPosition is vLLM's dict of token id
// strings to {logprob, rank, decoded_token}, keys in vLLM's order (the
// prompt token first), nil is null; it reads back the same.
func TestPromptPositionJSON(t *testing.T) {
	in := []PromptPosition{nil, {
		{ID: 791, Logprob: -2.5, Rank: 3, DecodedToken: " the"},
		{ID: 264, Logprob: -0.5, Rank: 1, DecodedToken: " a"},
		{ID: 9, Logprob: -1.25, Rank: 2, DecodedToken: "\""},
	}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `[null,{"791":{"logprob":-2.5,"rank":3,"decoded_token":" the"},"264":{"logprob":-0.5,"rank":1,"decoded_token":" a"},"9":{"logprob":-1.25,"rank":2,"decoded_token":"\""}}]`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back []PromptPosition
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0] != nil || !slices.Equal(back[1], in[1]) {
		t.Errorf("read back %+v", back)
	}
	for _, bad := range []string{`[1]`, `[{"x":{"logprob":1}}]`, `[{"1":2}]`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
