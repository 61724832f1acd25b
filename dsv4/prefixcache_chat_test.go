package dsv4_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// tinyEngines returns two engines on one load of the embedded dsv4-tiny:
// one with prefix caching at its default, one without.
func tinyEngines(t *testing.T) (cached, plain *dsv4.Engine) {
	t.Helper()
	m := tinyModel(t)
	return tinyModelEngine(t, m, dsv4.EngineOptions{}), tinyModelEngine(t, m, dsv4.EngineOptions{PrefixCacheBytes: -1})
}

// streamUsage runs req through ChatStream and returns the text, logprobs
// and the usage of its last chunk.
func streamUsage(t *testing.T, e *dsv4.Engine, req *dsv4.ChatRequest) (string, []dsv4.LogprobEntry, *dsv4.Usage) {
	t.Helper()
	stream, err := e.ChatStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var lps []dsv4.LogprobEntry
	var u *dsv4.Usage
	for ch, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ch.Delta.Content)
		if ch.Logprobs != nil {
			lps = append(lps, ch.Logprobs.Content...)
		}
		if ch.Usage != nil {
			u = ch.Usage
		}
	}
	return text.String(), lps, u
}

// Chat requests sharing a system prompt: the same answers and logprobs
// with the prefix cache as without, and usage.prompt_tokens_details
// cached_tokens = the restored prompt tokens (absent when none), in Chat
// and ChatStream alike; completions report it too.
func TestChatPrefixCache(t *testing.T) {
	cached, plain := tinyEngines(t)
	sys := strings.Repeat("You answer arithmetic and physics questions briefly and exactly. ", 12)
	req := func(q string, n int) *dsv4.ChatRequest {
		r := chatRequest(sys, q)
		r.Logprobs, r.TopLogprobs = true, ptr(3)
		if n > 1 {
			r.N = &n
		}
		return r
	}
	type step struct {
		q      string
		n      int
		stream bool
		cached string // "none", "some" (0 < c < prompt), "all"
	}
	steps := []step{
		{tinyArithQ, 1, false, "none"},
		{tinySpeedQ, 1, true, "some"}, // a checkpoint inside the system prompt
		{"Hi", 1, false, "some"},      // the branch point the previous one saved
		{tinyArithQ, 1, true, "all"},
		{tinySpeedQ, 2, false, "all"}, // n = 2: counted once
	}
	for i, s := range steps {
		r := req(s.q, s.n)
		want, err := plain.Chat(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		var got *dsv4.ChatResponse
		if s.stream {
			text, lps, u := streamUsage(t, cached, r)
			if u == nil {
				t.Fatalf("step %d: no usage chunk", i)
			}
			got = &dsv4.ChatResponse{Usage: *u, Choices: []dsv4.ChatChoice{{Message: dsv4.ChatMessage{Content: &text}, Logprobs: &dsv4.ChatLogprobs{Content: lps}}}}
		} else if got, err = cached.Chat(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		for c := range want.Choices {
			if *got.Choices[c].Message.Content != *want.Choices[c].Message.Content ||
				!reflect.DeepEqual(got.Choices[c].Logprobs, want.Choices[c].Logprobs) {
				t.Errorf("step %d choice %d: cached %q, uncached %q (or logprobs differ)", i, c,
					*got.Choices[c].Message.Content, *want.Choices[c].Message.Content)
			}
		}
		u := got.Usage
		if want.Usage.PromptTokensDetails != nil || u.PromptTokens != want.Usage.PromptTokens {
			t.Errorf("step %d: uncached usage %+v, cached %+v", i, want.Usage, u)
		}
		c := 0
		if u.PromptTokensDetails != nil {
			c = u.PromptTokensDetails.CachedTokens
		}
		ok := map[string]bool{"none": u.PromptTokensDetails == nil, "some": c > 0 && c < u.PromptTokens, "all": c == u.PromptTokens}[s.cached]
		t.Logf("step %d: %d of %d prompt tokens cached", i, c, u.PromptTokens)
		if !ok {
			t.Errorf("step %d: cached_tokens %d of %d prompt tokens, want %s", i, c, u.PromptTokens, s.cached)
		}
	}

	// Completions: a repeated prompt is restored whole.
	prompt := dsv4.Prompt{Texts: []string{sys + "17*23="}}
	for i, wantCached := range []bool{false, true} {
		stream, err := cached.CompleteStream(context.Background(), &dsv4.CompletionRequest{Prompt: prompt,
			RequestSampling: dsv4.RequestSampling{Temperature: ptr(0.0), MaxTokens: ptr(4)}})
		if err != nil {
			t.Fatal(err)
		}
		var u *dsv4.Usage
		for ch, err := range stream {
			if err != nil {
				t.Fatal(err)
			}
			if ch.Usage != nil {
				u = ch.Usage
			}
		}
		if got := u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens == u.PromptTokens; got != wantCached {
			t.Errorf("completion %d: usage %+v, details %+v", i, u, u.PromptTokensDetails)
		}
	}
}

func chatRequest(system, user string) *dsv4.ChatRequest {
	return &dsv4.ChatRequest{
		Messages:        []dsv4.Message{{Role: "system", Content: system}, {Role: "user", Content: user}},
		RequestSampling: dsv4.RequestSampling{Temperature: ptr(0.0)},
	}
}

// BenchmarkPrefixCacheTTFT: time to the first token of prompts made of a
// shared 500-token system prompt and a distinct 20-token question, on the
// embedded dsv4-tiny, without the prefix cache, with it (warmed by two
// earlier prompts, so the branch point at 496 is saved), and with it on
// prompts that share nothing ("miss": the cost of saving checkpoints).
func BenchmarkPrefixCacheTTFT(b *testing.B) {
	ctx := context.Background()
	m := tinyModel(b)
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := func(n int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(1000 + rng.IntN(50000))
		}
		return p
	}
	sys := tokens(500)
	ttft := func(b *testing.B, e *dsv4.Engine, shared bool) {
		prefix := sys
		if !shared {
			prefix = tokens(len(sys))
		}
		seq, err := e.Generate(ctx, slices.Concat(prefix, tokens(20)), dsv4.SamplingParams{MaxTokens: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range seq {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		budget int64
		shared bool
	}{{"uncached", -1, true}, {"cached", 0, true}, {"miss", 0, false}} {
		b.Run(tc.name, func(b *testing.B) {
			e, err := dsv4.NewEngine(m, dsv4.EngineOptions{PrefixCacheBytes: tc.budget})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(ctx)
			ttft(b, e, tc.shared)
			ttft(b, e, tc.shared)
			for b.Loop() {
				ttft(b, e, tc.shared)
			}
			s := e.Stats()
			if s.PrefixCacheQueries > 0 {
				b.ReportMetric(float64(s.PrefixCacheHits)/float64(s.PrefixCacheQueries), "hit-rate")
			}
		})
	}
}
