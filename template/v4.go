package template

import (
	"fmt"
	"slices"
	"strings"
)

// Literal strings of the DeepSeek-V4 prompt format (DeepSeek-V4
// encoding/encoding_dsv4.py; docs: shared/docs/dsv4-formats.md §2).
const (
	BOS              = "<｜begin▁of▁sentence｜>"
	EOS              = "<｜end▁of▁sentence｜>"
	ThinkStart       = "<think>"
	ThinkEnd         = "</think>"
	DSML             = "｜DSML｜"
	UserToken        = "<｜User｜>"
	AssistantToken   = "<｜Assistant｜>"
	LatestReminderTk = "<｜latest_reminder｜>"
)

// taskTokens maps a V4 quick-instruction task to its special token.
var taskTokens = map[string]string{
	"action":    "<｜action｜>",
	"query":     "<｜query｜>",
	"authority": "<｜authority｜>",
	"domain":    "<｜domain｜>",
	"title":     "<｜title｜>",
	"read_url":  "<｜read_url｜>",
}

const reasoningEffortMax = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n" +
	"You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n" +
	"Explicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"

const v4ToolsHead = "## Tools\n\n" +
	"You have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<" + DSML + "tool_calls>\" block like the following:\n\n" +
	"<" + DSML + "tool_calls>\n" +
	"<" + DSML + "invoke name=\"$TOOL_NAME\">\n" +
	"<" + DSML + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + DSML + "parameter>\n" +
	"...\n" +
	"</" + DSML + "invoke>\n" +
	"<" + DSML + "invoke name=\"$TOOL_NAME2\">\n" +
	"...\n" +
	"</" + DSML + "invoke>\n" +
	"</" + DSML + "tool_calls>\n\n" +
	"String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n" +
	"If thinking_mode is enabled (triggered by " + ThinkStart + "), you MUST output your complete reasoning inside " + ThinkStart + "..." + ThinkEnd + " BEFORE any tool calls or final response.\n\n" +
	"Otherwise, output directly after " + ThinkEnd + " with tool calls or final response.\n\n" +
	"### Available Tool Schemas\n\n"

const v4ToolsTail = "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"

const responseFormatHead = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"

// DefaultMaxOutputBytes bounds a rendered prompt when Options.MaxOutputBytes
// is zero (64 MiB, far above any context window of 1M tokens × ~4 bytes).
const DefaultMaxOutputBytes = 64 << 20

// maxJSONBytes bounds one JSON text printed by tojson or a schema line.
const maxJSONBytes = DefaultMaxOutputBytes

// Options select the rendering mode of the native encoders. The zero value
// is chat (non-thinking) mode with DeepSeek's defaults.
type Options struct {
	// Thinking selects thinking mode (the prompt ends in "<think>");
	// false is chat mode (it ends in "</think>").
	Thinking bool
	// ReasoningEffort is "", "high" or "max" (V4 only). "max" in thinking
	// mode prepends DeepSeek's maximum-effort paragraph; "high" and ""
	// render identically.
	ReasoningEffort string
	// KeepThinking keeps the reasoning of earlier turns (the encoders'
	// drop_thinking=False). V4 keeps it anyway when any message declares
	// tools.
	KeepThinking bool
	// Context holds earlier messages whose prompt is already rendered
	// (e.g. in the KV cache): they steer the rendering of Messages but
	// produce no text, and no BOS is emitted.
	Context []Message
	// NoBOS omits the begin-of-sentence token.
	NoBOS bool
	// LenientArguments renders tool-call arguments that are not a JSON
	// object as DeepSeek's V4 encoder does (one string parameter named
	// "arguments") instead of failing with ErrInvalidArguments.
	LenientArguments bool
	// MaxOutputBytes bounds the prompt size (0: DefaultMaxOutputBytes).
	MaxOutputBytes int
	// Ending selects what follows the last message: the zero value
	// (EndNative) renders as DeepSeek's encoder does; the others are
	// vLLM's add_generation_prompt and continue_final_message.
	Ending Ending
}

