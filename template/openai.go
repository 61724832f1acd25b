package template

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"unicode"
)

// ChatRequest is the part of an OpenAI chat-completions request body that
// shapes the prompt.
type ChatRequest struct {
	// Messages in request order.
	Messages []Message
	// Tools are the request's top-level tools.
	Tools []Tool
	// Thinking is chat_template_kwargs.thinking (or .enable_thinking);
	// false (chat mode) when absent.
	Thinking bool
	// ReasoningEffort is the normalized reasoning_effort ("", "high" or
	// "max"); see ParseChatRequest.
	ReasoningEffort string
	// NoGenerationPrompt is the request's add_generation_prompt: false (a
	// vLLM and SGLang extension, default true, so that the zero value
	// opens an assistant turn as before): set, the prompt ends without an
	// assistant-turn opening. Every renderer reads it (the native ones
	// through Ending).
	NoGenerationPrompt bool
	// ContinueFinalMessage is the request's continue_final_message (vLLM;
	// default false): the last message, an assistant message, is left
	// open so that generation continues it. It implies
	// NoGenerationPrompt (ParseChatRequest refuses it together with an
	// explicit add_generation_prompt true; Ending lets it win).
	ContinueFinalMessage bool
	// TemplateKwargs is chat_template_kwargs, passed to Jinja templates
	// as variables.
	TemplateKwargs map[string]json.RawMessage
	// RawMessages and RawTools keep the request's JSON (key order and
	// unknown fields) for Jinja templates.
	RawMessages json.RawMessage
	RawTools    json.RawMessage
}

// MaxRequestBytes bounds a request body accepted by ParseChatRequest.
const MaxRequestBytes = 64 << 20

// ParseChatRequest reads an OpenAI chat-completions request body.
//
// Mapping (as vLLM and SGLang do for DeepSeek's encoders): messages must
// be a non-empty array (OpenAI's API refuses [], as dsv4.Engine does);
// chat_template_kwargs.thinking, or when absent .enable_thinking, selects
// thinking mode when truthy (Truthy: Jinja's and Python's test, as
// apply_chat_template's kwargs are read by the template);
// reasoning_effort (top level, else chat_template_kwargs.reasoning_effort)
// is normalized: "max" and "xhigh" give "max", "high" stays, "medium",
// "low", "minimal", "none" and "" give "" (DeepSeek's encoder renders
// "high" and none alike); other values are ErrInvalidRequest.
// add_generation_prompt (default true) and continue_final_message (default
// false) set NoGenerationPrompt and ContinueFinalMessage; both true, or
// continue_final_message with a last message that is not an assistant
// message, is ErrInvalidRequest (continue_final_message alone implies
// add_generation_prompt false). Fields that
// do not shape the prompt (model, sampling parameters, ...) are ignored.
func ParseChatRequest(body []byte) (*ChatRequest, error) {
	if len(body) > MaxRequestBytes {
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrLimit, MaxRequestBytes)
	}
	var raw struct {
		Messages             json.RawMessage            `json:"messages"`
		Tools                json.RawMessage            `json:"tools"`
		ReasoningEffort      *string                    `json:"reasoning_effort"`
		AddGenerationPrompt  *bool                      `json:"add_generation_prompt"`
		ContinueFinalMessage *bool                      `json:"continue_final_message"`
		ChatTemplateKwargs   map[string]json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	req := &ChatRequest{TemplateKwargs: raw.ChatTemplateKwargs,
		RawMessages: raw.Messages}
	if len(bytes.TrimSpace(raw.Messages)) == 0 || bytes.Equal(bytes.TrimSpace(raw.Messages), []byte("null")) {
		return nil, fmt.Errorf("%w: messages is required", ErrInvalidRequest)
	}
	if err := json.Unmarshal(raw.Messages, &req.Messages); err != nil {
		return nil, fmt.Errorf("%w: messages: %v", ErrInvalidRequest, err)
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: messages must not be empty", ErrInvalidRequest)
	}
	if t := bytes.TrimSpace(raw.Tools); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &req.Tools); err != nil {
			return nil, fmt.Errorf("%w: tools: %v", ErrInvalidRequest, err)
		}
		for i, tool := range req.Tools {
			if len(bytes.TrimSpace(tool.Function)) == 0 || tool.Function[0] != '{' {
				return nil, fmt.Errorf("%w: tools[%d] has no function object", ErrInvalidRequest, i)
			}
		}
		if len(req.Tools) > 0 {
			req.RawTools = t
		}
	}
	if raw.ContinueFinalMessage != nil && *raw.ContinueFinalMessage {
		if raw.AddGenerationPrompt != nil && *raw.AddGenerationPrompt {
			return nil, fmt.Errorf("%w: cannot set both continue_final_message and add_generation_prompt to true", ErrInvalidRequest)
		}
		if last := req.Messages[len(req.Messages)-1]; last.Role != "assistant" {
			return nil, fmt.Errorf("%w: continue_final_message needs the last message to be an assistant message, got role %q", ErrInvalidRequest, last.Role)
		}
		req.ContinueFinalMessage = true
		req.NoGenerationPrompt = true // add_generation_prompt absent: implied false
	}
	if raw.AddGenerationPrompt != nil && !req.ContinueFinalMessage {
		req.NoGenerationPrompt = !*raw.AddGenerationPrompt
	}
	for _, k := range []string{"thinking", "enable_thinking"} {
		if v, ok := raw.ChatTemplateKwargs[k]; ok {
			var x any
			if err := json.Unmarshal(v, &x); err != nil {
				return nil, fmt.Errorf("%w: chat_template_kwargs.%s: %v", ErrInvalidRequest, k, err)
			}
			req.Thinking = Truthy(x)
			break
		}
	}
	effort := ""
	if raw.ReasoningEffort != nil {
		effort = *raw.ReasoningEffort
	} else if v, ok := raw.ChatTemplateKwargs["reasoning_effort"]; ok {
		if err := json.Unmarshal(v, &effort); err != nil {
			return nil, fmt.Errorf("%w: chat_template_kwargs.reasoning_effort must be a string", ErrInvalidRequest)
		}
	}
	var err error
	if req.ReasoningEffort, err = NormalizeReasoningEffort(effort); err != nil {
		return nil, err
	}
	return req, nil
}

