// Package numfmt converts the numeric formats found in DeepSeek-V4 checkpoints
// to and from float32: bfloat16, float16, FP8 E4M3FN, the UE8M0 (E8M0) scale
// format and FP4 E2M1.
//
// All decoders are exact (every code of the narrow formats is representable in
// float32). Encoders round to nearest, ties to even, as PyTorch's casts do.
//
// float16 goes through github.com/x448/float16 (IEEE 754 binary16, RNE, NaN
// payloads kept) rather than a hand-written converter: it is small, exhaustively
// tested upstream, and the format has no DeepSeek-specific twist.
//
// Byte order of every batch converter is little-endian, as in safetensors.
package numfmt