// Ending selects how a native encoder (EncodeV4, EncodeV32) ends the
// prompt after the last message: the request fields
// add_generation_prompt and continue_final_message of vLLM's
// chat-completions API, which transformers' apply_chat_template reads.
type Ending uint8

const (
	// EndNative renders as DeepSeek's encode_messages does: the
	// assistant-turn opening ("<｜Assistant｜>" then "<think>" in thinking
	// mode, else "</think>"; or a task token) follows a trailing user,
	// developer (or tool) message; nothing follows a trailing assistant,
	// system or latest_reminder message.
	EndNative Ending = iota
	// EndGenerationPrompt is add_generation_prompt=true: the prompt always
	// ends with an assistant-turn opening. As EndNative, plus a new turn's
	// opening after a trailing assistant, system or latest_reminder
	// message (a Jinja template's add_generation_prompt appends its
	// assistant header whatever the last role is).
	EndGenerationPrompt
	// EndNoGenerationPrompt is add_generation_prompt=false: the prompt
	// ends with the last message's own text; the opening (and a task
	// token) that would follow it is omitted.
	EndNoGenerationPrompt
	// EndContinueFinal is continue_final_message=true: the last message
	// must be an assistant message without tool calls; it is rendered
	// open, without its end-of-sentence token, so that generation
	// continues it. In thinking mode, where the turn's reasoning is
	// rendered ("{reasoning}</think>{content}"), a message with empty
	// content is continued inside its reasoning: "</think>" is omitted
	// too (the prompt ends "<think>{reasoning}").
	EndContinueFinal
)

// checkEnding validates the ending against the messages to render.
func checkEnding(messages []Message, base int, e Ending) error {
	switch e {
	case EndNative, EndGenerationPrompt, EndNoGenerationPrompt:
		return nil
	case EndContinueFinal:
		if len(messages) == 0 {
			return fmt.Errorf("%w: continue_final_message needs a final assistant message", ErrInvalidOption)
		}
		i := len(messages) - 1
		m := &messages[i]
		if m.Role != "assistant" {
			return msgErr(base+i, m.Role, ErrInvalidMessage, "continue_final_message needs the last message to be an assistant message")
		}
		if len(m.ToolCalls) > 0 {
			return msgErr(base+i, m.Role, ErrInvalidMessage, "continue_final_message: the final assistant message has tool_calls; there is no text to continue")
		}
		return nil
	}
	return fmt.Errorf("%w: ending %d", ErrInvalidOption, e)
}

func (o *Options) maxOut() int {
	if o == nil || o.MaxOutputBytes <= 0 {
		return DefaultMaxOutputBytes
	}
	return o.MaxOutputBytes
}

// block kinds of a merged user message.
const (
	blockText = iota
	blockToolResult
)

type v4block struct {
	kind      int
	text      string
	toolUseID string
	parts     []ContentPart // tool result given as parts
}

// v4msg is a message after merge_tool_messages.
type v4msg struct {
	src       int // index in context+messages, for errors
	m         *Message
	role      string
	blocks    []v4block // user messages only (always non-nil for them)
	task      string
	woEOS     bool
	dropped   bool // reasoning removed by drop-thinking
	hasBlocks bool
}

func (v *v4msg) reasoning() string {
	if v.dropped {
		return ""
	}
	return v.m.ReasoningContent
}

