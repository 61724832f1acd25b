package dsv4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/dsv4go/dsv4go/template"
)

// ChatRequest is an OpenAI chat-completions request: the fields of OpenAI's
// Chat Completions API reference plus the sampling extensions that SGLang's
// and vLLM's OpenAI-compatible servers accept (top_k, min_p,
// repetition_penalty, stop_token_ids, ignore_eos, chat_template_kwargs,
// ...). It decodes from the request body with encoding/json; unknown fields
// are ignored. Pointer fields distinguish "absent" from zero.
//
// Validation (done by Chat and ChatStream, errors wrap ErrInvalidParams as
// a *ParamError naming the OpenAI field): response_format must be an object
// of type text, json_object or json_schema, its schema within
// JSONSchemaConstraint's subset (structural_tag is refused); tool function names must match OpenAI's
// ^[a-zA-Z0-9_-]{1,64}$ and be unique, and a tool's parameters, when
// present and not null, must be a JSON object (OpenAI's API refuses
// anything else; param tools[i].function.parameters); seed is an integer in
// the int64 range (vLLM's bound); repetition_penalty, when present, must be
// in (0, 10] (vLLM refuses <= 0). As vLLM's request validators: an empty
// tools array, a tool_choice other than "none" without tools, and
// stream_options in a request whose Stream is false are refused (params
// tools, tool_choice, stream_options).
type ChatRequest struct {
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`

	Tools []Tool `json:"tools,omitempty"`
	// ToolChoice: nil means "auto" when Tools are given, else "none". A
	// named function is served as vLLM serves it: the output is
	// constrained to the function's parameters schema (any JSON object
	// without parameters; after </think> in thinking mode) and returned as
	// one call of it, with finish_reason "stop". A schema outside
	// JSONSchemaConstraint's subset is a *ParamError naming
	// tools[i].function.parameters. "required" (one tool or several, as
	// vLLM) is constrained to vLLM's JSON array of {"name", "parameters"}
	// objects (minItems 1, an anyOf over the tools; at most 128 tools), so
	// that one tool may be called several times, and every element is
	// returned as a call, in array order, finish_reason "tool_calls".
	// Where no constraint can apply (an engine without a
	// tokenizer.Tokenizer, a thinking renderer without </think>) the
	// model's tool-call opening is forced instead.
	ToolChoice        *ToolChoice `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool       `json:"parallel_tool_calls,omitempty"`

	// ChatTemplateKwargs: "thinking" or "enable_thinking" selects thinking
	// mode when either is truthy in Jinja's (Python's) sense, as for
	// transformers' apply_chat_template, which hands the kwargs to the
	// template: true, a non-empty string (even "false"), a non-zero number,
	// a non-empty array or object; false, null, 0, "", [] and {} are false
	// (template.Truthy). Other keys pass to the template.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	// ReasoningEffort: "max" or "high" (DeepSeek-V4); OpenAI's "low",
	// "medium", "xhigh" map to high, max (DeepSeek's API convention).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// ResponseFormat is OpenAI's response_format: {"type": "text"},
	// {"type": "json_object"} or {"type": "json_schema", "json_schema":
	// {"name", "schema", "strict"?}}. A JSON one is shown to the model in
	// the prompt (DeepSeek's encoder writes the schema into the system
	// message) and enforced by constrained decoding (OutputConstraint;
	// after </think> in thinking mode). Not enforced when tool_choice is
	// required or names a function: the forced tool call is the output
	// (constrained to the function's schema where ToolChoice says so), as
	// vLLM gives the tool's schema precedence.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`

	// AddGenerationPrompt (vLLM's extension; nil means true) ends the
	// prompt with the opening of a new assistant turn, also after a
	// trailing assistant message (the reply is then a new turn). False
	// renders the conversation without it: the model continues from the
	// last message's end (for a trailing assistant message, after its
	// end-of-sentence token).
	AddGenerationPrompt *bool `json:"add_generation_prompt,omitempty"`
	// ContinueFinalMessage (vLLM's extension) leaves the last message, which
	// must be an assistant message without tool_calls, open: it is
	// rendered without its end-of-sentence token and generation continues
	// it; the reply's content (or reasoning_content) is the continuation
	// only, as vLLM returns it. In thinking mode a final message with
	// reasoning_content and empty content is continued inside its
	// reasoning ("</think>" is not rendered); with content, after
	// "</think>". Setting it together with an explicit
	// add_generation_prompt true is a *ParamError (param
	// continue_final_message), as is a last message from another role;
	// with add_generation_prompt absent it is implied false.
	ContinueFinalMessage bool `json:"continue_final_message,omitempty"`
	// Echo (vLLM's extension) starts each choice's content with the last
	// message's content when that message's role is the response's role
	// (vLLM's get_chat_request_role: "assistant" with add_generation_prompt,
	// else the last message's role), as serving_chat.py does; text parts
	// are joined with "\n". Streamed, it is the first content delta of
	// every choice, after the role delta.
	Echo bool `json:"echo,omitempty"`

	// MaxCompletionTokens (OpenAI's newer name) wins over MaxTokens.
	MaxCompletionTokens *int `json:"max_completion_tokens,omitempty"`
	Logprobs            bool `json:"logprobs,omitempty"`
	TopLogprobs         *int `json:"top_logprobs,omitempty"`
	RequestSampling

	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
}