// Ending is the native encoders' Ending for the request:
// EndContinueFinal when ContinueFinalMessage is set, else
// EndNoGenerationPrompt when NoGenerationPrompt is set, else
// EndGenerationPrompt.
func (r *ChatRequest) Ending() Ending {
	switch {
	case r.ContinueFinalMessage:
		return EndContinueFinal
	case r.NoGenerationPrompt:
		return EndNoGenerationPrompt
	}
	return EndGenerationPrompt
}

// Truthy is Jinja's (and Python's bool()) truth value of a JSON value as
// encoding/json decodes it into an any: false for null, false, 0, "", []
// and {}; true for true, any other number, a non-empty string (so "false"
// and "no" are true, as `{% if thinking %}` sees them), array or object.
// Boolean chat_template_kwargs switches (thinking, enable_thinking) are
// read with it, as transformers' apply_chat_template hands kwargs to the
// template unchanged.
func Truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	case float64:
		return t != 0
	case json.Number:
		f, err := t.Float64()
		return err != nil || f != 0
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	case json.RawMessage:
		var x any
		if json.Unmarshal(t, &x) != nil {
			return len(bytes.TrimSpace(t)) > 0
		}
		return Truthy(x)
	}
	// Go values set by callers: numbers, slices, maps of other types.
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return r.Uint() != 0
	case reflect.Float32, reflect.Float64:
		return r.Float() != 0
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return r.Len() > 0
	case reflect.Bool:
		return r.Bool()
	case reflect.Pointer, reflect.Interface:
		if r.IsNil() {
			return false
		}
		return Truthy(r.Elem().Interface())
	}
	return pyTruthy(v)
}

// NormalizeReasoningEffort maps an OpenAI reasoning_effort onto DeepSeek's
// ("", "high" or "max"); see ParseChatRequest. Errors: ErrInvalidRequest.
func NormalizeReasoningEffort(e string) (string, error) {
	switch strings.ToLower(e) {
	case "max", "xhigh":
		return "max", nil
	case "high":
		return "high", nil
	case "", "medium", "low", "minimal", "none":
		return "", nil
	}
	return "", fmt.Errorf("%w: reasoning_effort %q", ErrInvalidRequest, e)
}

// EncoderMessages returns the messages as DeepSeek's encoders receive them
// from an OpenAI request: the top-level tools attach to the first message
// when it is a system message; otherwise a system message with empty
// content and the tools is inserted first (request tools replace any
// tools of that system message). The request is not modified.
func (r *ChatRequest) EncoderMessages() []Message {
	msgs := append([]Message(nil), r.Messages...)
	if len(r.Tools) == 0 {
		return msgs
	}
	if len(msgs) > 0 && msgs[0].Role == "system" {
		msgs[0].Tools = r.Tools // replaces message-level tools, as vLLM does
		return msgs
	}
	return append([]Message{{Role: "system", Tools: r.Tools}}, msgs...)
}

// Renderer turns a chat request into prompt text. LoadRenderer picks one
// for a model directory; the engine calls Render for every request.
type Renderer interface {
	// Render returns the prompt text for req. Errors wrap this package's
	// sentinels.
	Render(ctx context.Context, req *ChatRequest) (string, error)
}

// V4Renderer renders with EncodeV4. Opts.Thinking, Opts.ReasoningEffort
// and Opts.Ending are taken from each request (Ending from
// NoGenerationPrompt and ContinueFinalMessage: req.Ending()).
type V4Renderer struct{ Opts Options }

// Render implements Renderer.
func (v *V4Renderer) Render(ctx context.Context, req *ChatRequest) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	o := v.Opts
	o.Thinking, o.ReasoningEffort, o.Ending = req.Thinking, req.ReasoningEffort, req.Ending()
	return EncodeV4(req.EncoderMessages(), &o)
}