// validate checks roles, tasks and the tool-result/tool-call pairing over
// the whole conversation (context first).
func validate(all []Message, v32 bool) error {
	var lastCalls []ToolCall
	seenCalls := false
	for i := range all {
		m := &all[i]
		switch m.Role {
		case "system", "user", "assistant":
		case "developer":
			if m.text("") == "" {
				return msgErr(i, m.Role, ErrInvalidMessage, "developer message needs content")
			}
		case "latest_reminder":
			if v32 {
				return msgErr(i, m.Role, ErrUnknownRole, "latest_reminder is a V4 role")
			}
		case "tool":
			if !seenCalls {
				return msgErr(i, m.Role, ErrToolResultWithoutCall, "no earlier assistant message has tool_calls")
			}
			if m.ToolCallID != "" {
				hasIDs, found := false, false
				for _, c := range lastCalls {
					if c.ID != "" {
						hasIDs = true
					}
					if c.ID == m.ToolCallID {
						found = true
					}
				}
				if hasIDs && !found {
					return msgErr(i, m.Role, ErrToolResultWithoutCall, "tool_call_id %q matches no call of the last assistant turn", m.ToolCallID)
				}
			}
		default:
			return msgErr(i, m.Role, ErrUnknownRole, "unknown role %q", m.Role)
		}
		if m.Role != "tool" {
			for _, p := range m.ContentParts {
				if p.Type != "text" {
					return msgErr(i, m.Role, ErrInvalidMessage, "content part of type %q: the model reads text only", p.Type)
				}
			}
		}
		if m.Task != "" {
			if v32 {
				return msgErr(i, m.Role, ErrInvalidMessage, "task is a V4 field")
			}
			if _, ok := taskTokens[m.Task]; !ok {
				return msgErr(i, m.Role, ErrInvalidMessage, "invalid task %q (valid: action, query, authority, domain, title, read_url)", m.Task)
			}
		}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			lastCalls = m.ToolCalls
			seenCalls = true
			for _, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return msgErr(i, m.Role, ErrInvalidMessage, "tool call without a function name")
				}
			}
		}
		for _, t := range m.Tools {
			if len(t.Function) == 0 {
				return msgErr(i, m.Role, ErrInvalidMessage, "tool without a function object")
			}
		}
	}
	return nil
}

// mergeToolMessages is merge_tool_messages: tool messages become
// tool_result blocks of a user message; a user message following such a
// merged message (without a task) is appended to it as a text block.
func mergeToolMessages(msgs []Message, base int) []*v4msg {
	var out []*v4msg
	for i := range msgs {
		m := &msgs[i]
		last := func() *v4msg {
			if len(out) == 0 {
				return nil
			}
			return out[len(out)-1]
		}
		switch m.Role {
		case "tool":
			b := v4block{kind: blockToolResult, toolUseID: m.ToolCallID, text: m.Content, parts: m.ContentParts}
			if l := last(); l != nil && l.role == "user" && l.hasBlocks {
				l.blocks = append(l.blocks, b)
			} else {
				out = append(out, &v4msg{src: base + i, m: &Message{Role: "user"}, role: "user", blocks: []v4block{b}, hasBlocks: true})
			}
		case "user":
			b := v4block{kind: blockText, text: m.text("\n\n")}
			if l := last(); l != nil && l.role == "user" && l.hasBlocks && l.task == "" {
				l.blocks = append(l.blocks, b)
			} else {
				out = append(out, &v4msg{src: base + i, m: m, role: "user", blocks: []v4block{b}, hasBlocks: true, task: m.Task, woEOS: m.WoEOS})
			}
		default:
			out = append(out, &v4msg{src: base + i, m: m, role: m.Role, task: m.Task, woEOS: m.WoEOS})
		}
	}
	return out
}

// sortToolResults is sort_tool_results_by_call_order: inside each user
// message, tool_result blocks are reordered to follow the order of the
// ids in the latest assistant tool_calls (unknown ids rank first, stable).
func sortToolResults(msgs []*v4msg) {
	order := map[string]int{}
	for _, v := range msgs {
		switch {
		case v.role == "assistant" && len(v.m.ToolCalls) > 0:
			order = map[string]int{}
			for i, c := range v.m.ToolCalls {
				if c.ID != "" {
					order[c.ID] = i
				}
			}
		case v.role == "user" && len(v.blocks) > 0:
			var idx []int
			for i, b := range v.blocks {
				if b.kind == blockToolResult {
					idx = append(idx, i)
				}
			}
			if len(idx) <= 1 || len(order) == 0 {
				continue
			}
			tb := make([]v4block, len(idx))
			for j, i := range idx {
				tb[j] = v.blocks[i]
			}
			slices.SortStableFunc(tb, func(a, b v4block) int { return order[a.toolUseID] - order[b.toolUseID] })
			nb := slices.Clone(v.blocks)
			for j, i := range idx {
				nb[i] = tb[j]
			}
			v.blocks = nb
		}
	}
}

