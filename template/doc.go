// Package template renders chat conversations into prompt text, byte for
// byte as the reference implementations do.
//
// DeepSeek-V4 and V3.2 ship Python encoders, not Jinja templates
// (encoding/encoding_dsv4.py, encoding/encoding_dsv32.py); EncodeV4 and
// EncodeV32 are native Go ports of their rules (facts:
// shared/docs/dsv4-formats.md §2-3): BOS, system text with the tools block
// and response format, user turns, tool results merged into user turns as
// <tool_result> blocks ordered by the preceding tool calls (V4) or appended
// as <function_results> (V3.2), assistant turns with reasoning, content and
// DSML tool calls, the developer and latest_reminder roles, quick-
// instruction tasks, wo_eos, thinking versus chat mode with earlier
// reasoning dropped unless tools are declared, and reasoning_effort "max".
// JSON inside prompts (tool schemas, non-string arguments, response
// formats) is printed as Python's json.dumps(ensure_ascii=False) prints it:
// key order kept, ", " and ": " separators, Python float repr, no HTML
// escaping.
//
// ParseChatRequest maps an OpenAI chat-completions body onto the encoders'
// input as vLLM and SGLang do (top-level tools on the first system
// message, chat_template_kwargs.thinking, reasoning_effort); LoadRenderer
// picks the renderer of a model directory.
//
// Other models use their Hugging Face chat template: ParseJinja compiles
// it with github.com/nikolalohinski/gonja/v2, a maintained pure-Go Jinja
// (the project's named dependency; no cgo, no Python). Its defaults differ
// from the environment transformers renders in (sorted dict keys, a
// compact HTML-escaping tojson, missing Python string semantics,
// unbounded loops and recursion); this package closes those gaps through
// gonja's extension points: replaced filters and method sets, extra
// globals, and a pass over the parsed template that adds budget checks and
// routes * and ** through Python-semantics operators.
//
// Every error wraps a sentinel (ErrUnknownRole, ErrInvalidMessage,
// ErrToolResultWithoutCall, ErrInvalidArguments, ErrInvalidOption,
// ErrInvalidRequest, ErrSyntax, ErrRender, ErrUnserializable, ErrLimit);
// nothing panics on bad input, and rendering is bounded in output size,
// loop iterations, recursion depth and time.
//
// Test oracles (tools/gen_template_goldens.py): DeepSeek's own test vectors
// and encoder, and transformers' apply_chat_template.
package template