// RequestSampling holds the sampling fields that chat and completions
// requests share, with their OpenAI (and SGLang / vLLM extension) JSON
// names. Absent fields take the OpenAI defaults (temperature 1, top_p 1).
// RepetitionPenalty is a pointer so that an explicit 0 is told from an
// absent field: vLLM's SamplingParams rejects repetition_penalty <= 0
// ("repetition_penalty must be greater than zero"), and so does Sampling.
type RequestSampling struct {
	MaxTokens         *int               `json:"max_tokens,omitempty"`
	MinTokens         int                `json:"min_tokens,omitempty"`
	Temperature       *float64           `json:"temperature,omitempty"`
	TopP              *float64           `json:"top_p,omitempty"`
	TopK              *int               `json:"top_k,omitempty"`
	MinP              float64            `json:"min_p,omitempty"`
	Seed              *int64             `json:"seed,omitempty"`
	PresencePenalty   float64            `json:"presence_penalty,omitempty"`
	FrequencyPenalty  float64            `json:"frequency_penalty,omitempty"`
	RepetitionPenalty *float64           `json:"repetition_penalty,omitempty"`
	LogitBias         map[string]float64 `json:"logit_bias,omitempty"`
	Stop              StringList         `json:"stop,omitempty"`
	StopTokenIDs      []int32            `json:"stop_token_ids,omitempty"`
	IgnoreEOS         bool               `json:"ignore_eos,omitempty"`
	N                 *int               `json:"n,omitempty"`
	// IncludeStopStrInOutput is vLLM's include_stop_str_in_output extra
	// field (default false): see SamplingParams.IncludeStopStrInOutput.
	IncludeStopStrInOutput bool `json:"include_stop_str_in_output,omitempty"`
	// PromptLogprobs is vLLM's prompt_logprobs extra field: the response
	// carries the prompt tokens' logprobs with that many alternatives each
	// (ChatResponse.PromptLogprobs; for completions, per choice). A
	// *ParamError (param prompt_logprobs, HTTP 400) when negative (vLLM's
	// -1, the whole vocabulary, too), above MaxTopLogprobs (vLLM's
	// max_logprobs check), or above 0 with stream true (vLLM: "not
	// available when stream=True"; 0 is accepted and nothing is streamed).
	PromptLogprobs *int `json:"prompt_logprobs,omitempty"`
	// StructuredOutputs is vLLM's structured_outputs extra field: "json"
	// (a JSON Schema) or "json_object": true constrain the output as
	// response_format json_schema / json_object do, "choice" to exactly
	// one of a list of strings (ChoiceConstraint), "regex" to a full match
	// of a pattern (RegexConstraint); see OutputConstraint. At most one
	// constraint per request, a 400 otherwise, as vLLM. grammar and
	// structural_tag are a *ParamError naming them: not supported.
	StructuredOutputs *StructuredOutputs `json:"structured_outputs,omitempty"`
	// GuidedChoice and GuidedRegex are vLLM's legacy top-level
	// guided_choice and guided_regex (before structured_outputs replaced
	// them): read as structured_outputs choice and regex when
	// structured_outputs is absent (ignored otherwise); errors name them
	// (param guided_choice / guided_regex).
	GuidedChoice []string `json:"guided_choice,omitempty"`
	GuidedRegex  *string  `json:"guided_regex,omitempty"`
}

