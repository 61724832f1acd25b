// Command server is an OpenAI-compatible HTTP server for a DeepSeek-V4
// checkpoint, on net/http, driving one dsv4.Engine (continuous batching).
//
//	go run ./examples/server --model-path models/dsv4-tiny --port 30000
//
// Endpoints: POST /v1/chat/completions (stream and non-stream; tools,
// tool_choice, parallel_tool_calls, chat_template_kwargs thinking /
// enable_thinking, reasoning_effort, logprobs, n, stream_options, vLLM's
// add_generation_prompt and continue_final_message; response_format
// json_object / json_schema and vLLM's structured_outputs json /
// json_object / choice / regex (and the legacy guided_choice /
// guided_regex) enforced by constrained decoding, a 400 naming an
// unsupported schema keyword or regex construct: dsv4.OutputConstraint),
// POST /v1/completions (response_format, structured_outputs and guided_*
// too), GET /v1/models, GET /v1/models/{id} (the list's entry for
// the served name or an alias, e.g. the model path, URL-escaped or not;
// else 404 model_not_found), GET /health, GET /metrics (Prometheus: TTFT,
// inter-token latency and end-to-end histograms, running and waiting
// requests, token counters, KV state memory, prefix-cache queries and hits
// in tokens, the constraint cache's hits, misses, entries and bytes,
// as dsv4_* series; and vLLM V1's series under vLLM's names,
// types, labels and buckets, for dashboards and alerts written against
// vLLM: see "vLLM metrics" below), and vLLM's utility endpoints:
//
//   - POST /tokenize: {"prompt": text, "add_special_tokens"?} or the chat
//     form {"messages", "tools"?, "tool_choice"?, "chat_template_kwargs"?,
//     "reasoning_effort"?, "response_format"?, "add_generation_prompt"?,
//     "continue_final_message"?, "add_special_tokens"?} -> {"count",
//     "max_model_len", "tokens", "token_strs"} (token_strs null unless
//     "return_token_strs": true: then the tokens' strings as vLLM gives
//     them, transformers' convert_ids_to_tokens, e.g. "Ġhello"). The ids are the ones
//     generation prefills: a prompt's those of /v1/completions
//     (dsv4.Engine.Tokenize), messages' those of /v1/chat/completions for
//     the same body (dsv4.Engine.ChatPrompt: chat encoding or --chat-template,
//     tools, thinking, a forced tool-call opening). add_special_tokens is
//     accepted either way and changes nothing (the engine adds no BOS/EOS
//     around a prompt; the chat encoding writes its own BOS; DeepSeek-V4's
//     tokenizer sets add_bos_token false, so vLLM gives the same ids).
//     add_generation_prompt and continue_final_message shape the ids as
//     they shape the chat prompt (both true, or continue_final_message
//     with a last message that is not from the assistant: 400, param
//     continue_final_message).
//   - POST /detokenize: {"tokens": [ids]} -> {"prompt": text}, special
//     tokens kept, as generation spells them; an id outside the vocabulary
//     is a 400 with param "tokens".
//   - GET /version: {"version": the main module's version from the build
//     information, else "devel"}.
//
// /tokenize and /detokenize take "model" (optional; another name is 404
// model_not_found), the body limit, the drain and --api-key like
// /v1/completions; /version, /health and /metrics need no key.
//
// --mock serves a scripted stand-in model instead of a checkpoint (see
// mock.go): client conformance checks such as tools/openai_client_check.py
// run against it without weights.
//
// Flags follow SGLang's names where one exists (--model-path, --host,
// --port, --served-model-name, --api-key, --reasoning-parser,
// --tool-call-parser, --chat-template, --max-running-requests,
// --chunked-prefill-size, --context-length), or vLLM's where SGLang has
// none (--disable-log-requests: each chat or completions request is
// otherwise logged at INFO when it finishes, without its prompt;
// --enable-prefix-caching / --no-enable-prefix-caching, on by default as in
// vLLM V1, with --prefix-cache-bytes for the cache's budget;
// --enable-prompt-tokens-details for usage.prompt_tokens_details.cached_tokens;
// --constraint-cache-mb, the budget in MiB of the engine's cache of compiled
// structured-output constraints, vLLM's VLLM_XGRAMMAR_CACHE_MB as a flag:
// default 512, 0 turns it off, and the environment variable is read when
// the flag is absent). Errors are OpenAI error objects
// ({"error": {"message", "type", "param", "code"}}) with 4xx/5xx status
// codes; unknown request fields are ignored. SIGINT/SIGTERM drains: /health
// turns 503, new requests are refused, running ones finish (up to
// --drain-timeout), then the engine stops.
//
// vLLM metrics (vllm/v1/metrics/loggers.py, package
// internal/vllmmetrics), each with the labels model_name (the served name)
// and engine="0": vllm:num_requests_running and vllm:num_requests_waiting
// (engine sequences, one per choice, as vLLM's engine requests);
// vllm:kv_cache_usage_perc (the share of --max-state-bytes reserved by
// admitted requests, their worst case prompt + max_tokens; absent without a
// budget); vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total
// (tokens, the same counts as dsv4_prefix_cache_*); vllm:prompt_tokens_total
// (each choice's prompt at its first token), vllm:generation_tokens_total
// (as tokens are streamed); vllm:request_success_total{finished_reason}
// (stop, length, abort, error, repetition, all created at 0; tool_calls
// counts as stop, as vLLM's engine reports it; a client gone mid-request is
// abort, an engine failure error); and the histograms
// vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds (one
// interval per chunk that carries new tokens),
// vllm:e2e_request_latency_seconds,
// vllm:request_time_per_output_token_seconds, vllm:request_prompt_tokens and
// vllm:request_generation_tokens (once per finished choice). vLLM's queue / prefill / decode phase histograms,
// iteration tokens and preemptions are not exported. The dsv4_* series
// count per HTTP request instead (a request with n = 2 is one TTFT there,
// two here).
//
// Dependencies: github.com/prometheus/client_golang for /metrics (the
// standard Prometheus client; its text format and histogram semantics are
// what scrapers expect).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/httpserve"
	"github.com/dsv4go/dsv4go/models"
	"github.com/dsv4go/dsv4go/template"
	"github.com/dsv4go/dsv4go/tokenizer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// mockTokenizer returns the DeepSeek-V4 tokenizer embedded with the tiny
