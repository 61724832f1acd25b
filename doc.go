// Package dsv4go is an embeddable Go SDK for DeepSeek-V4 inference.
//
// The module is organised as small packages with one purpose each; imports
// point down only:
//
//	tokenizer   HF tokenizer.json byte-level BPE (leaf)
//	template    DeepSeek-V4 / V3.2 native chat encoders and Jinja chat templates (leaf)
//	parse       reasoning and tool-call output parsers, streaming-capable (leaf)
//	internal/…  numeric formats, safetensors, helpers users must not import (leaves)
//	kernels     the compute: pure-Go CPU backend (default), CUDA behind the cuda build tag
//	dsv4        public API: Load, Model, Sequence, Prefill, Decode, TransferKV, Chat
//	disagg      prefill/decode disaggregation: KV transfer, bootstrap, router
//	examples/…  runnable reference programs built on the public packages only
//
// Start with package dsv4: Load a checkpoint directory, create a Sequence,
// Prefill it, and Decode one token at a time for many sequences at once.
package dsv4go
