package dsv4

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsv4go/dsv4go/parse"
	"github.com/dsv4go/dsv4go/template"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// Chat encodings (EngineOptions.Encoding).
const (
	EncodingV4  = "deepseek-v4"  // DeepSeek-V4 encoding_dsv4 (template.EncodeV4)
	EncodingV32 = "deepseek-v32" // DeepSeek-V3.2 encoding_dsv32 (template.EncodeV32)
)

// tokenizerCodec adapts *tokenizer.Tokenizer to textTokenizer.
type tokenizerCodec struct{ t *tokenizer.Tokenizer }

// Encode fails (tokenizer.ErrRegexTimeout, a server-side fault: HTTP 500)
// only when a regexp2-run Split pattern of a non-DeepSeek tokenizer.json
// exceeds tokenizer.RegexMatchTimeout.
func (c tokenizerCodec) Encode(text string) ([]int32, error) {
	return c.t.EncodeErr(text, tokenizer.EncodeOptions{})
}

func (c tokenizerCodec) NewDecoder() tokenDecoder {
	return streamDecoder{c.t.NewStreamDecoder(tokenizer.DecodeOptions{})}
}

func (c tokenizerCodec) TokenString(id int32) string {
	b, _ := c.t.TokenBytes(id)
	return string(b)
}

func (c tokenizerCodec) IsSpecial(id int32) bool { return c.t.IsSpecial(id) }

type streamDecoder struct{ d *tokenizer.StreamDecoder }

func (d streamDecoder) Add(id int32) string {
	s, err := d.d.Add(id)
	if err != nil {
		return "\ufffd" // an id the tokenizer does not know (vocab padding)
	}
	return s
}

func (d streamDecoder) Flush() string { return d.d.Flush() }

// parseStream adapts *parse.Stream to outputParser.
type parseStream struct{ s *parse.Stream }

func convertDeltas(ds []parse.Delta) []ChatDelta {
	out := make([]ChatDelta, 0, len(ds))
	for _, d := range ds {
		cd := ChatDelta{Content: d.Content, ReasoningContent: d.ReasoningContent}
		for _, tc := range d.ToolCalls {
			cd.ToolCalls = append(cd.ToolCalls, ToolCallDelta{
				Index: tc.Index, ID: tc.ID, Type: tc.Type,
				Function: FunctionCallDelta{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
			})
		}
		out = append(out, cd)
	}
	return out
}

func (p parseStream) Feed(text string) []ChatDelta { return convertDeltas(p.s.Push(text)) }
func (p parseStream) Finish() []ChatDelta          { return convertDeltas(p.s.Close()) }

// plainParser passes all text as content (no parsers configured).
type plainParser struct{}

func (plainParser) Feed(text string) []ChatDelta { return []ChatDelta{{Content: text}} }
func (plainParser) Finish() []ChatDelta          { return nil }

// templateRequest maps an OpenAI request onto the template package's
// (its EncoderMessages attaches the top-level tools to the first system
// message, inserting an empty one when needed, as SGLang does).
func templateRequest(req *ChatRequest, thinking bool, tools []Tool) (*template.ChatRequest, error) {
	eff, err := template.NormalizeReasoningEffort(req.ReasoningEffort)
	if err != nil {
		return nil, &ParamError{Param: "reasoning_effort", Msg: err.Error()}
	}
	t := &template.ChatRequest{
		Messages: req.Messages, Thinking: thinking, ReasoningEffort: eff,
		NoGenerationPrompt: !req.generationPrompt(), ContinueFinalMessage: req.ContinueFinalMessage,
	}
	for i := range tools {
		t.Tools = append(t.Tools, template.Tool{Type: "function", Function: tools[i].Function.JSON()})
	}
	if len(req.ChatTemplateKwargs) > 0 {
		t.TemplateKwargs = map[string]json.RawMessage{}
		for k, v := range req.ChatTemplateKwargs {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, &ParamError{Param: "chat_template_kwargs", Msg: err.Error()}
			}
			t.TemplateKwargs[k] = b
		}
	}
	return t, nil
}

