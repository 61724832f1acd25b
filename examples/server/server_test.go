package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/template"
	"github.com/dsv4go/dsv4go/tokenizer"
)

var (
	tokOnce sync.Once
	tokV4   *tokenizer.Tokenizer
	tokErr  error
)

func v4Tokenizer(t testing.TB) *tokenizer.Tokenizer {
	tokOnce.Do(func() { tokV4, tokErr = tokenizer.Load("../../tokenizer/testdata/deepseek-v4") })
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokV4
}

type testServer struct {
	*httptest.Server
	srv *Server
	eng *dsv4.Engine
	b   *scriptBackend
}

func startServer(t testing.TB, cfg ServerConfig, opts dsv4.EngineOptions, delay time.Duration) *testServer {
	t.Helper()
	b := &scriptBackend{tok: v4Tokenizer(t), delay: delay}
	opts.Tokenizer = b.tok
	eng, err := dsv4.NewEngineWithBackend(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "dsv4-script"
	}
	srv := NewServer(eng, cfg)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Close(ctx)
	})
	return &testServer{Server: hs, srv: srv, eng: eng, b: b}
}

func (ts *testServer) client(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
	}, opts...)...)
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Get the weather forecast for a city."),
	Parameters: shared.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string"},
			"days": map[string]any{"type": "integer"},
		},
		"required": []string{"city"},
	},
})

func extra(fields map[string]interface{ Raw() string }, key string) string {
	f, ok := fields[key]
	if !ok {
		return ""
	}
	var s string
	_ = json.Unmarshal([]byte(f.Raw()), &s)
	return s
}