func lastUserIndex(msgs []*v4msg) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].role == "user" || msgs[i].role == "developer" {
			return i
		}
	}
	return -1
}

// dropThinking is _drop_thinking_messages: before the last user/developer
// message, assistant turns lose their reasoning and developer (and other
// non-kept) messages are removed.
func dropThinking(msgs []*v4msg, v32 bool) []*v4msg {
	last := lastUserIndex(msgs)
	var out []*v4msg
	for i, v := range msgs {
		keep := v.role == "user" || v.role == "system" || v.role == "tool"
		if !v32 {
			keep = keep || v.role == "latest_reminder"
		}
		switch {
		case keep || i >= last:
			out = append(out, v)
		case v.role == "assistant":
			c := *v
			c.dropped = true
			out = append(out, &c)
		}
	}
	return out
}

// EncodeV4 renders messages into a DeepSeek-V4 prompt, byte for byte as
// DeepSeek's encoding_dsv4.encode_messages does (thinking_mode from
// opts.Thinking, drop_thinking = !opts.KeepThinking, context =
// opts.Context, add_default_bos_token = !opts.NoBOS, reasoning_effort =
// opts.ReasoningEffort). A nil opts is chat mode.
//
// Tool messages are merged into user turns as <tool_result> blocks ordered
// like the preceding assistant tool_calls; tool schemas and non-string
// argument values are printed as Python's json.dumps(ensure_ascii=False).
//
// Errors: *MessageError wrapping ErrUnknownRole, ErrInvalidMessage,
// ErrToolResultWithoutCall or ErrInvalidArguments; ErrInvalidOption for a
// bad reasoning effort; ErrLimit when the prompt would exceed
// opts.MaxOutputBytes.
func EncodeV4(messages []Message, opts *Options) (string, error) {
	if opts == nil {
		opts = &Options{}
	}
	switch opts.ReasoningEffort {
	case "", "high", "max":
	default:
		return "", fmt.Errorf("%w: reasoning effort %q (want \"\", \"high\" or \"max\")", ErrInvalidOption, opts.ReasoningEffort)
	}
	all := make([]Message, 0, len(opts.Context)+len(messages))
	all = append(append(all, opts.Context...), messages...)
	if err := validate(all, false); err != nil {
		return "", err
	}
	if err := checkEnding(messages, len(opts.Context), opts.Ending); err != nil {
		return "", err
	}

	ctx := mergeToolMessages(opts.Context, 0)
	msgs := mergeToolMessages(messages, len(opts.Context))
	// The reference sorts context+messages together (the context primes
	// the call order), then the context on its own.
	sortToolResults(append(slices.Clone(ctx), msgs...))
	full := append(slices.Clone(ctx), msgs...)

	var b strings.Builder
	if !opts.NoBOS && len(opts.Context) == 0 {
		b.WriteString(BOS)
	}
	drop := !opts.KeepThinking
	for _, v := range full {
		if len(v.m.Tools) > 0 {
			drop = false
			break
		}
	}
	numRender, ctxLen := len(msgs), len(ctx)
	if opts.Thinking && drop {
		full = dropThinking(full, false)
		numRender = len(full) - len(dropThinking(ctx, false))
		ctxLen = len(full) - numRender
	}
	r := &v4renderer{msgs: full, thinking: opts.Thinking, drop: drop, effort: opts.ReasoningEffort,
		lenient: opts.LenientArguments, b: &b, max: opts.maxOut(), lastUser: lastUserIndex(full), ending: opts.Ending}
	for i := range numRender {
		if err := r.render(i + ctxLen); err != nil {
			return "", err
		}
		if b.Len() > r.max {
			return "", fmt.Errorf("%w: prompt longer than %d bytes", ErrLimit, r.max)
		}
	}
	return b.String(), nil
}

type v4renderer struct {
	msgs     []*v4msg
	thinking bool
	drop     bool
	effort   string
	lenient  bool
	b        *strings.Builder
	max      int
	lastUser int
	ending   Ending
}

