package parse

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Options errors are returned by [NewStream] and [Parse];
// the others are wrapped by the [Diagnostic] values a parse records about
// malformed model output (the text itself is never dropped).
var (
	// ErrUnknownParser: Options.Reasoning or Options.Tools names no parser.
	ErrUnknownParser = errors.New("parse: unknown parser name")
	// ErrBadToolsDecl: Options.ToolsDecl holds a schema that is not JSON.
	ErrBadToolsDecl = errors.New("parse: invalid tool declaration")

	// ErrMissingThinkEnd: in thinking mode the reasoning was not closed by
	// </think> (output truncated, or a tool block started inside the
	// reasoning, which then ends there).
	ErrMissingThinkEnd = errors.New("parse: reasoning not terminated by </think>")
	// ErrMalformedToolCall: text inside a tool-call block that does not follow
	// the grammar (bad invoke or parameter header, stray text); kept as content.
	ErrMalformedToolCall = errors.New("parse: malformed tool call")
	// ErrUnterminatedToolCall: the output ended inside a tool-call block,
	// invoke or parameter.
	ErrUnterminatedToolCall = errors.New("parse: unterminated tool call")
	// ErrInvalidArguments: a string="false" value or a V3 arguments body is
	// not valid JSON.
	ErrInvalidArguments = errors.New("parse: invalid tool-call arguments")
	// ErrUnknownTool: a call names a tool absent from Options.ToolsDecl; the
	// call is kept as content.
	ErrUnknownTool = errors.New("parse: call to an undeclared tool")
	// ErrDuplicateParameter: a DSML invoke repeats a parameter name; the
	// repetition is kept as content.
	ErrDuplicateParameter = errors.New("parse: duplicate parameter")
	// ErrStrayMarker: a format marker (</think>, ｜DSML｜, ...) appeared where
	// it has no meaning; it is kept as content.
	ErrStrayMarker = errors.New("parse: stray marker in content")
	// ErrTextAfterToolCalls: non-blank text after a tool-call block (the
	// formats end the turn there); kept as content.
	ErrTextAfterToolCalls = errors.New("parse: text after tool calls")
	// ErrSchemaMismatch: with Options.Coerce, a value could not be made to
	// fit the declared JSON-schema type; it is kept as given.
	ErrSchemaMismatch = errors.New("parse: value does not match the tool schema")
	// ErrTooLarge: the input passed Options.MaxBytes; the rest is content.
	ErrTooLarge = errors.New("parse: input larger than Options.MaxBytes")
)

// Diagnostic reports one problem found in the model output. Err is one of
// the sentinel errors above (errors.Is works on a Diagnostic); Offset is the
// byte offset in the raw completion text where it was detected.
type Diagnostic struct {
	Err    error
	Offset int
	Detail string
}

// Error implements error.
func (d Diagnostic) Error() string {
	if d.Detail == "" {
		return fmt.Sprintf("%v (at byte %d)", d.Err, d.Offset)
	}
	return fmt.Sprintf("%v (at byte %d): %s", d.Err, d.Offset, d.Detail)
}

// Unwrap returns the sentinel error.
func (d Diagnostic) Unwrap() error { return d.Err }

// Tool declares one tool of the request, for the unknown-tool check and for
// schema coercion.
type Tool struct {
	// Name is the function name.
	Name string `json:"name"`
	// Parameters is the JSON Schema of the arguments object (may be empty).
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ToolsFromOpenAI reads the OpenAI "tools" array of a chat request
// ([{"type":"function","function":{"name":…,"parameters":{…}}}]); bare
// function objects ({"name":…,"parameters":…}) are accepted too.
// Errors wrap ErrBadToolsDecl.
func ToolsFromOpenAI(data []byte) ([]Tool, error) {
	var raw []struct {
		Type     string          `json:"type"`
		Function *Tool           `json:"function"`
		Name     string          `json:"name"`
		Params   json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToolsDecl, err)
	}
	out := make([]Tool, 0, len(raw))
	for i, r := range raw {
		switch {
		case r.Function != nil:
			out = append(out, *r.Function)
		case r.Name != "":
			out = append(out, Tool{Name: r.Name, Parameters: r.Params})
		default:
			return nil, fmt.Errorf("%w: tool %d has no name", ErrBadToolsDecl, i)
		}
	}
	return out, nil
}

// DefaultMaxBytes is the input size limit used when Options.MaxBytes is 0.
const DefaultMaxBytes = 32 << 20

// Options selects the parsers and their behaviour.
type Options struct {
	// Reasoning names the reasoning parser: "" (none: all text is content),
	// "deepseek-v4", "deepseek-v3" (V3.1/V3.2) or "deepseek-r1".
	Reasoning string
	// Tools names the tool-call parser: "" (none), "deepseek-v4",
	// "deepseekv32", "deepseekv31" or "deepseekv3".
	Tools string
	// Thinking says the prompt ended with <think> (thinking mode), so the
	// completion starts inside the reasoning. Without it (chat mode, the
	// prompt ended with </think>) the v4 and v3 reasoning parsers treat all
	// text as content. The r1 parser always starts inside the reasoning.
	Thinking bool
	// ToolsDecl lists the request's tools. When non-empty, calls to other
	// names are kept as content with an ErrUnknownTool diagnostic.
	ToolsDecl []Tool
	// Coerce converts argument values to the types of the tool's JSON
	// schema (ToolsDecl): string="true" values that should be numbers,
	// booleans, null, objects or arrays; non-string JSON where a string is
	// declared; whole floats for integer/number; a lone "arguments"/"input"
	// parameter wrapping the real object.
	Coerce bool
	// NewID returns the id of the index-th tool call of the completion
	// (0-based). Nil means "call_" + 24 random hex digits.
	NewID func(index int) string
	// MaxBytes caps the input; past it the text is content and an
	// ErrTooLarge diagnostic is recorded. 0 means DefaultMaxBytes.
	MaxBytes int
	// StreamCalls emits each tool call as it is parsed, as vLLM's
	// streaming DeepSeek parsers do: its header delta (index, id, name)
	// when its invoke's name is read, then argument fragments (a string
	// value as its text arrives, other values when complete), instead of
	// holding the whole tool-call block until it closes. For well-formed
	// output the merged stream still equals Parse. What was emitted is
	// never taken back: when a block turns out not to be tool calls after
	// a call was emitted (cut by the end of the input, or an invoke found
	// malformed after its header), the call stays with the arguments
	// emitted so far (not always a complete JSON object) and the text
	// that Parse makes content is content as well, so the merged stream
	// differs from Parse there. Parse itself never streams calls.
	StreamCalls bool
}

