package dsv4

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/template"
)

func closeEngine(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func collect(t *testing.T, e *Engine, ctx context.Context, prompt []int32, p SamplingParams) ([]int32, string) {
	t.Helper()
	seq, err := e.Generate(ctx, prompt, p)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	var ids []int32
	finish := ""
	for tok, err := range seq {
		if err != nil {
			t.Fatalf("generation: %v", err)
		}
		ids = append(ids, tok.ID)
		finish = tok.FinishReason
	}
	return ids, finish
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func testPrompt(i int) []int32 {
	p := make([]int32, 3+i%17)
	for j := range p {
		p[j] = int32((i*31 + j*7) % 250)
	}
	return p
}

// Concurrent requests give exactly the tokens each gives alone (greedy and
// seeded sampling), with small steps so that prefill chunks and decode
// batches interleave.
func TestEngineBatchingInvariance(t *testing.T) {
	b := &fakeBackend{}
	e := newFakeEngine(b, EngineOptions{MaxBatch: 8, StepTokens: 16})
	defer closeEngine(t, e)
	const n = 40
	params := func(i int) SamplingParams {
		if i%2 == 0 {
			return SamplingParams{MaxTokens: 20}
		}
		return SamplingParams{Temperature: 0.9, TopP: 0.95, Seed: ptr(int64(i)), MaxTokens: 20}
	}
	want := make([][]int32, n)
	for i := range n {
		want[i], _ = collect(t, e, context.Background(), testPrompt(i), params(i))
	}
	got := make([][]int32, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = collect(t, e, context.Background(), testPrompt(i), params(i))
		}()
	}
	wg.Wait()
	for i := range n {
		if !slicesEqual(got[i], want[i]) {
			t.Errorf("request %d: concurrent %v, alone %v", i, got[i], want[i])
		}
	}
	if b.maxStepTokens > 16 {
		t.Errorf("a step used %d tokens, budget 16", b.maxStepTokens)
	}
	waitFor(t, "live sequences to reach 0", func() bool { return b.live.Load() == 0 && e.Stats().LiveSequences == 0 })
}

func TestEngineFinishReasons(t *testing.T) {
	b := &fakeBackend{script: scriptText("hello")}
	e := newFakeEngine(b, EngineOptions{})
	defer closeEngine(t, e)
	prompt, _ := fakeTok{}.Encode("q<A>")
	ids, finish := collect(t, e, context.Background(), prompt, SamplingParams{})
	if string(toBytes(ids[:len(ids)-1])) != "hello" || ids[len(ids)-1] != fakeEOS || finish != "stop" {
		t.Fatalf("got %v %q", ids, finish)
	}
	ids, finish = collect(t, e, context.Background(), prompt, SamplingParams{MaxTokens: 3})
	if string(toBytes(ids)) != "hel" || finish != "length" {
		t.Fatalf("max_tokens 3: got %q %q", toBytes(ids), finish)
	}
	ids, finish = collect(t, e, context.Background(), prompt, SamplingParams{StopTokenIDs: []int32{'l'}})
	if string(toBytes(ids)) != "hel" || finish != "stop" {
		t.Fatalf("stop token: got %q %q", toBytes(ids), finish)
	}
	ids, _ = collect(t, e, context.Background(), prompt, SamplingParams{IgnoreEOS: true, MaxTokens: 8})
	if len(ids) != 8 {
		t.Fatalf("ignore_eos: %d tokens, want 8", len(ids))
	}
}

func toBytes(ids []int32) []byte {
	var b []byte
	for _, id := range ids {
		if id < 256 {
			b = append(b, byte(id))
		}
	}
	return b
}

func TestEngineCancelFreesState(t *testing.T) {
	block := make(chan struct{})
	b := &fakeBackend{}
	var once sync.Once
	started := make(chan struct{})
	b.decodeDelay = func() {
		once.Do(func() { close(started) })
		<-block
	}
	e := newFakeEngine(b, EngineOptions{})
	defer closeEngine(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	seq, err := e.Generate(ctx, []int32{1, 2, 3}, SamplingParams{IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var last error
		for _, err := range seq {
			last = err
		}
		done <- last
	}()
	<-started
	if e.Stats().LiveSequences != 1 {
		t.Fatalf("live sequences %d, want 1", e.Stats().LiveSequences)
	}
	cancel()
	close(block)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("iteration ended with %v, want context.Canceled", err)
	}
	// The scheduler drops Running and StateBytes on its next step, after the
	// sequence itself is freed: wait for all of them (flaked under load).
	waitFor(t, "state freed", func() bool {
		s := e.Stats()
		return s.LiveSequences == 0 && b.live.Load() == 0 && s.StateBytes == 0 && s.Running == 0
	})
}

// Breaking out of the loop is a cancellation too.
func TestEngineBreakFreesState(t *testing.T) {
	b := &fakeBackend{}
	e := newFakeEngine(b, EngineOptions{})
	defer closeEngine(t, e)
	seq, err := e.Generate(context.Background(), []int32{5, 6}, SamplingParams{IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range seq {
		if n++; n == 3 {
			break
		}
	}
	waitFor(t, "state freed", func() bool { return b.live.Load() == 0 && e.Stats().LiveSequences == 0 })
}

func TestEngineAdmission(t *testing.T) {
	b := &fakeBackend{perToken: 10}
	// budget of 1000 bytes = 100 tokens of state: requests of 10 prompt +
	// 40 max tokens (500 bytes) run two at a time.
	e := newFakeEngine(b, EngineOptions{StateMemory: 1000, MaxWaiting: 5})
	defer closeEngine(t, e)
	p := SamplingParams{MaxTokens: 40, IgnoreEOS: true}
	prompt := testPrompt(10)[:10]

	if _, err := e.Generate(context.Background(), prompt, SamplingParams{MaxTokens: 95}); !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("too large: got %v", err)
	}
	var mu sync.Mutex
	maxBytes := int64(0)
	maxRunning := 0
	var wg sync.WaitGroup
	for range 5 {
		seq, err := e.Generate(context.Background(), prompt, p)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, err := range seq {
				if err != nil {
					t.Error(err)
					return
				}
				s := e.Stats()
				mu.Lock()
				maxBytes = max(maxBytes, s.StateBytes)
				maxRunning = max(maxRunning, s.Running)
				mu.Unlock()
			}
		}()
	}
	// the queue holds at most 5: some are running, so a burst of more
	// eventually overflows it.
	full := false
	var extra []func()
	for range 10 {
		seq, err := e.Generate(context.Background(), prompt, p)
		if errors.Is(err, ErrQueueFull) {
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, func() {
			for range seq {
			}
		})
	}
	if !full {
		t.Error("queue never reported ErrQueueFull")
	}
	for _, f := range extra {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
	if maxBytes > 1000 || maxRunning > 2 {
		t.Errorf("budget exceeded: %d bytes, %d running", maxBytes, maxRunning)
	}
}

func TestEngineErrors(t *testing.T) {
	b := &fakeBackend{ctxLen: 50}
	e := newFakeEngine(b, EngineOptions{})
	long := make([]int32, 50)
	if _, err := e.Generate(context.Background(), long, SamplingParams{}); !errors.Is(err, ErrContextLength) {
		t.Errorf("long prompt: %v", err)
	}
	if _, err := e.Generate(context.Background(), long[:40], SamplingParams{MaxTokens: 20}); !errors.Is(err, ErrContextLength) {
		t.Errorf("prompt+max_tokens: %v", err)
	}
	if _, err := e.Generate(context.Background(), []int32{fakeVocab}, SamplingParams{}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("bad token: %v", err)
	}
	if _, err := e.Generate(context.Background(), nil, SamplingParams{}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("empty prompt: %v", err)
	}
	// default max tokens: the rest of the context
	ids, finish := collect(t, e, context.Background(), long[:45], SamplingParams{IgnoreEOS: true})
	if len(ids) != 5 || finish != "length" {
		t.Errorf("context fill: %d tokens %q", len(ids), finish)
	}
	closeEngine(t, e)
	if _, err := e.Generate(context.Background(), long[:5], SamplingParams{}); !errors.Is(err, ErrEngineClosed) {
		t.Errorf("after close: %v", err)
	}
}

func chatReq(user string) *ChatRequest {
	return &ChatRequest{Messages: []Message{{Role: "user", Content: user}}, RequestSampling: RequestSampling{Temperature: ptr(0.0)}}
}

func TestChat(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		edit    func(*ChatRequest)
		content string
		reason  string
		calls   []FunctionCall
		finish  string
		matched any
	}{
		{name: "plain", script: "Paris.", content: "Paris.", finish: "stop", matched: int32(fakeEOS)},
		{name: "thinking", script: "hmm</think>Paris.", edit: func(r *ChatRequest) {
			r.ChatTemplateKwargs = map[string]any{"thinking": true}
		}, content: "Paris.", reason: "hmm", finish: "stop", matched: int32(fakeEOS)},
		{name: "stop string", script: "one two three", edit: func(r *ChatRequest) {
			r.Stop = StringList{" thr", "zzz"}
		}, content: "one two", finish: "stop", matched: " thr"},
		{name: "length", script: "abcdef", edit: func(r *ChatRequest) { r.MaxTokens = ptr(3) }, content: "abc", finish: "length"},
		{name: "tool call", script: "ok @get(x=1)", edit: func(r *ChatRequest) {
			r.Tools = []Tool{{Type: "function", Function: FunctionDecl{Name: "get"}}}
		}, content: "ok ", calls: []FunctionCall{{Name: "get", Arguments: "x=1"}}, finish: "tool_calls", matched: int32(fakeEOS)},
		{name: "tool_choice none", script: "ok @get(x=1)", edit: func(r *ChatRequest) {
			r.Tools = []Tool{{Type: "function", Function: FunctionDecl{Name: "get"}}}
			r.ToolChoice = &ToolChoice{Mode: "none"}
		}, content: "ok @get(x=1)", finish: "stop", matched: int32(fakeEOS)},
		{name: "parallel off", script: "@a(1)@b(2)", edit: func(r *ChatRequest) {
			r.Tools = []Tool{{Type: "function", Function: FunctionDecl{Name: "a"}}, {Type: "function", Function: FunctionDecl{Name: "b"}}}
			r.ParallelToolCalls = ptr(false)
		}, calls: []FunctionCall{{Name: "a", Arguments: "1"}}, finish: "tool_calls", matched: int32(fakeEOS)},
		// named tool_choice in chat mode: "@get" is forced into the prompt,
		// the model writes the arguments (the fake script is positional:
		// it continues after the forced text).
		{name: "named tool", script: "XXXX(q)", edit: func(r *ChatRequest) {
			r.Tools = []Tool{{Type: "function", Function: FunctionDecl{Name: "get"}}}
			r.ToolChoice = &ToolChoice{Mode: "function", Function: "get"}
		}, calls: []FunctionCall{{Name: "get", Arguments: "q"}}, finish: "tool_calls", matched: int32(fakeEOS)},
		// thinking mode: forced after </think>
		{name: "named tool thinking", script: "r</think>XXXX(q)", edit: func(r *ChatRequest) {
			r.Tools = []Tool{{Type: "function", Function: FunctionDecl{Name: "get"}}}
			r.ToolChoice = &ToolChoice{Mode: "function", Function: "get"}
			r.ChatTemplateKwargs = map[string]any{"enable_thinking": true}
		}, reason: "r", calls: []FunctionCall{{Name: "get", Arguments: "q"}}, finish: "tool_calls", matched: int32(fakeEOS)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{script: scriptText(tt.script)}
			e := newFakeEngine(b, EngineOptions{})
			defer closeEngine(t, e)
			req := chatReq("q")
			if tt.edit != nil {
				tt.edit(req)
			}
			resp, err := e.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			got := ""
			if c.Message.Content != nil {
				got = *c.Message.Content
			}
			reason := ""
			if c.Message.ReasoningContent != nil {
				reason = *c.Message.ReasoningContent
			}
			if got != tt.content || reason != tt.reason || c.FinishReason != tt.finish || c.MatchedStop != tt.matched {
				t.Errorf("got content %q reasoning %q finish %q matched %v; want %q %q %q %v",
					got, reason, c.FinishReason, c.MatchedStop, tt.content, tt.reason, tt.finish, tt.matched)
			}
			if len(c.Message.ToolCalls) != len(tt.calls) {
				t.Fatalf("tool calls %+v, want %+v", c.Message.ToolCalls, tt.calls)
			}
			for i, call := range c.Message.ToolCalls {
				if call.Function != tt.calls[i] || !strings.HasPrefix(call.ID, "call_") || call.Type != "function" {
					t.Errorf("call %d: %+v, want %+v", i, call, tt.calls[i])
				}
			}
			if resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens || resp.Usage.CompletionTokens == 0 {
				t.Errorf("usage %+v", resp.Usage)
			}
		})
	}
}

func TestChatStreamDeltas(t *testing.T) {
	b := &fakeBackend{script: scriptText("think</think>héllo wörld")}
	e := newFakeEngine(b, EngineOptions{})
	defer closeEngine(t, e)
	req := chatReq("q")
	req.ChatTemplateKwargs = map[string]any{"thinking": "true"}
	req.N = ptr(2)
	req.Logprobs = true
	req.TopLogprobs = ptr(2)
	stream, err := e.ChatStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var content, reason [2]strings.Builder
	var finishes [2]string
	var roles [2]int
	var lps [2]int
	var usage *Usage
	for ch, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
			continue
		}
		if finishes[ch.Index] != "" {
			t.Errorf("chunk after finish: %+v", ch)
		}
		if ch.Delta.Role != "" {
			roles[ch.Index]++
		}
		content[ch.Index].WriteString(ch.Delta.Content)
		reason[ch.Index].WriteString(ch.Delta.ReasoningContent)
		if ch.Logprobs != nil {
			lps[ch.Index] += len(ch.Logprobs.Content)
			for _, l := range ch.Logprobs.Content {
				if len(l.TopLogprobs) != 2 || l.Logprob > 0 {
					t.Errorf("logprob entry %+v", l)
				}
			}
		}
		finishes[ch.Index] = ch.FinishReason
	}
	for i := range 2 {
		if content[i].String() != "héllo wörld" || reason[i].String() != "think" || finishes[i] != "stop" || roles[i] != 1 {
			t.Errorf("choice %d: content %q reasoning %q finish %q roles %d", i, content[i].String(), reason[i].String(), finishes[i], roles[i])
		}
	}
	// 5 + 1 (</think>) + 13 bytes + EOS = 20 tokens per choice
	if usage == nil || usage.CompletionTokens != 40 || usage.CompletionTokensDetails == nil || usage.CompletionTokensDetails.ReasoningTokens != 12 {
		t.Errorf("usage %+v %+v", usage, usage.CompletionTokensDetails)
	}
	if lps[0] != 20 {
		t.Errorf("%d logprob entries, want 20", lps[0])
	}
}