func (r *v4renderer) render(index int) error {
	b := r.b
	v := r.msgs[index]
	m := v.m
	last := index == len(r.msgs)-1
	if index == 0 && r.thinking && r.effort == "max" {
		b.WriteString(reasoningEffortMax)
	}
	switch v.role {
	case "system":
		b.WriteString(m.text(""))
		if err := writeToolsAndFormat(b, v, false); err != nil {
			return err
		}
	case "developer":
		b.WriteString(UserToken)
		b.WriteString(m.text(""))
		if err := writeToolsAndFormat(b, v, false); err != nil {
			return err
		}
	case "user":
		b.WriteString(UserToken)
		for i, blk := range v.blocks {
			if i > 0 {
				b.WriteString("\n\n")
			}
			switch blk.kind {
			case blockText:
				b.WriteString(blk.text)
			case blockToolResult:
				b.WriteString("<tool_result>")
				if blk.parts != nil {
					for j, p := range blk.parts {
						if j > 0 {
							b.WriteString("\n\n")
						}
						if p.Type == "text" {
							b.WriteString(p.Text)
						} else {
							b.WriteString("[Unsupported " + p.Type + "]")
						}
					}
				} else {
					b.WriteString(blk.text)
				}
				b.WriteString("</tool_result>")
			}
		}
	case "latest_reminder":
		b.WriteString(LatestReminderTk)
		b.WriteString(m.text(""))
	case "assistant":
		prevTask := index > 0 && r.msgs[index-1].task != ""
		open := last && r.ending == EndContinueFinal
		if r.thinking && !prevTask && (!r.drop || index > r.lastUser) {
			b.WriteString(v.reasoning())
			// A continued turn without content is continued inside
			// its reasoning.
			if !open || m.text("") != "" {
				b.WriteString(ThinkEnd)
			}
		}
		b.WriteString(m.text(""))
		if len(m.ToolCalls) > 0 {
			b.WriteString("\n\n<" + DSML + "tool_calls>\n")
			if err := writeInvokes(b, v, r.lenient); err != nil {
				return err
			}
			b.WriteString("\n</" + DSML + "tool_calls>")
		}
		if !v.woEOS && !open {
			b.WriteString(EOS)
		}
	default:
		return msgErr(v.src, v.role, ErrUnknownRole, "unknown role %q", v.role)
	}

	if last {
		switch r.ending {
		case EndNoGenerationPrompt, EndContinueFinal:
			return nil
		case EndGenerationPrompt:
			if v.task == "" && v.role != "user" && v.role != "developer" {
				// A new assistant turn after the last one (or after a
				// system or reminder message).
				b.WriteString(AssistantToken)
				if r.thinking {
					b.WriteString(ThinkStart)
				} else {
					b.WriteString(ThinkEnd)
				}
				return nil
			}
		}
	}
	// Transition to the next message.
	if index+1 < len(r.msgs) {
		if next := r.msgs[index+1].role; next != "assistant" && next != "latest_reminder" {
			return nil
		}
	}
	switch {
	case v.task != "":
		tok := taskTokens[v.task]
		if v.task != "action" {
			b.WriteString(tok)
		} else {
			b.WriteString(AssistantToken)
			if r.thinking {
				b.WriteString(ThinkStart)
			} else {
				b.WriteString(ThinkEnd)
			}
			b.WriteString(tok)
		}
	case v.role == "user" || v.role == "developer":
		b.WriteString(AssistantToken)
		if r.thinking && (!r.drop || index >= r.lastUser) {
			b.WriteString(ThinkStart)
		} else {
			b.WriteString(ThinkEnd)
		}
	}
	return nil
}

// writeToolsAndFormat appends the tools block and the response-format
// block of a system/developer message (V4 wording).
func writeToolsAndFormat(b *strings.Builder, v *v4msg, _ bool) error {
	m := v.m
	if len(m.Tools) > 0 {
		b.WriteString("\n\n")
		b.WriteString(v4ToolsHead)
		if err := writeToolSchemas(b, v); err != nil {
			return err
		}
		b.WriteString(v4ToolsTail)
	}
	return writeResponseFormat(b, v)
}