// V32Renderer renders with EncodeV32 (reasoning effort is ignored; Ending
// as V4Renderer).
type V32Renderer struct{ Opts Options }

// Render implements Renderer.
func (v *V32Renderer) Render(ctx context.Context, req *ChatRequest) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	o := v.Opts
	o.Thinking, o.ReasoningEffort, o.Ending = req.Thinking, "", req.Ending()
	return EncodeV32(req.EncoderMessages(), &o)
}

// JinjaRenderer renders with a HF chat template: messages and tools as
// sent, add_generation_prompt, the tokenizer's special tokens, and
// chat_template_kwargs as variables.
type JinjaRenderer struct {
	Template      *Jinja
	SpecialTokens map[string]string
}

// Render implements Renderer.
func (j *JinjaRenderer) Render(ctx context.Context, req *ChatRequest) (string, error) {
	msgs := req.RawMessages
	if msgs == nil {
		var err error
		if msgs, err = json.Marshal(req.Messages); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	tools := req.RawTools
	if tools == nil && len(req.Tools) > 0 {
		var err error
		if tools, err = json.Marshal(req.Tools); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	out, err := j.Template.RenderChat(ctx, &JinjaInput{
		Messages:            msgs,
		Tools:               tools,
		AddGenerationPrompt: !req.NoGenerationPrompt && !req.ContinueFinalMessage,
		SpecialTokens:       j.SpecialTokens,
		Kwargs:              req.TemplateKwargs,
	})
	if err != nil || !req.ContinueFinalMessage {
		return out, err
	}
	if len(req.Messages) == 0 {
		return "", fmt.Errorf("%w: continue_final_message needs a final message", ErrInvalidRequest)
	}
	return continueFinal(out, &req.Messages[len(req.Messages)-1])
}

// continueFinal cuts a rendered chat after the final message's text, as
// transformers' apply_chat_template(continue_final_message=True) does:
// the text (a string content, or the last text part) must appear in the
// output, stripped of surrounding whitespace; the output ends at its last
// occurrence, with the message's trailing whitespace when the template
// kept it.
func continueFinal(rendered string, m *Message) (string, error) {
	final := m.Content
	if m.ContentParts != nil {
		found := false
		for i := len(m.ContentParts) - 1; i >= 0; i-- {
			if p := m.ContentParts[i]; p.Type == "text" {
				final, found = p.Text, true
				break
			}
		}
		if !found {
			return "", fmt.Errorf("%w: continue_final_message is set but the final message has no text to continue", ErrInvalidRequest)
		}
	}
	stripped := strings.TrimSpace(final)
	loc := strings.LastIndex(rendered, stripped)
	if loc < 0 {
		return "", fmt.Errorf("%w: continue_final_message is set but the final message does not appear in the chat after applying the chat template", ErrInvalidRequest)
	}
	if lead := strings.TrimLeftFunc(final, unicode.IsSpace); strings.HasPrefix(rendered[loc:], lead) && rendered[loc:loc+len(lead)] == final {
		return rendered[:loc+len(lead)], nil
	}
	return rendered[:loc+len(stripped)], nil
}

// LoadRenderer picks the prompt renderer of a model directory: config.json
// model_type "deepseek_v4" selects the native V4 encoder, "deepseek_v32"
// the native V3.2 encoder; any other model uses the chat_template of
// tokenizer_config.json (or a chat_template.jinja file) through Jinja.
// Errors: file errors, ErrSyntax, or ErrInvalidRequest when the directory
// has no template.
func LoadRenderer(dir string) (Renderer, error) {
	var cfg struct {
		ModelType string `json:"model_type"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("template: %s: %w", filepath.Join(dir, "config.json"), err)
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	switch cfg.ModelType {
	case "deepseek_v4":
		return &V4Renderer{}, nil
	case "deepseek_v32":
		return &V32Renderer{}, nil
	}
	src, tokens, err := readChatTemplate(dir)
	if err != nil {
		return nil, err
	}
	t, err := ParseJinja(src, nil)
	if err != nil {
		return nil, err
	}
	return &JinjaRenderer{Template: t, SpecialTokens: tokens}, nil
}

// readChatTemplate reads the chat template and special tokens of a HF
// tokenizer directory.
func readChatTemplate(dir string) (string, map[string]string, error) {
	tokens := map[string]string{}
	var cfg map[string]json.RawMessage
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return "", nil, err
	}
	if err == nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return "", nil, fmt.Errorf("template: %s: %w", path, err)
		}
	}
	for _, name := range []string{"bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token"} {
		raw, ok := cfg[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			tokens[name] = s
			continue
		}
		var obj struct {
			Content *string `json:"content"`
		}
		if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
			tokens[name] = *obj.Content
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		return string(b), tokens, nil
	}
	if raw, ok := cfg["chat_template"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s, tokens, nil
		}
		// A list of named templates: use "default".
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(raw, &named); err == nil {
			for _, n := range named {
				if n.Name == "default" {
					return n.Template, tokens, nil
				}
			}
		}
	}
	return "", nil, fmt.Errorf("%w: %s has no chat template", ErrInvalidRequest, dir)
}