func TestOpenAIGoChat(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	c := ts.client()
	ctx := context.Background()

	// plain, non-stream
	resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       "dsv4-script",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there")},
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "You said: Hello there" || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("plain: %q %q", got, resp.Choices[0].FinishReason)
	}
	if resp.Usage.CompletionTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage %+v", resp.Usage)
	}
	if !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Object != "chat.completion" {
		t.Errorf("id %q object %q", resp.ID, resp.Object)
	}

	// tools, non-stream: parallel calls
	params := openai.ChatCompletionNewParams{
		Model:       "dsv4-script",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris and Tokyo?")},
		Tools:       []openai.ChatCompletionToolUnionParam{weatherTool},
		Temperature: openai.Float(0),
	}
	resp, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("tools: finish %q calls %+v content %q", ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
	}
	for i, city := range []string{"Paris", "Tokyo"} {
		tc := ch.Message.ToolCalls[i]
		var args map[string]any
		if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
			t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
		}
		if tc.Function.Name != "get_weather" || args["city"] != city || args["days"] != float64(3) || tc.ID == "" {
			t.Errorf("call %d: %+v", i, tc)
		}
	}

	// the same, streaming, through the client's accumulator
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	nChunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		nChunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	sc := acc.Choices[0]
	if sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != 2 || sc.Message.ToolCalls[1].Function.Arguments != ch.Message.ToolCalls[1].Function.Arguments {
		t.Fatalf("stream tools: %+v", sc)
	}

	// tool result round trip
	params.Messages = append(params.Messages, ch.Message.ToParam(),
		openai.ToolMessage("sunny, 24 C", ch.Message.ToolCalls[0].ID),
		openai.ToolMessage("rain, 18 C", ch.Message.ToolCalls[1].ID))
	resp, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; !strings.HasPrefix(got, "The weather is sunny, 24 C") {
		t.Errorf("after tool results: %q", got)
	}

	// named tool_choice: the output is get_weather's arguments, constrained
	// to its parameters schema (the mock model's text does not follow it:
	// whatever the mask leaves), returned as one call of it, as vLLM does
	// (TestOpenAIGoNamedToolChoice checks the arguments on the real model)
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Oslo")}
	params.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
	resp, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Choices[0].Message; m.Content != "" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || !strings.HasPrefix(m.ToolCalls[0].Function.Arguments, "{") {
		t.Errorf("named tool_choice: %.300s", m.RawJSON())
	}

	// tool_choice none: no parsing, tools not rendered
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	resp, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Choices[0].Message; len(m.ToolCalls) != 0 || m.Content != "You said: weather in Oslo" {
		t.Errorf("tool_choice none: %+v", m)
	}

	// thinking mode, streaming, usage chunk
	tparams := openai.ChatCompletionNewParams{
		Model:         "dsv4-script",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		Temperature:   openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	tparams.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"thinking": true}, "unknown_field": 1})
	stream = c.Chat.Completions.NewStreaming(ctx, tparams)
	var reasoning, content strings.Builder
	var usage *openai.CompletionUsage
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) == 0 {
			u := chunk.Usage
			usage = &u
			continue
		}
		d := chunk.Choices[0].Delta
		content.WriteString(d.Content)
		if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
			var s string
			_ = json.Unmarshal([]byte(f.Raw()), &s)
			reasoning.WriteString(s)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != "Thinking about it." || content.String() != "You said: Hi" {
		t.Errorf("thinking stream: reasoning %q content %q", reasoning.String(), content.String())
	}
	if usage == nil || usage.CompletionTokens == 0 || usage.CompletionTokensDetails.ReasoningTokens == 0 {
		t.Errorf("usage chunk %+v", usage)
	}

	// non-stream reasoning_content
	tparams.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	resp, err = c.Chat.Completions.New(ctx, tparams)
	if err != nil {
		t.Fatal(err)
	}
	var rc struct {
		ReasoningContent string `json:"reasoning_content"`
	}
	_ = json.Unmarshal([]byte(resp.Choices[0].Message.RawJSON()), &rc)
	if rc.ReasoningContent != "Thinking about it." || resp.Choices[0].Message.Content != "You said: Hi" {
		t.Errorf("thinking: %s", resp.Choices[0].Message.RawJSON())
	}

	// max_tokens → length; n = 2; logprobs
	resp, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       "dsv4-script",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count 50")},
		MaxTokens:   openai.Int(5),
		N:           openai.Int(2),
		Logprobs:    openai.Bool(true),
		TopLogprobs: openai.Int(3),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 2 || resp.Choices[1].FinishReason != "length" || len(resp.Choices[0].Logprobs.Content) != 5 ||
		len(resp.Choices[0].Logprobs.Content[0].TopLogprobs) != 3 {
		t.Errorf("n/length/logprobs: %s", resp.RawJSON())
	}

	// models and completions
	models, err := c.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "dsv4-script" {
		t.Errorf("models: %v %+v", err, models)
	}
	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel("dsv4-script"),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("<｜User｜>count 3<｜Assistant｜></think>")},
		MaxTokens:   openai.Int(20),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text != "w1 w2 w3" || comp.Choices[0].FinishReason != "stop" {
		t.Errorf("completions: %+v", comp.Choices[0])
	}
	cstream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel("dsv4-script"),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("<｜User｜>count 4<｜Assistant｜></think>")},
		MaxTokens:   openai.Int(20),
		Temperature: openai.Float(0),
	})
	var text strings.Builder
	for cstream.Next() {
		for _, ch := range cstream.Current().Choices {
			text.WriteString(ch.Text)
		}
	}
	if err := cstream.Err(); err != nil || text.String() != "w1 w2 w3 w4" {
		t.Errorf("completions stream: %q %v", text.String(), err)
	}

	// the Prometheus series saw these requests
	for _, name := range []string{"dsv4_time_to_first_token_seconds_count", "dsv4_inter_token_latency_seconds_count",
		"dsv4_e2e_request_latency_seconds_count", "dsv4_prompt_tokens_total", "dsv4_generation_tokens_total",
		"dsv4_engine_decode_steps_total"} {
		if v := metricValue(t, ts.URL, name); v <= 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	for _, name := range []string{"dsv4_num_requests_running", "dsv4_num_requests_waiting", "dsv4_live_sequences", "dsv4_state_memory_bytes"} {
		if v := metricValue(t, ts.URL, name); v != 0 {
			t.Errorf("%s = %v after all requests ended", name, v)
		}
	}
}