// model (package models; the same files as tokenizer/testdata/deepseek-v4),
// parsed from memory, so --mock works from any directory and from an
// installed binary.
func mockTokenizer() (*tokenizer.Tokenizer, error) {
	fsys := models.TinyFS()
	tj, err := fs.ReadFile(fsys, "tokenizer.json")
	if err != nil {
		return nil, err
	}
	cfg, err := fs.ReadFile(fsys, "tokenizer_config.json")
	if err != nil {
		return nil, err
	}
	return tokenizer.Parse(tj, cfg)
}

func run() error {
	var (
		modelPath      = flag.String("model-path", "", "checkpoint directory (config.json, safetensors, tokenizer.json); default: the embedded tiny model")
		host           = flag.String("host", "127.0.0.1", "listen address")
		port           = flag.Int("port", 30000, "listen port")
		servedName     = flag.String("served-model-name", "", "model id reported and accepted (default: the directory name)")
		apiKey         = flag.String("api-key", "", "require Authorization: Bearer KEY on /v1/*, /tokenize and /detokenize")
		reasoning      = flag.String("reasoning-parser", "", "reasoning parser: deepseek-v4, deepseek-v3, deepseek-r1, none (default: the model's)")
		toolParser     = flag.String("tool-call-parser", "", "tool-call parser: deepseek-v4 (deepseekv4), deepseekv32, deepseekv31, deepseekv3, none (default: the model's)")
		chatTemplate   = flag.String("chat-template", "", "chat encoding deepseek-v4 or deepseek-v32, or a Jinja chat template file (default: the model's encoding)")
		maxRunning     = flag.Int("max-running-requests", 64, "most sequences decoding at once")
		chunkedPrefill = flag.Int("chunked-prefill-size", 512, "per-step token budget (prefill chunks + decode tokens)")
		maxQueued      = flag.Int("max-queued-requests", 1024, "most requests waiting for admission (more get 503)")
		stateMem       = flag.Int64("max-state-bytes", 0, "KV state memory budget in bytes (0: unlimited); a request reserves its worst case, prompt + max_tokens")
		defaultMaxTok  = flag.Int("default-max-tokens", 0, "max_tokens of requests that set none (0: the rest of the context)")
		contextLen     = flag.Int("context-length", 0, "served context in tokens; longer prompts (or prompt + max_tokens) get 400 context_length_exceeded (0: the model's; for the embedded dsv4-tiny, trained on short turns, "+strconv.Itoa(models.TinyContextLength)+")")
		maxBody        = flag.Int64("max-body-bytes", 8<<20, "request body limit")
		drainTimeout   = flag.Duration("drain-timeout", 30*time.Second, "how long shutdown waits for running requests")
		logLevel       = flag.String("log-level", "info", "debug, info, warn, error")
		noLogRequests  = flag.Bool("disable-log-requests", false, "do not log each chat / completions request (one INFO line when it finishes: status, ids, token counts, finish reasons, timings; never the prompt), as vLLM's --disable-log-requests")
		tokenizerPath  = flag.String("tokenizer-path", "", "tokenizer directory (default: the model's)")
		mock           = flag.Bool("mock", false, "serve a scripted stand-in model (DeepSeek-V4 vocabulary, no checkpoint) for client tests")
		mockDelay      = flag.Duration("mock-delay", 0, "with --mock: time per decode step")
		hdrTimeout     = flag.Duration("read-header-timeout", httpserve.DefaultReadHeader, "time a client has to send the request headers (negative: no limit)")
		bodyTimeout    = flag.Duration("body-read-timeout", httpserve.DefaultBody, "time a client has to send the request body after its headers; slower clients are cut off (negative: no limit; responses, SSE included, have no write timeout)")
		idleTimeout    = flag.Duration("idle-timeout", httpserve.DefaultIdle, "how long a keep-alive connection may wait for its next request (negative: no limit)")
		promptDetails  = flag.Bool("enable-prompt-tokens-details", false, "report usage.prompt_tokens_details.cached_tokens (prompt tokens restored from the prefix cache) when > 0, as vLLM's flag")
		prefixCache    prefixCacheFlags
		constraintMB   = flag.Int64("constraint-cache-mb", dsv4.DefaultConstraintCacheBytes>>20, "budget of the cache of compiled structured-output constraints in MiB, as vLLM's VLLM_XGRAMMAR_CACHE_MB (read when the flag is absent); 0: no cache")
	)
	prefixCache.register(flag.CommandLine)
	flag.Parse()
	constraintSet := false
	flag.Visit(func(f *flag.Flag) { constraintSet = constraintSet || f.Name == "constraint-cache-mb" })
	constraintBytes, err := constraintCacheBytes(*constraintMB, constraintSet, os.Getenv("VLLM_XGRAMMAR_CACHE_MB"))
	if err != nil {
		return err
	}
	if err := checkFlagValues([]flagValue{
		{"context-length", int64(*contextLen), 0, "0: the model's"},
		{"default-max-tokens", int64(*defaultMaxTok), 0, "0: the rest of the context"},
		{"max-state-bytes", *stateMem, 0, "0: unlimited"},
		{"prefix-cache-bytes", prefixCache.bytes, 0, "0: no prefix caching"},
		{"max-running-requests", int64(*maxRunning), 1, ""},
		{"chunked-prefill-size", int64(*chunkedPrefill), 1, ""},
		{"max-queued-requests", int64(*maxQueued), 1, ""},
		{"max-body-bytes", *maxBody, 1, ""},
	}); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	if *modelPath == "" && !*mock { // the embedded tiny model (package models)
		dir, err := models.TinyDir()
		if err != nil {
			return err
		}
		*modelPath = dir
		if *contextLen == 0 {
			*contextLen = models.TinyContextLength
		}
		if *servedName == "" {
			*servedName = models.TinyName
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := dsv4.EngineOptions{
		MaxBatch: *maxRunning, StepTokens: *chunkedPrefill, MaxWaiting: *maxQueued, StateMemory: *stateMem,
		DefaultMaxTokens: *defaultMaxTok, MaxContext: *contextLen, ReasoningParser: *reasoning, ToolCallParser: *toolParser,
		PrefixCacheBytes: prefixCache.engineBytes(), ConstraintCacheBytes: constraintBytes,
	}
	switch *chatTemplate {
	case "", dsv4.EncodingV4, dsv4.EncodingV32:
		opts.Encoding = *chatTemplate
	default: // a Jinja template file, as SGLang's --chat-template
		src, err := os.ReadFile(*chatTemplate)
		if err != nil {
			return err
		}
		j, err := template.ParseJinja(string(src), nil)
		if err != nil {
			return err
		}
		opts.Renderer = &template.JinjaRenderer{Template: j}
	}
	switch {
	case *tokenizerPath != "":
		t, err := tokenizer.Load(*tokenizerPath)
		if err != nil {
			return err
		}
		opts.Tokenizer = t
	case *mock:
		t, err := mockTokenizer()
		if err != nil {
			return err
		}
		opts.Tokenizer = t
	}
	if jr, ok := opts.Renderer.(*template.JinjaRenderer); ok && opts.Tokenizer != nil {
		jr.SpecialTokens = specialTokens(opts.Tokenizer)
	}
	var eng *dsv4.Engine
	name := *servedName
	if *mock {
		var err error
		eng, err = dsv4.NewEngineWithBackend(&scriptBackend{tok: opts.Tokenizer, delay: *mockDelay}, opts)
		if err != nil {
			return err
		}
		if name == "" {
			name = "dsv4-mock"
		}
	} else {
		log.Info("loading model", "path", *modelPath)
		m, err := dsv4.Load(ctx, *modelPath)
		if err != nil {
			return err
		}
		defer m.Close()
		if jr, ok := opts.Renderer.(*template.JinjaRenderer); ok && jr.SpecialTokens == nil {
			if t, err := tokenizer.Load(*modelPath); err == nil {
				opts.Tokenizer = t
				jr.SpecialTokens = specialTokens(t)
			}
		}
		eng, err = dsv4.NewEngine(m, opts)
		if err != nil {
			return err
		}
		if name == "" {
			name = filepath.Base(filepath.Clean(*modelPath))
		}
	}
	srv := NewServer(eng, ServerConfig{ModelName: name, Aliases: []string{*modelPath}, APIKey: *apiKey,
		MaxBodyBytes: *maxBody, MaxTokens: *contextLen, Logger: log, DisableLogRequests: *noLogRequests,
		EnablePromptTokensDetails: *promptDetails})
	hs := httpserve.New(srv.Handler(), httpserve.Timeouts{ReadHeader: *hdrTimeout, Body: *bodyTimeout, Idle: *idleTimeout})
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "model", name)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("draining", "timeout", *drainTimeout)
	return shutdown(srv, hs, eng, *drainTimeout)
}

// prefixCacheFlags are the prefix-caching flags: vLLM's
// --enable-prefix-caching and --no-enable-prefix-caching (on by default, as
// in vLLM V1; the last one given wins, as with argparse's
// BooleanOptionalAction) and --prefix-cache-bytes, the cache's budget (0
// turns it off too).
type prefixCacheFlags struct {
	enabled bool
	bytes   int64
}

// register defines the flags on fs.
func (p *prefixCacheFlags) register(fs *flag.FlagSet) {
	p.enabled = true
	set := func(on bool) func(string) error {
		return func(v string) error {
			b, err := strconv.ParseBool(v)
			p.enabled = b == on
			return err
		}
	}
	fs.BoolFunc("enable-prefix-caching", "restore the saved state of a prompt's longest cached prefix instead of prefilling it (default on)", set(true))
	fs.BoolFunc("no-enable-prefix-caching", "turn prefix caching off", set(false))
	fs.Int64Var(&p.bytes, "prefix-cache-bytes", dsv4.DefaultPrefixCacheBytes, "prefix cache budget in bytes, beside --max-state-bytes (0: no prefix caching)")
}

// engineBytes is the flags' dsv4.EngineOptions.PrefixCacheBytes (negative:
// off).
func (p *prefixCacheFlags) engineBytes() int64 {
	if !p.enabled || p.bytes == 0 {
		return -1
	}
	return p.bytes
}

// constraintCacheBytes is dsv4.EngineOptions.ConstraintCacheBytes for
// --constraint-cache-mb mb (set: given on the command line), or else for
// the environment variable VLLM_XGRAMMAR_CACHE_MB, env, when it is not
// empty (vLLM's knob for the same cache, in MiB, default 512): 0 turns
// the cache off (-1); a negative value, one that is not an integer or
// one whose bytes overflow an int64 is an error naming its source.
func constraintCacheBytes(mb int64, set bool, env string) (int64, error) {
	src := "--constraint-cache-mb"
	if !set && env != "" {
		v, err := strconv.ParseInt(strings.TrimSpace(env), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VLLM_XGRAMMAR_CACHE_MB must be an integer number of MiB, got %q", env)
		}
		mb, src = v, "VLLM_XGRAMMAR_CACHE_MB"
	}
	switch {
	case mb < 0 || mb > math.MaxInt64>>20:
		return 0, fmt.Errorf("%s must be between 0 (no cache) and %d MiB, got %d", src, int64(math.MaxInt64>>20), mb)
	case mb == 0:
		return -1, nil
	}
	return mb << 20, nil
}

// flagValue is a numeric flag's value and the least value it means
// something at (zero carries a documented meaning when min is 0).
type flagValue struct {
	name     string
	v, min   int64
	zeroNote string // what 0 means, for the message ("" when 0 is refused)
}

// checkFlagValues refuses a flag below its least meaningful value, so that
// --context-length -5 stops the server at startup with a message instead
// of being read as the model's context (the engine takes every value <= 0
// as "unset").
func checkFlagValues(vals []flagValue) error {
	for _, f := range vals {
		if f.v >= f.min {
			continue
		}
		if f.zeroNote != "" {
			return fmt.Errorf("--%s must be >= %d (%s), got %d", f.name, f.min, f.zeroNote, f.v)
		}
		return fmt.Errorf("--%s must be >= %d, got %d", f.name, f.min, f.v)
	}
	return nil
}

// specialTokens names the tokenizer's BOS and EOS for Jinja templates.
func specialTokens(t *tokenizer.Tokenizer) map[string]string {
	out := map[string]string{}
	if id, ok := t.BOS(); ok {
		if s, ok := t.Token(id); ok {
			out["bos_token"] = s
		}
	}
	if id, ok := t.EOS(); ok {
		if s, ok := t.Token(id); ok {
			out["eos_token"] = s
		}
	}
	return out
}

// shutdown drains: refuse new work, wait for running requests, stop the
// engine.
func shutdown(srv *Server, hs *http.Server, eng *dsv4.Engine, timeout time.Duration) error {
	srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(ctx)
	if cerr := eng.Close(ctx); err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
