package dsv4_test

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// directPromptLogprob computes prompt token tok's entry from the logits of
// the position before it, independently of the engine: log-softmax in
// float64 (max-shifted sum in index order), rank as vLLM's
// batched_count_greater_than (logits >= the token's), the k best by a full
// sort (logit descending, id ascending). Values are rounded to float32
// once, as the engine reports them.
func directPromptLogprob(logits []float32, tok int32, k int) dsv4.PromptLogprob {
	out := dsv4.PromptLogprob{ID: tok}
	maxv := float64(slices.Max(logits))
	ids := make([]int32, len(logits))
	var sum float64
	for i, v := range logits {
		ids[i] = int32(i)
		sum += math.Exp(float64(v) - maxv)
		if v >= logits[tok] {
			out.Rank++
		}
	}
	lse := maxv + math.Log(sum)
	out.Logprob = float32(float64(logits[tok]) - lse)
	slices.SortFunc(ids, func(a, b int32) int {
		if c := cmp.Compare(logits[b], logits[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, id := range ids[:k] {
		out.Top = append(out.Top, dsv4.TokenLogprob{ID: id, Logprob: float32(float64(logits[id]) - lse)})
	}
	return out
}

// TestPromptLogprobsMatchPrefillAll: the engine's prompt logprobs
// (SamplingParams.PromptLogprobs, carried by the first generated token)
// equal a direct computation from Model.PrefillAll's logits of the whole
// prompt in one call (float64 log-softmax; within 1e-9 of its float32
// rounding, i.e. the same float32: the forward pass is batch-invariant, so
// chunked prefill, in the engine's 128-row chunks or its step budget's,
// interleaved with other requests' decode steps, gives the same logits);
// the rank and the top-k tokens match too, the first entry is nil, only
// the first token carries them, and asking for them changes no generated
// token. On the embedded dsv4-tiny model (full 129280-token vocabulary).
// No vLLM golden: vLLM needs a GPU to serve this model; the shapes follow
// its source (vllm/v1/engine/logprobs.py, vllm/logprobs.py).
func TestPromptLogprobsMatchPrefillAll(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t)
	long, err := tinyModelEngine(t, m, dsv4.EngineOptions{}).ChatPrompt(&dsv4.ChatRequest{Messages: []dsv4.Message{
		{Role: "system", Content: "You are a careful assistant. Answer briefly and show the arithmetic when asked."},
		{Role: "user", Content: "A train goes 60 km in 1.5 hours. Average speed? Answer briefly."},
	}})
	if err != nil {
		t.Fatal(err)
	}
	short := long[:9]
	if 4*len(long) <= 128 {
		t.Fatalf("prompt of %d tokens: the 128-row case needs more", len(long))
	}
	for _, tc := range []struct {
		name       string
		prompt     []int32
		k          int
		stepTokens int // engine step budget (0: default 512)
		concurrent int // requests at once (identical)
	}{
		{"whole prompt in one step, k=5", long, 5, 0, 1},
		{"k=0: rank and logprob only", long, 0, 0, 1},
		{"k=20 (the limit)", short, 20, 0, 1},
		{"chunked prefill, 7 tokens a step, 3 requests", long, 3, 7, 3},
		{"one-token prompt", long[:1], 2, 0, 1},
		{"past the 128-row chunk", slices.Concat(long, long, long, long), 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := m.PrefillAll(ctx, m.NewSequence(), tc.prompt)
			if err != nil {
				t.Fatal(err)
			}
			e := tinyModelEngine(t, m, dsv4.EngineOptions{StepTokens: tc.stepTokens})
			k := tc.k
			p := dsv4.SamplingParams{MaxTokens: 4, PromptLogprobs: &k}
			toks := make([][]dsv4.Token, tc.concurrent)
			var wg sync.WaitGroup
			for i := range toks {
				wg.Go(func() { toks[i] = generateAll(t, e, tc.prompt, p) })
			}
			wg.Wait()
			plain := generateAll(t, e, tc.prompt, dsv4.SamplingParams{MaxTokens: 4})
			for _, got := range toks {
				if !slices.EqualFunc(got, plain, func(a, b dsv4.Token) bool { return a.ID == b.ID }) {
					t.Errorf("tokens with prompt logprobs %v, without %v", tokenIDs(got), tokenIDs(plain))
				}
				for j, tok := range got[1:] {
					if tok.PromptLogprobs != nil {
						t.Errorf("token %d carries prompt logprobs", j+1)
					}
				}
				lps := got[0].PromptLogprobs
				if len(lps) != len(tc.prompt) || lps[0] != nil {
					t.Fatalf("%d entries (first %v) for %d prompt tokens, want the first nil", len(lps), lps[0], len(tc.prompt))
				}
				for i := 1; i < len(tc.prompt); i++ {
					want := directPromptLogprob(rows[i-1], tc.prompt[i], tc.k)
					g := lps[i]
					if g == nil || g.ID != want.ID || g.Rank != want.Rank || len(g.Top) != len(want.Top) ||
						math.Abs(float64(g.Logprob)-float64(want.Logprob)) > 1e-9 {
						t.Fatalf("position %d: %+v, want %+v", i, g, want)
					}
					for j, a := range g.Top {
						b := want.Top[j]
						if a.ID != b.ID || math.Abs(float64(a.Logprob)-float64(b.Logprob)) > 1e-9 {
							t.Fatalf("position %d top %d: %+v, want %+v", i, j, a, b)
						}
					}
				}
			}
		})
	}
}

func generateAll(t *testing.T, e *dsv4.Engine, prompt []int32, p dsv4.SamplingParams) []dsv4.Token {
	t.Helper()
	seq, err := e.Generate(context.Background(), prompt, p)
	if err != nil {
		t.Error(err)
		return nil
	}
	var out []dsv4.Token
	for tok, err := range seq {
		if err != nil {
			t.Error(err)
			return nil
		}
		out = append(out, tok)
	}
	return out
}

func tokenIDs(toks []dsv4.Token) []int32 {
	var out []int32
	for _, t := range toks {
		out = append(out, t.ID)
	}
	return out
}