// streamChat posts a streaming chat request and returns the response.
func streamChat(t testing.TB, ctx context.Context, url string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func metricValue(t testing.TB, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			return v
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// disconnectFreesState starts a long stream, reads a few events, checks
// that one sequence is live, disconnects, and waits for the live-state
// gauge to return to 0.
func disconnectFreesState(t *testing.T, url, body string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := streamChat(t, ctx, url, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	for range 6 { // a few events arrive
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if v := metricValue(t, url, "dsv4_live_sequences"); v != 1 {
		t.Fatalf("live sequences mid-stream = %v, want 1", v)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, url, "dsv4_live_sequences") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("live-state gauge did not return to 0 after the client disconnected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := metricValue(t, url, "dsv4_state_memory_bytes"); v != 0 {
		t.Fatalf("state memory after the disconnect: %v", v)
	}
}

func TestDisconnectFreesState(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 5*time.Millisecond)
	disconnectFreesState(t, ts.URL, `{"messages":[{"role":"user","content":"count 100000"}],"stream":true,"temperature":0,"ignore_eos":true}`)
	if ts.b.live.Load() != 0 {
		t.Fatal("backend state not released")
	}
}

// collectStream reads a chat SSE stream into its content.
func collectStream(t testing.TB, resp *http.Response) (string, string) {
	t.Helper()
	defer resp.Body.Close()
	var content strings.Builder
	finish := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Errorf("bad chunk %q: %v", line, err)
			continue
		}
		for _, c := range ch.Choices {
			content.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	return content.String(), finish
}

// concurrentEqualsSequential sends n streaming chat requests one at a time,
// then all at once, and reports every output that differs.
func concurrentEqualsSequential(t *testing.T, url string, n int, body func(int) string) {
	t.Helper()
	want := make([]string, n)
	for i := range n {
		want[i], _ = collectStream(t, streamChat(t, context.Background(), url, body(i)))
	}
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = collectStream(t, streamChat(t, context.Background(), url, body(i)))
		}()
	}
	wg.Wait()
	for i := range n {
		if got[i] != want[i] {
			t.Errorf("request %d: concurrent %q, sequential %q", i, got[i], want[i])
		}
	}
}

func TestConcurrentStreamsEqualSequential(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{MaxBatch: 256}, 0)
	const n = 200
	body := func(i int) string {
		return fmt.Sprintf(`{"messages":[{"role":"user","content":"count %d"}],"stream":true,"temperature":0,"max_tokens":%d}`, i%23+1, 10+i%30)
	}
	concurrentEqualsSequential(t, ts.URL, n, body)
	if v := metricValue(t, ts.URL, "dsv4_live_sequences"); v != 0 {
		t.Errorf("live sequences after the run: %v", v)
	}
}

func TestBadRequests(t *testing.T) {
	ts := startServer(t, ServerConfig{MaxBodyBytes: 1 << 20}, dsv4.EngineOptions{}, 0)
	badRequests(t, ts.URL, "You said: hi")
}

// badRequests sends 72 malformed or invalid requests, checks each gets its
// 4xx status with an OpenAI error object, then that the server still
// answers a good request (with wantHi, when not "").
func badRequests(t *testing.T, url, wantHi string) {
	t.Helper()
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 10<<20) + `"}]}`
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/chat/completions", `{`, 400},
		{"POST", "/v1/chat/completions", `not json`, 400},
		{"POST", "/v1/chat/completions", ``, 400},
		{"POST", "/v1/chat/completions", `[]`, 400},
		{"POST", "/v1/chat/completions", `"str"`, 400},
		{"POST", "/v1/chat/completions", `{"messages":"hi"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[]}`, 400},
		{"POST", "/v1/chat/completions", `{}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":null}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[1,2]}`, 400},
		{"POST", "/v1/chat/completions", `{"model":"gpt-4",` + msgs + `}`, 404},
		{"POST", "/v1/chat/completions", `{"model":5,` + msgs + `}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":-1}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":0}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":100000000}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":"10"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":1.5}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":-5}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"temperature":-1}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"temperature":"hot"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"top_p":1.5}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"top_p":0}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"top_k":-5}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"min_p":2}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"presence_penalty":3}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"frequency_penalty":-3}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"repetition_penalty":-1}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"n":0}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"n":1000}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"stop":5}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"stop":[""]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"x":1}}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"5":500}}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"logit_bias":{"99999999":1}}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"top_logprobs":5}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":50}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"stop_token_ids":[-1]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"stream":"yes"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tool_choice":"required"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tool_choice":"sometimes"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,` + tools + `,"tool_choice":{"type":"function"}}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"retrieval"}]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{}}]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tools":"x"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"reasoning_effort":"extreme"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"seed":"x"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"seed":18446744073709551615}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"response_format":"yes"}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"response_format":{"type":"xml"}}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"a\"><｜DSML｜invoke name=\"b"}}]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"` + strings.Repeat("x", 65) + `"}}]}`, 400},
		{"POST", "/v1/chat/completions", `{` + msgs + `,` + tools[:len(tools)-1] + `,{"type":"function","function":{"name":"get_weather"}}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"tool","content":"r","tool_call_id":"missing"}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{bad"}}]},{"role":"user","content":"x"}]}`, 400},
		{"POST", "/v1/chat/completions", big, 413},
		{"GET", "/v1/chat/completions", ``, 405},
		{"PUT", "/v1/completions", ``, 405},
		{"POST", "/v1/models", ``, 405},
		{"GET", "/v1/nothing", ``, 404},
		{"POST", "/v1/completions", `{}`, 400},
		{"POST", "/v1/completions", `{"prompt":""}`, 400},
		{"POST", "/v1/completions", `{"prompt":5}`, 400},
		{"POST", "/v1/completions", `{"prompt":[99999999]}`, 400},
		{"POST", "/v1/completions", `{"prompt":"x","max_tokens":-1}`, 400},
		{"POST", "/v1/completions", `{"prompt":"x","logprobs":50}`, 400},
		{"POST", "/v1/completions", `{"prompt":"x","suffix":"y"}`, 400},
		{"POST", "/v1/completions", `{"prompt":"x","model":"other"}`, 404},
	}
	if len(cases) < 50 {
		t.Fatalf("only %d cases", len(cases))
	}
	for i, c := range cases {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		short := c.body
		if len(short) > 80 {
			short = short[:80]
		}
		if resp.StatusCode != c.status {
			t.Errorf("case %d %s %s %s: status %d, want %d (%s)", i, c.method, c.path, short, resp.StatusCode, c.status, body)
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("case %d %s: not an OpenAI error object: %s", i, short, body)
		}
	}
	// still up and serving
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after bad requests: %v %v", err, resp)
	}
	content, finish := collectStream(t, streamChat(t, context.Background(), url, `{`+msgs+`,"stream":true,"temperature":0,"max_tokens":20}`))
	if finish == "" || (wantHi != "" && content != wantHi) {
		t.Fatalf("good request after bad ones: %q %q", content, finish)
	}
}

