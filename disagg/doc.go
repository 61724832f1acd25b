// Package disagg runs DeepSeek-V4 inference disaggregated into prefill and
// decode roles, the way SGLang and vLLM do (SGLang's PD disaggregation,
// https://docs.sglang.io/advanced_features/pd_disaggregation.html, and its
// router's --pd-disaggregation mode; vLLM's disaggregated prefilling,
// https://docs.vllm.ai/en/latest/features/disagg_prefill/): a prefill
// server computes a request's KV state, the state travels to a decode
// server, which generates the output; a Router in front speaks the OpenAI
// API and pairs the two. The request fields (bootstrap_host,
// bootstrap_port, bootstrap_room; kv_transfer_params in sequential mode) and
// the server flags follow SGLang's names.
//
// The pieces, bottom up:
//
//   - Handoff is one request's transferable state: the typed per-layer
//     components of dsv4.SequenceState (sliding-window ring, compressor and
//     lightning-indexer buffers, overlap and entries), the prompt, the last
//     position's logits (the decode side samples the first token from them
//     with the request's own sampling parameters), the greedy first token and
//     the sampling parameters the prefill side saw.
//   - The wire format (Encoder, Decoder, WriteStream, ReadStream): versioned
//     frames (header, data chunks, trailer), each with a CRC-32C, plus a
//     CRC-32C and length over the whole payload, so truncated or corrupted
//     streams are refused with typed errors (ErrTruncated, ErrChecksum,
//     ErrMalformed, ErrVersion, ErrIncompatible), and streams larger than the
//     receiver's Limits (LimitsFor: the model's largest state at the served
//     context) with ErrTooLarge before they are buffered.
//   - Identity and the handshake: model, config and KV-layout fingerprints,
//     weights fingerprint, layer types, dtype, layout and protocol version;
//     mismatched pairs are refused at connect time.
//   - Transport: how a decode server fetches a room's handoff from a prefill
//     server. GRPCTransport (the default, google.golang.org/grpc streaming
//     with a hand-written service descriptor and a raw-bytes codec, so no
//     protoc step) and InProcess (no serialization). An RDMA transport can
//     implement the same interface behind a build tag.
//   - PrefillServer and DecodeServer: the two roles, as http.Handlers with
//     the OpenAI chat-completions surface, a bootstrap service per prefill
//     server and a per-room state machine with timeouts, leases and aborts.
//   - Router: the OpenAI-compatible front in regular or PD mode, with
//     selection policies, health checks, circuit breakers and Prometheus
//     metrics. It also passes vLLM's utility endpoints through: POST
//     /tokenize and /detokenize to a worker in regular mode and to a decode
//     server in PD mode (DecodeServer answers them with examples/server's
//     code, package internal/tokenizeapi), GET /version in regular mode;
//     GET /v1/models/{id} is relayed in both modes (the prefill and decode
//     servers answer it too).
//
// Bad requests get the answers examples/server gives (package openaierr,
// which both use): the same HTTP status and OpenAI error object, with the
// field at fault as "param" and messages that name JSON fields and types
// (`invalid type for "temperature": expected a number, got string`;
// "malformed JSON: …"); unknown paths get 404 not_found_error. Unlike
// SGLang's PD servers, the prefill and decode servers refuse a "model"
// other than their served name (or an alias) with 404 model_not_found, as
// examples/server and vLLM do, so a Router answers the same in PD mode as
// in front of examples/server workers.
//
// Metrics: besides their dsv4_* series, the decode server and the Router
// export vLLM's V1 series under vLLM's names, labels (model_name, engine)
// and buckets, for dashboards written against vLLM: the decode server all
// that examples/server exports (its engine's vllm:num_requests_running /
// _waiting, prefix cache counters, token counters, finish reasons and
// latency histograms per choice); the Router what it can see of the
// responses it forwards (vllm:request_success_total{finished_reason},
// vllm:e2e_request_latency_seconds, vllm:time_to_first_token_seconds and
// vllm:inter_token_latency_seconds of streams, vllm:prompt_tokens_total and
// vllm:generation_tokens_total from the responses' usage), labelled with
// the model name the responses carry. The prefill server, which generates
// no tokens, exports none of them.
//
// Dependencies: google.golang.org/grpc carries the KV streams (HTTP/2 flow
// control, deadlines and cancellation for free); the Prometheus client
// (github.com/prometheus/client_golang) exports the metrics.
package disagg
