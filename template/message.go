package template

import (
	"bytes"
	"encoding/json"
)

// Message is one chat message in the OpenAI chat-completions shape, with
// the extras DeepSeek's encoders read (reasoning_content, task, wo_eos,
// message-level tools and response_format, the developer and
// latest_reminder roles).
//
// JSON: "content" may be a string, null, or an array of content parts;
// "reasoning" is accepted as an alias of "reasoning_content" (vLLM's
// spelling); tool_calls[].function.arguments may be a JSON string or an
// object.
type Message struct {
	// Role: system, user, assistant, tool, developer or latest_reminder.
	Role string
	// Content is the text content ("" when absent or null).
	Content string
	// ContentParts holds the content when it was given as an array of
	// parts (then Content is ""). Text parts are joined with "\n\n"; the
	// native encoders reject other part types (the models read text only),
	// except in tool messages, which render them as "[Unsupported TYPE]" as
	// DeepSeek's V4 encoder does.
	ContentParts []ContentPart
	// ReasoningContent is an assistant turn's reasoning (thinking) text.
	ReasoningContent string
	// ToolCalls are an assistant turn's tool calls.
	ToolCalls []ToolCall
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string
	// Name is the optional participant or tool name (not rendered by the
	// DeepSeek encoders; passed to Jinja templates).
	Name string
	// Tools declared on this message (system or developer), in the OpenAI
	// {"type":"function","function":{...}} shape.
	Tools []Tool
	// ResponseFormat is a JSON schema object the reply must follow
	// (system or developer); rendered verbatim, key order kept.
	ResponseFormat json.RawMessage
	// Task is a DeepSeek-V4 quick-instruction task: action, query,
	// authority, domain, title or read_url ("" for none).
	Task string
	// WoEOS omits the end-of-sentence token after an assistant turn
	// (prefill continuation).
	WoEOS bool
}

// ContentPart is one element of an array-valued content.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// Tool is a tool declaration. Function is the JSON object with name,
// description and parameters; its bytes are parsed with key order kept
// and printed as Python's json.dumps prints them.
type Tool struct {
	Type     string          `json:"type"`
	Function json.RawMessage `json:"function"`
}

// ToolCall is one call made by an assistant turn.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as JSON text
// (a JSON object, as OpenAI sends it).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON accepts arguments given as a JSON string (OpenAI) or as a
// JSON object (some clients); an object is kept as its JSON text.
func (f *FunctionCall) UnmarshalJSON(data []byte) error {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	f.Name = raw.Name
	a := bytes.TrimSpace(raw.Arguments)
	switch {
	case len(a) == 0 || bytes.Equal(a, []byte("null")):
		f.Arguments = ""
	case a[0] == '"':
		return json.Unmarshal(a, &f.Arguments)
	default:
		f.Arguments = string(a)
	}
	return nil
}

type messageJSON struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Reasoning        *string         `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
	Tools            []Tool          `json:"tools,omitempty"`
	ResponseFormat   json.RawMessage `json:"response_format,omitempty"`
	Task             *string         `json:"task,omitempty"`
	WoEOS            bool            `json:"wo_eos,omitempty"`
}

// UnmarshalJSON decodes an OpenAI-style message object.
func (m *Message) UnmarshalJSON(data []byte) error {
	var j messageJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*m = Message{
		Role:           j.Role,
		ToolCalls:      j.ToolCalls,
		ToolCallID:     j.ToolCallID,
		Name:           j.Name,
		Tools:          j.Tools,
		ResponseFormat: j.ResponseFormat,
		WoEOS:          j.WoEOS,
	}
	if bytes.Equal(bytes.TrimSpace(m.ResponseFormat), []byte("null")) {
		m.ResponseFormat = nil
	}
	switch {
	case j.ReasoningContent != nil:
		m.ReasoningContent = *j.ReasoningContent
	case j.Reasoning != nil:
		m.ReasoningContent = *j.Reasoning
	}
	if j.Task != nil {
		m.Task = *j.Task
		if m.Task == "" {
			return &FieldError{Field: "task", Detail: "empty task"}
		}
	}
	c := bytes.TrimSpace(j.Content)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
	case c[0] == '"':
		if err := json.Unmarshal(c, &m.Content); err != nil {
			return err
		}
	case c[0] == '[':
		if err := json.Unmarshal(c, &m.ContentParts); err != nil {
			return &FieldError{Field: "content", Detail: "content parts: " + err.Error()}
		}
		if m.ContentParts == nil {
			m.ContentParts = []ContentPart{}
		}
	default: // an object, a boolean or a number
		kind := "number"
		switch c[0] {
		case '{':
			kind = "object"
		case 't', 'f':
			kind = "bool"
		}
		return &FieldError{Field: "content", Detail: "expected a string, null or an array of content parts, got " + kind}
	}
	return nil
}

// MarshalJSON encodes the message in the OpenAI shape (plus the extras
// that are set); an assistant turn with tool calls and no text has
// "content": null.
func (m Message) MarshalJSON() ([]byte, error) {
	j := messageJSON{
		Role:           m.Role,
		ToolCalls:      m.ToolCalls,
		ToolCallID:     m.ToolCallID,
		Name:           m.Name,
		Tools:          m.Tools,
		ResponseFormat: m.ResponseFormat,
		WoEOS:          m.WoEOS,
	}
	var err error
	switch {
	case m.ContentParts != nil:
		j.Content, err = json.Marshal(m.ContentParts)
	case m.Content == "" && len(m.ToolCalls) > 0:
		j.Content = json.RawMessage("null") // OpenAI: a tool-call turn without text
	default:
		j.Content, err = json.Marshal(m.Content)
	}
	if err != nil {
		return nil, err
	}
	if m.ReasoningContent != "" {
		j.ReasoningContent = &m.ReasoningContent
	}
	if m.Task != "" {
		j.Task = &m.Task
	}
	return json.Marshal(j)
}

// text returns the content as one string: Content, or the text parts
// joined by sep.
func (m *Message) text(sep string) string {
	if m.ContentParts == nil {
		return m.Content
	}
	s := ""
	for i, p := range m.ContentParts {
		if i > 0 {
			s += sep
		}
		s += p.Text
	}
	return s
}