// StructuredOutputs is vLLM's structured_outputs request field
// (StructuredOutputsParams). JSON, JSONObject, Regex and Choice are
// enforced (one of them per request); Grammar and StructuralTag are
// refused when set. A field counts as set when present, even empty, as
// vLLM counts the fields that are not None: "choice": [] is a 400 (no
// choices), "regex": "" allows only the empty output.
type StructuredOutputs struct {
	JSON       json.RawMessage `json:"json,omitempty"`
	JSONObject *bool           `json:"json_object,omitempty"`
	Regex      *string         `json:"regex,omitempty"`
	Choice     []string        `json:"choice,omitempty"`
	Grammar    *string         `json:"grammar,omitempty"`
	// StructuralTag is refused as response_format's structural_tag is.
	StructuralTag *string `json:"structural_tag,omitempty"`
}

// checkPromptLogprobsStream refuses prompt_logprobs above 0 in a streamed
// request, as vLLM's check_logprobs validators do.
func checkPromptLogprobsStream(k *int, stream bool) error {
	if k != nil && *k > 0 && stream {
		return paramErr("prompt_logprobs", "not available when stream is true")
	}
	return nil
}

// checkStreamOptions refuses stream_options in a request that does not
// stream (stream absent or false), as vLLM's validate_stream_options and
// OpenAI's API do ("Stream options can only be defined when
// `stream=True`"). vLLM tests the field's truthiness, so null and an empty
// object ({}) pass and an object with any member (even
// {"include_usage": false}) is refused; so here (a StreamOptions made in
// Go, not decoded from {}, counts as having members).
func checkStreamOptions(o *StreamOptions, stream bool) error {
	if o != nil && !o.empty && !stream {
		return paramErr("stream_options", "only allowed when stream is true")
	}
	return nil
}

// StreamOptions are OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// ContinuousUsageStats (vLLM's extension; with IncludeUsage) adds the
	// choice's usage so far to every chunk (ChatChunk.RunningUsage).
	ContinuousUsageStats bool `json:"continuous_usage_stats,omitempty"`
	// empty: decoded from a JSON object without members ({}), which
	// vLLM's validate_stream_options lets through without stream.
	empty bool
}

// UnmarshalJSON decodes stream_options as encoding/json does, noting an
// object without members ({}). Errors are encoding/json's.
func (o *StreamOptions) UnmarshalJSON(b []byte) error {
	type plain StreamOptions
	p := plain(*o)
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*o = StreamOptions(p)
	o.empty = bytes.Equal(bytes.Trim(b, " \t\r\n{"), []byte("}")) // {} with any spacing
	return nil
}

// Continuous reports whether every chunk carries usage: include_usage and
// continuous_usage_stats both set, as vLLM requires.
func (o *StreamOptions) Continuous() bool {
	return o != nil && o.IncludeUsage && o.ContinuousUsageStats
}

// Message is one chat message in the OpenAI shape, with DeepSeek's
// encoder extras (reasoning_content, task, wo_eos, developer and
// latest_reminder roles); see template.Message for its JSON forms.
type Message = template.Message

// Tool is an OpenAI tool declaration.
type Tool struct {
	Type     string       `json:"type"`
	Function FunctionDecl `json:"function"`
}

// FunctionDecl declares a function tool. The JSON object as received is
// kept, so the prompt renders its keys in the order the client sent them
// (DeepSeek's encoder prints it with Python's json.dumps).
type FunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	raw         json.RawMessage
}

// UnmarshalJSON decodes the fields and keeps the object's bytes.
func (f *FunctionDecl) UnmarshalJSON(b []byte) error {
	type plain FunctionDecl
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*f = FunctionDecl(p)
	f.raw = append(json.RawMessage(nil), b...)
	return nil
}

// JSON returns the function object as received, or re-encoded when it was
// built in Go.
func (f *FunctionDecl) JSON() json.RawMessage {
	if f.raw != nil {
		return f.raw
	}
	type plain FunctionDecl
	b, _ := json.Marshal(plain(*f))
	return b
}

// ToolCall is a function call in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and its arguments as a JSON object text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolChoice is "none", "auto", "required", or a named function.
type ToolChoice struct {
	Mode     string // "none", "auto", "required", or "function"
	Function string // the function's name when Mode == "function"
}