func TestChatInvalid(t *testing.T) {
	e := newFakeEngine(&fakeBackend{}, EngineOptions{})
	defer closeEngine(t, e)
	tool := []Tool{{Type: "function", Function: FunctionDecl{Name: "get"}}}
	cases := []func(r *ChatRequest){
		func(r *ChatRequest) { r.Messages = nil },
		func(r *ChatRequest) { r.Messages[0].Role = "wizard" },
		func(r *ChatRequest) { r.ToolChoice = &ToolChoice{Mode: "required"} },
		func(r *ChatRequest) { r.Tools = tool; r.ToolChoice = &ToolChoice{Mode: "function", Function: "nope"} },
		func(r *ChatRequest) { r.Tools = []Tool{{Type: "x"}} },
		func(r *ChatRequest) { r.N = ptr(0) },
		func(r *ChatRequest) { r.MaxTokens = ptr(-1) },
		func(r *ChatRequest) { r.Temperature = ptr(-1.0) },
		func(r *ChatRequest) { r.TopLogprobs = ptr(3) },
		func(r *ChatRequest) { r.LogitBias = map[string]float64{"abc": 1} },
		func(r *ChatRequest) { r.LogitBias = map[string]float64{"100000": 1} },
		func(r *ChatRequest) { r.ReasoningEffort = "extreme" },
		func(r *ChatRequest) { r.Messages[0].ContentParts = []template.ContentPart{{Type: "image_url"}} },
	}
	for i, edit := range cases {
		r := chatReq("q")
		edit(r)
		if _, err := e.Chat(context.Background(), r); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("case %d: got %v, want ErrInvalidParams", i, err)
		}
	}
}

