package dsv4

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// engineTestModel loads a random tiny checkpoint (vocab 96, every layer
// type) shared with the forward-pass tests.
func engineTestModel(t testing.TB) *Model {
	t.Helper()
	m, err := Load(context.Background(), "testdata/forward/mixed-hc4-yarn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// 200 concurrent requests through the real forward pass give the same
// greedy tokens as the same requests run one at a time: continuous
// batching (mixed-length batched Decode, chunked prefill interleaved with
// decode) does not change results.
func TestEngineModelConcurrentEqualsSequential(t *testing.T) {
	m := engineTestModel(t)
	e, err := NewEngine(m, EngineOptions{MaxBatch: 256, StepTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, e)
	const n = 200
	rng := rand.New(rand.NewPCG(1, 2))
	prompts := make([][]int32, n)
	maxTok := make([]int, n)
	for i := range prompts {
		p := make([]int32, 1+rng.IntN(40))
		for j := range p {
			p[j] = int32(2 + rng.IntN(94))
		}
		prompts[i] = p
		maxTok[i] = 1 + rng.IntN(12)
	}
	params := func(i int) SamplingParams {
		p := SamplingParams{MaxTokens: maxTok[i], IgnoreEOS: true}
		if i%4 == 3 { // seeded sampling must be batch-invariant too
			p.Temperature, p.TopP, p.Seed = 0.8, 0.95, ptr(int64(i))
		}
		return p
	}
	want := make([][]int32, n)
	for i := range n {
		want[i], _ = collect(t, e, context.Background(), prompts[i], params(i))
	}
	got := make([][]int32, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = collect(t, e, context.Background(), prompts[i], params(i))
		}()
	}
	wg.Wait()
	for i := range n {
		if !slicesEqual(got[i], want[i]) {
			t.Errorf("request %d: concurrent %v, sequential %v", i, got[i], want[i])
		}
	}
	if s := e.Stats(); s.LiveSequences != 0 || s.StateBytes != 0 {
		t.Errorf("after the run: %+v", s)
	}
	if e.Stats().DecodeSteps == 0 {
		t.Error("no batched decode step ran")
	}
}

// The model directory has no tokenizer: the engine is token-only.
func TestEngineModelTokenOnly(t *testing.T) {
	m := engineTestModel(t)
	e, err := NewEngine(m, EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, e)
	if _, err := e.Chat(context.Background(), chatReq("hi")); !errors.Is(err, ErrNoChat) {
		t.Fatalf("Chat without tokenizer: %v", err)
	}
	// state reservation follows Model.SequenceBytes
	b := modelBackend{m}
	if b.StateBytes(100) < m.SequenceBytes(100) || b.StateBytes(0) != m.SequenceBytes(0) {
		t.Fatalf("StateBytes %d vs SequenceBytes %d", b.StateBytes(100), m.SequenceBytes(100))
	}
	// cancel mid-generation frees the sequence
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seq, err := e.Generate(ctx, []int32{5, 6, 7}, SamplingParams{IgnoreEOS: true, MaxTokens: 4000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range seq {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	waitFor(t, "state freed", func() bool { return e.Stats().LiveSequences == 0 })
}

// BenchmarkEngineDecode measures engine throughput (generated tokens/s
// across all requests) on the tiny random checkpoint with 1, 4 and 16
// concurrent requests of 3 prompt and 32 generated tokens: what continuous
// batching buys over one request at a time.
func BenchmarkEngineDecode(b *testing.B) {
	m := engineTestModel(b)
	for _, conc := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			e, err := NewEngine(m, EngineOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(context.Background())
			var tokens atomic.Int64
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for i := range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						seq, err := e.Generate(context.Background(), []int32{int32(2 + i), 7, 9}, SamplingParams{MaxTokens: 32, IgnoreEOS: true})
						if err != nil {
							b.Error(err)
							return
						}
						for range seq {
							tokens.Add(1)
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(tokens.Load())/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(e.Stats().DecodeSteps)/float64(b.N), "steps/op")
		})
	}
}

// Generate neither writes into the caller's prompt array (past its length,
// where sampled tokens used to be appended when the slice had spare
// capacity) nor lets requests sharing one prompt slice, as the n choices of
// a chat request do, overwrite each other's next token.
func TestEngineGenerateKeepsPrompt(t *testing.T) {
	m := engineTestModel(t)
	e, err := NewEngine(m, EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, e)
	backing := []int32{5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0}
	prompt := backing[:8]
	p := SamplingParams{MaxTokens: 12, IgnoreEOS: true}
	want, _ := collect(t, e, context.Background(), prompt, p)
	if got := backing[8:]; !slicesEqual(got, []int32{0, 0, 0, 0}) {
		t.Errorf("the array past the prompt became %v", got)
	}
	outs := make([][]int32, 6)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = collect(t, e, context.Background(), prompt, p)
		}()
	}
	wg.Wait()
	for i, got := range outs {
		if !slicesEqual(got, want) {
			t.Errorf("request %d sharing the prompt slice: %v, alone %v", i, got, want)
		}
	}
}