func writeResponseFormat(b *strings.Builder, v *v4msg) error {
	rf, ok, err := responseFormat(v)
	if err != nil || !ok {
		return err
	}
	b.WriteString("\n\n")
	b.WriteString(responseFormatHead)
	b.WriteString(rf)
	return nil
}

// responseFormat returns the message's response_format printed by
// json.dumps, and whether it is truthy in Python's sense.
func responseFormat(v *v4msg) (string, bool, error) {
	m := v.m
	if len(m.ResponseFormat) == 0 {
		return "", false, nil
	}
	val, err := decodeOrdered(m.ResponseFormat)
	if err != nil {
		return "", false, msgErr(v.src, m.Role, ErrInvalidMessage, "response_format: %v", err)
	}
	if !pyTruthy(val) {
		return "", false, nil
	}
	s, err := pyDumps(val)
	if err != nil {
		return "", false, msgErr(v.src, m.Role, ErrInvalidMessage, "response_format: %v", err)
	}
	return s, true, nil
}

// writeToolSchemas writes one json.dumps line per tool function.
func writeToolSchemas(b *strings.Builder, v *v4msg) error {
	for i, t := range v.m.Tools {
		val, err := decodeOrdered(t.Function)
		if err != nil {
			return msgErr(v.src, v.m.Role, ErrInvalidMessage, "tool %d function: %v", i, err)
		}
		s, err := pyDumps(val)
		if err != nil {
			return msgErr(v.src, v.m.Role, ErrInvalidMessage, "tool %d function: %v", i, err)
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return nil
}

// writeInvokes writes the DSML invoke blocks of an assistant turn, joined
// by "\n" (shared by V4 and V3.2).
func writeInvokes(b *strings.Builder, v *v4msg, lenient bool) error {
	for i, c := range v.m.ToolCalls {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("<" + DSML + "invoke name=\"" + c.Function.Name + "\">\n")
		if err := writeParameters(b, v, i, c.Function.Arguments, lenient); err != nil {
			return err
		}
		b.WriteString("\n</" + DSML + "invoke>")
	}
	return nil
}

// writeParameters is encode_arguments_to_dsml: one DSML parameter per
// argument, string values raw with string="true", others as JSON.
func writeParameters(b *strings.Builder, v *v4msg, call int, args string, lenient bool) error {
	val, err := decodeOrdered([]byte(args))
	var obj *jsonObject
	if err == nil {
		obj, _ = val.(*jsonObject)
	}
	if obj == nil {
		switch {
		case strings.TrimSpace(args) == "" && !lenient:
			obj = &jsonObject{} // no arguments
		case lenient && err != nil:
			obj = &jsonObject{Keys: []string{"arguments"}, Values: []any{args}}
		case err != nil:
			return msgErr(v.src, v.m.Role, ErrInvalidArguments, "tool call %d (%s): arguments are not valid JSON: %v", call, v.m.ToolCalls[call].Function.Name, err)
		default:
			return msgErr(v.src, v.m.Role, ErrInvalidArguments, "tool call %d (%s): arguments are JSON but not an object", call, v.m.ToolCalls[call].Function.Name)
		}
	}
	for i, k := range obj.Keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("<" + DSML + "parameter name=\"" + k + "\" string=\"")
		if s, ok := obj.Values[i].(string); ok {
			b.WriteString("true\">")
			b.WriteString(s)
		} else {
			js, err := pyDumps(obj.Values[i])
			if err != nil {
				return msgErr(v.src, v.m.Role, ErrInvalidArguments, "tool call %d: %v", call, err)
			}
			b.WriteString("false\">")
			b.WriteString(js)
		}
		b.WriteString("</" + DSML + "parameter>")
	}
	return nil
}

// pyTruthy is Python's bool() of a decoded JSON value: this package's
// number and object types here, the rest as Truthy.
func pyTruthy(v any) bool {
	switch t := v.(type) {
	case pyInt:
		return t.text != "0"
	case pyFloat:
		return t != 0
	case *jsonObject:
		return len(t.Keys) > 0
	}
	return Truthy(v)
}
