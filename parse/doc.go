// Package parse turns the raw completion text of a DeepSeek model into an
// OpenAI-style assistant message: reasoning_content, content and tool_calls.
//
// It implements the reasoning parsers and tool-call parsers that SGLang and
// vLLM register for the DeepSeek family, selected by the same names:
//
//	reasoning: "deepseek-v4", "deepseek-v3" (V3.1 / V3.2 hybrid thinking), "deepseek-r1"
//	tools:     "deepseek-v4" (DSML <｜DSML｜tool_calls> block),
//	           "deepseekv32" (DSML <｜DSML｜function_calls> block),
//	           "deepseekv31" and "deepseekv3" (<｜tool▁calls▁begin｜> blocks)
//
// Names are matched case-insensitively with '-', '_' and '.' ignored, so
// "deepseek_v4", "deepseekv4" and "DeepSeek-V4" are the same parser.
//
// The formats are those of DeepSeek's reference encoder
// (encoding/encoding_dsv4.py, parse_message_from_completion_text) and of the
// DeepSeek V3/V3.1 chat templates; the behaviour on edge cases follows the
// peer test suites of SGLang, vLLM, TensorRT-LLM and ai-dynamo, re-expressed
// as table tests in this package.
//
// There is one parser, a streaming state machine ([Stream]); [Parse] is a
// [Stream] fed the whole text at once. The stream holds back only text that
// may still turn into a marker (a proper prefix of "</think>",
// "<｜DSML｜tool_calls>", ... at the end of what it has seen, and an
// incomplete UTF-8 sequence), so the deltas it emits, merged, equal the
// whole-text result for every way of cutting the text into chunks.
//
// Malformed or truncated output never loses text and never panics: what does
// not parse as a tool call is kept, byte for byte, as content, and the
// problem is reported as a [Diagnostic] whose error wraps one of the
// sentinel errors (errors.Is(d, ErrUnknownTool), ...).
//
// Streaming granularity: reasoning and content stream as they arrive. The
// output of a tool-call block (its calls, and the text of its rejected
// parts) is held until the block closes (</｜DSML｜tool_calls>,
// </｜DSML｜function_calls>, <｜tool▁calls▁end｜>; for bare invokes
// without a block marker, the first other text or the end of the input),
// then each call comes as a header delta (index, id, name) followed by its
// arguments. A call is therefore never streamed and then retracted, and the
// merged stream equals [Parse] for truncated or malformed output too
// (BREAKER F28). Peers differ here: vLLM streams string values as they
// arrive; SGLang's V3.2 detector emits a DSML call when its invoke closes.
// Options.StreamCalls selects vLLM's way: the header when the invoke's name
// is read, then argument fragments as they are parsed; the merged stream
// then equals [Parse] for well-formed output only (a call already emitted
// is never retracted).
//
// Incomplete or malformed DSML is never a tool call:
//   - a tool-call block not closed at the end of the input is content, byte
//     for byte from its opening marker (the "\n\n" envelope included), with
//     an ErrUnterminatedToolCall diagnostic, whatever it holds; so is a V3 /
//     V3.1 block (SGLang and vLLM find calls only inside a complete block
//     when not streaming);
//   - an invoke closed by the block end, or a parameter closed by the invoke
//     or block end, makes that invoke content (ErrUnterminatedToolCall);
//   - a value containing "<｜DSML｜" or "</｜DSML｜" (other than its own
//     closing </｜DSML｜parameter>) makes the invoke content, from its
//     opening marker up to its </｜DSML｜invoke> (ErrMalformedToolCall): an
//     argument never contains DSML markup;
//   - the other, well-formed calls of a closed block are kept; in a run of
//     bare invokes cut by the end of the input, the closed ones are calls
//     and the cut one is content.
//
// Choices where peers differ (all covered by tests):
//   - DSML arguments are rebuilt as {"k": v, ...} with Python's json.dumps
//     spacing and ensure_ascii=False, exactly as DeepSeek's reference parser
//     (string="false" values are re-serialized the same way, number
//     literals kept); V3/V3.1 arguments are the model's JSON text, trimmed
//     (re-serialized the same way only when Options.Coerce applies a schema).
//   - The "\n\n" before <｜DSML｜tool_calls> is envelope, not content or
//     reasoning (reference parser); vLLM keeps it in the reasoning when the
//     block starts inside the reasoning.
//   - Text after a tool-call block is kept as content (vLLM drops it), with
//     an ErrTextAfterToolCalls diagnostic; blank text there is dropped.
//   - A block whose calls all fail is content byte for byte, markers
//     included (vLLM); once a call of the block succeeded, a failing call's
//     text is content without the block envelope (SGLang).
//   - Reasoning without </think> stays reasoning (vLLM, SGLang), with an
//     ErrMissingThinkEnd diagnostic; the reference parser rejects it.
//   - <｜end▁of▁sentence｜> is dropped wherever it appears outside a value.
//
// The package is a leaf: it imports only the standard library. Token ids do
// not appear here; the caller detokenizes with special tokens kept (</think>
// is token 128822 and ｜DSML｜ token 128825 in the V4 vocabulary; a
// detokenizer that skips special tokens would delete them).
package parse