// UnmarshalJSON accepts a mode string or {"type":"function","function":{"name":...}}.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		switch s {
		case "none", "auto", "required":
			*t = ToolChoice{Mode: s}
			return nil
		}
		return paramErr("tool_choice", `must be "none", "auto", "required" or {"type":"function","function":{"name":...}}, got %q`, s)
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return paramErr("tool_choice", "must be a string or an object, got %s", jsonKind(b))
	}
	if o.Type != "function" || o.Function.Name == "" {
		return paramErr("tool_choice", `an object must be {"type":"function","function":{"name":...}}`)
	}
	*t = ToolChoice{Mode: "function", Function: o.Function.Name}
	return nil
}

// MarshalJSON writes the wire form.
func (t ToolChoice) MarshalJSON() ([]byte, error) {
	if t.Mode == "function" {
		return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": t.Function}})
	}
	return json.Marshal(t.Mode)
}

// StringList decodes from a string or an array of strings (OpenAI "stop").
type StringList []string

// UnmarshalJSON accepts a string, null, or an array of strings.
func (s *StringList) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = StringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		// A type error, so encoding/json adds the field's name ("stop").
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[StringList]()}
	}
	*s = many
	return nil
}

// ChatResponse is the result of a non-streaming Chat.
type ChatResponse struct {
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
	// PromptLogprobs is vLLM's top-level prompt_logprobs, present when the
	// request set prompt_logprobs (not streamed): one entry per prompt
	// token, the first null (see PromptPosition).
	PromptLogprobs []PromptPosition `json:"prompt_logprobs,omitempty"`
}

// ChatChoice is one completion of a chat request.
type ChatChoice struct {
	Index    int           `json:"index"`
	Message  ChatMessage   `json:"message"`
	Logprobs *ChatLogprobs `json:"logprobs"`
	// FinishReason: "stop", "length" or "tool_calls".
	FinishReason string `json:"finish_reason"`
	// MatchedStop (SGLang extension): the stop string or stop token id
	// that ended the output, or nil.
	MatchedStop any `json:"matched_stop"`
	// StopReason (vLLM extension) is what ended the output: nil for the
	// model's EOS token and for "length", the token id (int32) for a
	// stop_token_ids hit, the stop string for a stop-string hit (vLLM V1's
	// check_stop and stop-string check).
	StopReason any `json:"stop_reason"`
}

// ChatMessage is the assistant's parsed reply. Content is nil (JSON null)
// when the reply is only tool calls or only reasoning (see
// ChatAccumulator.Response); check it before dereferencing.
type ChatMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ChatLogprobs is OpenAI's choice.logprobs for chat.
type ChatLogprobs struct {
	Content []LogprobEntry `json:"content"`
}

// LogprobEntry is one token's log-probability with its alternatives.
type LogprobEntry struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative token.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// PromptPosition is one entry of vLLM's prompt_logprobs (chat: top level
// of the response; completions: per choice): the distribution at one
// prompt position, as the JSON object vLLM serves (a dict keyed by token
// id strings, in vLLM's order): first the prompt token there, then the
// prompt_logprobs most likely tokens by rank; a token among both stands
// once, first, with its top-k rank (vLLM's dict keeps the first key's
// place and the later value). A nil PromptPosition is JSON null: the
// first prompt token's entry. Logprobs are natural logs of the raw
// distribution (float64 log-softmax, as PromptLogprob), -Inf sent as
// -9999 as vLLM's clamp_prompt_logprobs does.
//
//	[null, {"791": {"logprob": -2.1, "rank": 3, "decoded_token": " the"},
//	        "264": {"logprob": -0.9, "rank": 1, "decoded_token": " a"}}, ...]
type PromptPosition []RankedLogprob

// RankedLogprob is one token of a PromptPosition: vLLM's Logprob.
type RankedLogprob struct {
	ID           int32   `json:"-"` // the key of the JSON object
	Logprob      float32 `json:"logprob"`
	Rank         int     `json:"rank"`          // 1: the most likely (PromptLogprob.Rank)
	DecodedToken string  `json:"decoded_token"` // the token's text
}

// MarshalJSON writes the object keyed by token id, in order (nil: null).
func (p PromptPosition) MarshalJSON() ([]byte, error) {
	if p == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, e := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(e.ID), 10)
		b = append(b, '"', ':')
		v, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes, keeping the keys' order.