// encoderMessages adds response_format to templateRequest's messages.
func encoderMessages(t *template.ChatRequest, responseFormat []byte) []template.Message {
	msgs := t.EncoderMessages()
	rf := responseFormatSchema(responseFormat)
	if rf == nil {
		return msgs
	}
	if len(msgs) == 0 || msgs[0].Role != "system" {
		msgs = append([]template.Message{{Role: "system"}}, msgs...)
	}
	msgs[0].ResponseFormat = rf
	return msgs
}

// responseFormatSchema returns the JSON schema of a response_format of type
// json_schema (or json_object: an empty object schema); nil for text.
func responseFormatSchema(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil
	}
	switch rf.Type {
	case "json_schema":
		if len(rf.JSONSchema.Schema) > 0 {
			return rf.JSONSchema.Schema
		}
		return []byte(`{"type": "object"}`)
	case "json_object":
		return []byte(`{"type": "object"}`)
	}
	return nil
}

// newTokenizerCodec builds the text side of an Engine from options.
func newTokenizerCodec(o *EngineOptions) (*chatCodec, error) {
	tok := o.Tokenizer
	enc := o.Encoding
	if enc == "" {
		enc = EncodingV4
	}
	var encode func([]template.Message, *template.Options) (string, error)
	block := ""
	switch enc {
	case EncodingV4:
		encode, block = template.EncodeV4, "tool_calls"
	case EncodingV32:
		encode, block = template.EncodeV32, "function_calls"
	default:
		return nil, fmt.Errorf("%w: unknown encoding %q (want %q or %q)", ErrInvalidParams, enc, EncodingV4, EncodingV32)
	}
	rp, tp := o.ReasoningParser, o.ToolCallParser
	if rp == "" {
		rp = "deepseek-v4"
		if enc == EncodingV32 {
			rp = "deepseek-v3"
		}
	}
	if tp == "" {
		tp = "deepseek-v4"
		if enc == EncodingV32 {
			tp = "deepseekv32"
		}
	}
	if rp == "none" {
		rp = ""
	}
	if tp == "none" {
		tp = ""
	}
	// Check the names now, not at the first request.
	if _, err := parse.NewStream(parse.Options{Reasoning: rp, Tools: tp}); err != nil {
		return nil, err
	}
	thinkEnd := int32(-1)
	if id, ok := tok.TokenID("</think>"); ok {
		thinkEnd = id
	}
	c := &chatCodec{
		tok:            tokenizerCodec{tok},
		thinkEnd:       thinkEnd,
		maxPromptBytes: template.DefaultMaxOutputBytes,
	}
	c.render = func(req *ChatRequest, thinking bool, tools []Tool) (string, error) {
		treq, err := templateRequest(req, thinking, tools)
		if err != nil {
			return "", err
		}
		var text string
		if o.Renderer != nil {
			text, err = o.Renderer.Render(context.Background(), treq)
			if err != nil && errors.Is(err, template.ErrLimit) {
				return "", fmt.Errorf("%w: %w", ErrTemplateLimit, err)
			}
		} else {
			text, err = encode(encoderMessages(treq, req.ResponseFormat), &template.Options{
				Thinking: thinking, ReasoningEffort: treq.ReasoningEffort, Ending: treq.Ending(),
			})
		}
		if err != nil {
			if errors.Is(err, template.ErrLimit) {
				return "", fmt.Errorf("%w: %v", ErrContextLength, err)
			}
			return "", &ParamError{Param: "messages", Msg: err.Error()}
		}
		return text, nil
	}
	c.newParser = func(thinking, parseTools, streamCalls bool, tools []Tool) outputParser {
		opts := parse.Options{Reasoning: rp, Thinking: thinking, StreamCalls: streamCalls}
		if parseTools && tp != "" {
			opts.Tools = tp
			for _, t := range tools {
				opts.ToolsDecl = append(opts.ToolsDecl, parse.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
			}
		}
		s, err := parse.NewStream(opts)
		if err != nil {
			return plainParser{}
		}
		return parseStream{s}
	}
	if strings.HasPrefix(tp, "deepseek") && (tp == "deepseek-v4" || tp == "deepseekv4" || tp == "deepseekv32" || tp == "deepseek-v32") {
		dsml := "｜DSML｜"
		c.toolPrefix = func(name string) string {
			s := "\n\n<" + dsml + block + ">\n<" + dsml + `invoke name="`
			if name != "" {
				s += name + "\">\n"
			}
			return s
		}
	}
	return c, nil
}