// TestStopMatcher: without include the match and what follows it are cut
// (OpenAI); with include (vLLM's include_stop_str_in_output) the text is
// cut after the match, nothing is held back, and a match spanning pushes
// is still found (vLLM's StopChecker.check_stop_strings searches the tail
// of the text already released).
func TestStopMatcher(t *testing.T) {
	for _, tt := range []struct {
		chunks  []string
		stops   []string
		include bool
		out     string
		hit     string
	}{
		{[]string{"ab", "cd", "ef"}, []string{"cde"}, false, "ab", "cde"},
		{[]string{"a", "b", "c"}, []string{"x"}, false, "abc", ""},
		{[]string{"hel", "lo wo", "rld"}, []string{"o w", "ld"}, false, "hell", "o w"},
		{[]string{"aaab"}, []string{"aab"}, false, "a", "aab"},
		{[]string{"ü", "ber"}, []string{"übe"}, false, "", "übe"},
		{[]string{"ab", "cd", "ef"}, []string{"cde"}, true, "abcde", "cde"},
		{[]string{"a", "b", "c"}, []string{"x"}, true, "abc", ""},
		{[]string{"hel", "lo wo", "rld"}, []string{"o w", "ld"}, true, "hello w", "o w"},
		{[]string{"aaab"}, []string{"aab"}, true, "aaab", "aab"},
		{[]string{"ü", "ber"}, []string{"übe"}, true, "übe", "übe"},
		{[]string{"x", "y", "z", "w"}, []string{"xyz"}, true, "xyz", "xyz"},
		{[]string{"世", "界!"}, []string{"界"}, true, "世界", "界"},
	} {
		m := newStopMatcher(tt.stops, tt.include)
		var out strings.Builder
		hit := ""
		for _, c := range tt.chunks {
			s, h := m.push(c)
			if tt.include && h == "" && s != c {
				t.Errorf("%v / %v include: push(%q) released %q, want all of it", tt.chunks, tt.stops, c, s)
			}
			out.WriteString(s)
			if h != "" {
				hit = h
				break
			}
		}
		if hit == "" {
			out.WriteString(m.flush())
		}
		if out.String() != tt.out || hit != tt.hit {
			t.Errorf("%v / %v include=%v: got %q %q, want %q %q", tt.chunks, tt.stops, tt.include, out.String(), hit, tt.out, tt.hit)
		}
	}
}