func (p *PromptPosition) UnmarshalJSON(b []byte) error {
	*p = nil
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("prompt logprobs position: want an object or null, got %s", jsonKind(b))
	}
	out := PromptPosition{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return err
		}
		id, err := strconv.ParseInt(t.(string), 10, 32)
		if err != nil {
			return fmt.Errorf("prompt logprobs position: key %q is not a token id", t)
		}
		e := RankedLogprob{ID: int32(id)}
		if err := d.Decode(&e); err != nil {
			return err
		}
		out = append(out, e)
	}
	*p = out
	return nil
}

// Usage counts tokens; completion tokens include reasoning tokens and, with
// n > 1, all choices.
type Usage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	CompletionTokensDetails *CompletionTokensDetail `json:"completion_tokens_details,omitempty"`
	// PromptTokensDetails is set when some prompt tokens were restored from
	// the engine's prefix cache (EngineOptions.PrefixCacheBytes) instead of
	// prefilled; nil otherwise, as vLLM leaves it out when cached_tokens
	// would be 0.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks prompt tokens down (OpenAI's
// usage.prompt_tokens_details).
type PromptTokensDetails struct {
	// CachedTokens is the number of prompt tokens restored from the prefix
	// cache: per prompt, the longest cached prefix any of its choices
	// restored (each prompt counts once, as in PromptTokens), summed over
	// the prompts of a request.
	CachedTokens int `json:"cached_tokens"`
}

// CompletionTokensDetail breaks completion tokens down.
type CompletionTokensDetail struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// ChatChunk is one streamed event of ChatStream: a delta of choice Index,
// the choice's FinishReason on its last chunk, or (Usage != nil, Index -1)
// the usage after every choice finished. As in vLLM's streams (each engine
// step one chunk), the last chunk of a choice also carries its last
// token's delta and Logprobs: for a choice ending on EOS, that token's
// logprobs with no text.
type ChatChunk struct {
	Index        int
	Delta        ChatDelta
	Logprobs     *ChatLogprobs
	FinishReason string
	MatchedStop  any
	// StopReason is ChatChoice.StopReason, on the chunk that carries
	// FinishReason.
	StopReason any
	Usage      *Usage
	// RunningUsage, on every chunk of a choice, is that choice's usage so
	// far: its prompt's tokens and the tokens it generated up to and
	// including this chunk's (vLLM's stream_options.continuous_usage_stats
	// numbers; no details). Nil on the final Usage chunk.
	RunningUsage *Usage
	// PromptLogprobs (request prompt_logprobs; completions also echo with
	// logprobs) ride on one chunk of the choice, before its first token's,
	// or with a completion's echoed prompt (Delta.Content) when echoed: one
	// PromptPosition per prompt token, the first nil. PromptTokens holds
	// the prompt tokens' texts (as LogprobEntry.Token), for the echoed
	// logprobs (LegacyPromptLogprobs). Chat gives them on choice 0 only.
	PromptLogprobs []PromptPosition
	PromptTokens   []string
}

// ChatDelta is OpenAI's streaming delta.
type ChatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          string          `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// MarshalJSON writes the fields d sets; a role delta without text (a
// stream's first chunk) also carries "content": "", as vLLM's first chunk
// (DeltaMessage(role=role, content="")) and OpenAI's API send it, so that
// a client reading delta.content finds a string there.
func (d ChatDelta) MarshalJSON() ([]byte, error) {
	type fields ChatDelta // the struct tags, without this method
	if d.Role == "" || d.Content != "" {
		return json.Marshal(fields(d))
	}
	return json.Marshal(struct {
		Role             string          `json:"role"`
		Content          string          `json:"content"`
		ReasoningContent string          `json:"reasoning_content,omitempty"`
		ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
	}{d.Role, "", d.ReasoningContent, d.ToolCalls})
}

// Empty reports whether d carries nothing (true for a nil d).
func (d *ChatDelta) Empty() bool {
	if d == nil {
		return true
	}
	return d.Role == "" && d.Content == "" && d.ReasoningContent == "" && len(d.ToolCalls) == 0
}

// ToolCallDelta is a streamed fragment of a tool call: the first for a call
// has ID, Type and Name; later ones only Arguments fragments.
type ToolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function FunctionCallDelta `json:"function"`
}

// FunctionCallDelta is a fragment of a function call.
type FunctionCallDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// jsonKind names the kind of JSON value b holds, as encoding/json's type
// errors do ("number", "object", "array of numbers" is just "array").
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "empty value"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}