// Message is the parsed assistant message.
type Message struct {
	// ReasoningContent is the text of the reasoning (thinking) part.
	ReasoningContent string `json:"reasoning_content"`
	// Content is the visible answer (text outside reasoning and tool calls).
	Content string `json:"content"`
	// ToolCalls lists the calls in output order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Diagnostics lists the problems found; nil for well-formed output.
	Diagnostics []Diagnostic `json:"-"`
}

// Err joins the diagnostics into one error (nil when there are none).
func (m Message) Err() error {
	if len(m.Diagnostics) == 0 {
		return nil
	}
	errs := make([]error, len(m.Diagnostics))
	for i, d := range m.Diagnostics {
		errs[i] = d
	}
	return errors.Join(errs...)
}

// ToolCall is one OpenAI tool call.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a tool call. Arguments is a JSON
// object text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Delta is one streaming increment in the shape of an OpenAI
// chat.completion.chunk choice delta. A Delta from this package carries
// exactly one of its fields.
type Delta struct {
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Content          string          `json:"content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is one tool-call increment. The first one of a call carries
// Index, ID, Type and Function.Name (Arguments ""); later ones carry Index
// and an Arguments fragment to append.
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
}

// FunctionDelta is the function part of a ToolCallDelta.
type FunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Merge folds deltas into a message the way an OpenAI client does:
// texts concatenate, tool calls collect by index (id, type and name from the
// first delta that has them, arguments appended). Diagnostics stay nil.
func Merge(deltas []Delta) Message {
	var m Message
	var rb, cb strings.Builder
	var args []strings.Builder
	for _, d := range deltas {
		rb.WriteString(d.ReasoningContent)
		cb.WriteString(d.Content)
		for _, tc := range d.ToolCalls {
			if tc.Index < 0 || tc.Index > 1<<20 {
				continue
			}
			for len(m.ToolCalls) <= tc.Index {
				m.ToolCalls = append(m.ToolCalls, ToolCall{})
				args = append(args, strings.Builder{})
			}
			c := &m.ToolCalls[tc.Index]
			if tc.ID != "" && c.ID == "" {
				c.ID = tc.ID
			}
			if tc.Type != "" && c.Type == "" {
				c.Type = tc.Type
			}
			if tc.Function.Name != "" && c.Function.Name == "" {
				c.Function.Name = tc.Function.Name
			}
			args[tc.Index].WriteString(tc.Function.Arguments)
		}
	}
	m.ReasoningContent = rb.String()
	m.Content = cb.String()
	for i := range m.ToolCalls {
		m.ToolCalls[i].Function.Arguments = args[i].String()
	}
	return m
}

// normName folds a parser name: lower case, '-', '_', '.' and spaces removed.
func normName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch r {
		case '-', '_', '.', ' ':
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// reasoning parser kinds
type reasonKind int

const (
	reasonNone reasonKind = iota
	reasonV3              // deepseek-v3 / v3.1 / v3.2 / v4: thinking iff Options.Thinking
	reasonR1              // always starts inside the reasoning
)

// tool parser kinds
type toolKind int

const (
	toolNone toolKind = iota
	toolV4            // DSML tool_calls
	toolV32           // DSML function_calls
	toolV31           // <｜tool▁calls▁begin｜> name<｜tool▁sep｜>args
	toolV3            // <｜tool▁calls▁begin｜> function<｜tool▁sep｜>name ```json args```
)

func reasoningKind(name string) (reasonKind, error) {
	switch normName(name) {
	case "":
		return reasonNone, nil
	case "deepseekv4", "deepseekv3", "deepseekv31", "deepseekv32":
		return reasonV3, nil
	case "deepseekr1":
		return reasonR1, nil
	}
	return 0, fmt.Errorf("%w: reasoning parser %q", ErrUnknownParser, name)
}

func toolsKind(name string) (toolKind, error) {
	switch normName(name) {
	case "":
		return toolNone, nil
	case "deepseekv4":
		return toolV4, nil
	case "deepseekv32":
		return toolV32, nil
	case "deepseekv31":
		return toolV31, nil
	case "deepseekv3", "deepseekr1":
		return toolV3, nil
	}
	return 0, fmt.Errorf("%w: tool parser %q", ErrUnknownParser, name)
}

// ParserNames lists the canonical parser names accepted in Options
// (reasoning names first, then tool names).
func ParserNames() (reasoning, tools []string) {
	return []string{"deepseek-v4", "deepseek-v3", "deepseek-r1"},
		[]string{"deepseek-v4", "deepseekv32", "deepseekv31", "deepseekv3"}
}

func randomID(int) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