func ExampleEngine_ChatStream() {
	b := &fakeBackend{script: scriptText("Hi!")}
	e := newFakeEngine(b, EngineOptions{})
	defer e.Close(context.Background())
	stream, err := e.ChatStream(context.Background(), chatReq("Hello"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for chunk, err := range stream {
		if err != nil {
			fmt.Println(err)
			return
		}
		if chunk.Usage != nil {
			fmt.Println("\ntokens:", chunk.Usage.CompletionTokens)
			continue
		}
		fmt.Print(chunk.Delta.Content)
	}
	// Output:
	// Hi!
	// tokens: 4
}

// With one slot, queued requests are admitted strictly in arrival order
// (whatever order their consumers read in).
func TestEngineFIFO(t *testing.T) {
	b := &fakeBackend{}
	e := newFakeEngine(b, EngineOptions{MaxBatch: 1})
	defer closeEngine(t, e)
	var wg sync.WaitGroup
	var seqs []func()
	for i := range 8 {
		seq, err := e.Generate(context.Background(), testPrompt(i), SamplingParams{MaxTokens: 3, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, func() {
			for range seq {
			}
		})
	}
	for i := len(seqs) - 1; i >= 0; i-- { // consumers start in reverse order
		wg.Add(1)
		go func() { defer wg.Done(); seqs[i]() }()
	}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.firstTokens) != 8 {
		t.Fatalf("%d sequences prefilled, want 8", len(b.firstTokens))
	}
	for i, first := range b.firstTokens {
		if first != testPrompt(i)[0] {
			t.Fatalf("admission order (first prompt tokens) %v, want arrival order", b.firstTokens)
		}
	}
}

// Close with an expired context ends running requests with ErrEngineClosed
// and frees their state, even when the backend ignores the context.
func TestEngineCloseTimeout(t *testing.T) {
	b := &fakeBackend{decodeDelay: func() { time.Sleep(time.Millisecond) }}
	e := newFakeEngine(b, EngineOptions{})
	seq, err := e.Generate(context.Background(), []int32{1, 2}, SamplingParams{IgnoreEOS: true, MaxTokens: 4000})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var last error
		for _, err := range seq {
			last = err
		}
		done <- last
	}()
	waitFor(t, "running", func() bool { return e.Stats().Running == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, ErrEngineClosed) {
		t.Fatalf("running request ended with %v", err)
	}
	if b.live.Load() != 0 || e.Stats().LiveSequences != 0 {
		t.Fatal("state not freed")
	}
}

// Close of an engine with nothing running returns nil even when its ctx has
// already ended: nothing had to be cancelled. It returned ctx's error every
// time (the ctx won the race against the loop's exit), against its doc.
// Queued requests still fail with ErrEngineClosed.
func TestEngineCloseIdle(t *testing.T) {
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 30 {
		e := newFakeEngine(&fakeBackend{}, EngineOptions{})
		if i%2 == 1 { // after a finished request
			s, err := e.Generate(context.Background(), []int32{1}, SamplingParams{MaxTokens: 2})
			if err != nil {
				t.Fatal(err)
			}
			for range s {
			}
			waitFor(t, "idle", func() bool { return e.Stats().LiveSequences == 0 })
		}
		if err := e.Close(expired); err != nil {
			t.Fatalf("run %d: idle Close(expired ctx) = %v, want nil", i, err)
		}
		if _, err := e.Generate(context.Background(), []int32{1}, SamplingParams{}); !errors.Is(err, ErrEngineClosed) {
			t.Fatalf("run %d: Generate after Close: %v", i, err)
		}
	}
}