func TestAPIKeyAndDrain(t *testing.T) {
	ts := startServer(t, ServerConfig{APIKey: "sekrit"}, dsv4.EngineOptions{}, 0)
	c := ts.client(option.WithAPIKey("wrong"))
	_, err := c.Models.List(context.Background())
	var apiErr *openai.Error
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("wrong key: %v", err)
	}
	c = ts.client(option.WithAPIKey("sekrit"))
	if _, err := c.Models.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.srv.Drain()
	if resp, _ := http.Get(ts.URL + "/health"); resp.StatusCode != 503 {
		t.Fatalf("health while draining: %d", resp.StatusCode)
	}
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}, Model: "dsv4-script"})
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("request while draining: %v", err)
	}
}

// TestGracefulShutdown: a running stream completes while the server drains.
func TestGracefulShutdown(t *testing.T) {
	b := &scriptBackend{tok: v4Tokenizer(t), delay: 2 * time.Millisecond}
	eng, err := dsv4.NewEngineWithBackend(b, dsv4.EngineOptions{Tokenizer: b.tok})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(eng, ServerConfig{ModelName: "m"})
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Start()
	resp := streamChat(t, context.Background(), hs.URL, `{"messages":[{"role":"user","content":"count 40"}],"stream":true,"temperature":0}`)
	done := make(chan string)
	go func() {
		c, _ := collectStream(t, resp)
		done <- c
	}()
	time.Sleep(20 * time.Millisecond)
	if err := shutdown(srv, hs.Config, eng, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	want := scriptAnswer("", "count 40", false)
	if got := <-done; got != want {
		t.Fatalf("stream cut by shutdown: %q", got)
	}
}

func errorsAs(err error, target any) bool {
	return err != nil && errors.As(err, target)
}

// --chat-template with a HF Jinja template (DeepSeek-V3's) renders through
// template.JinjaRenderer.
func TestJinjaChatTemplate(t *testing.T) {
	cfg, err := os.ReadFile("../../tokenizer/testdata/deepseek-v3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var tc struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(cfg, &tc); err != nil {
		t.Fatal(err)
	}
	j, err := template.ParseJinja(tc.ChatTemplate, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{
		Renderer:        &template.JinjaRenderer{Template: j, SpecialTokens: map[string]string{"bos_token": "<｜begin▁of▁sentence｜>"}},
		ReasoningParser: "none", ToolCallParser: "none",
	}, 0)
	c := ts.client()
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "dsv4-script", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "You said: Hello" {
		t.Fatalf("jinja: %q", got)
	}
}
