// Package dsv4 loads DeepSeek-V4 checkpoints and runs them: the forward
// pass on the CPU, a continuous-batching generation engine, and an
// OpenAI-style chat and completions layer on top.
//
// # Loading a model
//
// [Load] opens a checkpoint directory (config.json plus one .safetensors
// file or a sharded model.safetensors.index.json, in Hugging Face or
// DeepSeek tensor naming, BF16/F16/F32, FP8 and MXFP4/NVFP4 forms) and
// returns a [*Model]:
//
//	m, err := dsv4.Load(ctx, dir)
//	if err != nil { ... }
//	defer m.Close()
//
// The small embedded test model lives in package models
// (models.TinyDir() writes it to the user cache and returns its
// directory). To inspect a checkpoint without loading its weights (for
// example the full V4-Flash release), use [OpenCheckpoint], which reads
// only metadata.
//
// Memory: Load dequantizes every weight to float32 once, at load time:
// plan on 4 bytes per parameter of resident memory (the safetensors files
// themselves are memory-mapped and released by [Model.Close]). This suits
// small and medium models; the published V4 checkpoints would need
// hundreds of GB to a TB of float32 weights.
//
// # Running the forward pass by hand
//
// A [Sequence] is one request's state: the KV cache of every layer
// (sliding-window ring, compressed-attention buffers and entries, the
// lightning indexer's state) and the number of tokens processed.
//
//	seq := m.NewSequence()
//	defer seq.Release()
//	logits, err := m.Prefill(ctx, seq, promptIDs) // [vocab] float32, last position
//	next := pick(logits) // your sampler, e.g. argmax; stop at m.Config().EOSTokenIDs
//	rows, err := m.Decode(ctx, []*dsv4.Sequence{seq}, []int32{next})
//
// promptIDs come from [Engine.ChatPrompt] (a chat request, template
// applied) or [Engine.Tokenize] (raw text); [Engine.Detokenize] spells the
// output ids. Decode extends a prefilled sequence ([ErrEmptySequence]
// otherwise).
//
// [Model.Prefill] appends tokens (call it repeatedly for chunked prefill);
// [Model.PrefillAll] returns every position's logits; [Model.Decode]
// appends one token to each of many sequences in one batched step. Token
// ids are int32 everywhere. Results are batch invariant: a sequence's
// logits are the same bits whether it runs alone or batched, prefilled at
// once or token by token.
//
// [Sequence.Snapshot] copies a sequence's state into a [SequenceState]
// (exported, typed per-layer components with a Bytes method) and
// [Model.Restore] rebuilds a Sequence from one, validating every length
// against the model's config. [TransferKV] moves a sequence's state to
// another Model with the same configuration in the same process without
// copying ([ErrIncompatible] otherwise); across processes, package
// disagg carries snapshots over the network for prefill/decode
// disaggregation.
//
// # Generating text
//
// An [Engine] schedules many concurrent requests on one model with
// continuous batching: each step runs one batched Decode over the decoding
// sequences plus chunked prefill of new ones under a token budget, with
// FIFO admission under an optional state-memory budget
// ([EngineOptions]). [Engine.Generate] works on token ids and returns an
// iterator of sampled tokens ([SamplingParams]: temperature, top-p/k,
// min-p, penalties, logit bias, seed, stop tokens, logprobs).
//
// Automatic prefix caching is on by default, as in vLLM V1: the engine
// saves the state of prompts' prefixes as it prefills them (whole
// prompts with their last logits, the point where a prompt leaves an
// earlier one, checkpoints at 64, 128, 256, ... tokens) in an LRU under
// EngineOptions.PrefixCacheBytes (default [DefaultPrefixCacheBytes];
// negative turns it off), and a request whose prompt starts with a saved
// prefix restores a copy of it and prefills only the rest, with the same
// tokens and logprobs as without the cache. [Usage].PromptTokensDetails
// reports the restored tokens; [EngineStats] counts queries and hits.
//
// Structured outputs: a request's response_format of type json_object or
// json_schema (and vLLM's structured_outputs json / json_object), on chat
// and completions, is enforced while decoding, as vLLM does it with
// xgrammar: each step masks the tokens whose bytes cannot continue a value
// of the schema, and EOS waits for a complete value ([OutputConstraint];
// the schema subset, limits and the 400 for unsupported keywords are
// described at [JSONSchemaConstraint]). So are vLLM's structured_outputs
// choice and regex (and the legacy guided_choice / guided_regex): the
// output is exactly one of the choices, or matches the pattern in full,
// with EOS only on a complete match ([ChoiceConstraint],
// [RegexConstraint]). In thinking mode only the content after </think> is
// constrained.
//
// [Engine.Chat] and [Engine.ChatStream] take a [ChatRequest], the OpenAI
// chat-completions request (with the sampling extensions of SGLang and
// vLLM): they render the prompt with DeepSeek-V4's chat encoding (or a
// Jinja chat template, see package template), tokenize it, generate, and
// parse the output into content, reasoning_content and tool calls
// (package parse). [Engine.CompleteStream] serves the legacy completions
// API. [Model.Chat] and [Model.ChatStream] are shortcuts over a shared
// default engine:
//
//	resp, err := m.Chat(ctx, &dsv4.ChatRequest{
//		Messages: []dsv4.Message{{Role: "user", Content: "Hello"}},
//	})
//	fmt.Println(*resp.Choices[0].Message.Content)
//
// Special-token literals (for example "<｜end▁of▁sentence｜>") inside
// message content are encoded as the special tokens they spell, as in
// Hugging Face transformers, vLLM and SGLang; servers facing untrusted
// users should keep that in mind.
//
// # Errors
//
// Every error wraps a sentinel, to be tested with errors.Is, and most
// carry details reachable with errors.As:
//   - loading: [ErrConfig] ([*ConfigError] names the config.json field),
//     [ErrMissingTensor], [ErrUnexpectedTensor], [ErrTensorShape],
//     [ErrTensorDType] and [ErrTensorValue] (collected in a
//     [*ValidationError]), [ErrCheckpoint] for malformed files
//     ([*TensorError]), [ErrClosed];
//   - forward pass: [ErrSequence] (nil, released, foreign or busy
//     sequence, bad state), [ErrTokenID], [ErrContextLength];
//   - requests: [ErrInvalidParams] (a [*ParamError] naming the OpenAI
//     field, e.g. "max_tokens" or "tools[0].function.name"), [ErrNoChat]
//     (no tokenizer), [ErrQueueFull], [ErrRequestTooLarge],
//     [ErrEngineClosed], [ErrUnreadTimeout];
//   - ctx.Err() whenever a context is cancelled or times out.
//
// Invalid input (malformed files, out-of-range ids, nil arguments) gives an
// error, not a panic; a nil context is ErrInvalidParams from Load,
// OpenCheckpoint, Prefill, PrefillAll, Decode, TransferKV, Generate, Chat,
// ChatStream and CompleteStream (Engine.Close treats it as
// context.Background()).
//
// # Concurrency
//
// A [Model] and an [Engine] are safe for concurrent use by many
// goroutines. A [Sequence] serves one call at a time: Prefill, Decode and
// Snapshot hold it for their whole duration, and a concurrent second
// call on the same sequence fails at once with [ErrSequence] instead of
// corrupting it. Len, Bytes and Release may be called at any time;
// Release during a call takes effect when that call ends. Engine requests
// are cancelled through their context; breaking out of an iterator frees
// the request's state.
package dsv4
