package template

import (
	"fmt"
	"strings"
)

// V3.2 tool prompt (DeepSeek-V3.2 encoding/encoding_dsv32.py, wording as in
// the official test_output.txt).
const v32ToolsHead = "## Tools\n\n" +
	"You have access to a set of tools you can use to answer the user's question.\n" +
	"You can invoke functions by writing a \"<" + DSML + "function_calls>\" block like the following as part of your reply to the user:\n" +
	"<" + DSML + "function_calls>\n" +
	"<" + DSML + "invoke name=\"$FUNCTION_NAME\">\n" +
	"<" + DSML + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + DSML + "parameter>\n" +
	"...\n" +
	"</" + DSML + "invoke>\n" +
	"<" + DSML + "invoke name=\"$FUNCTION_NAME2\">\n" +
	"...\n" +
	"</" + DSML + "invoke>\n" +
	"</" + DSML + "function_calls>\n\n" +
	"String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n" +
	"If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n\n" +
	"<" + DSML + "function_calls>\n" +
	"...\n" +
	"</" + DSML + "function_calls>\n\n" +
	"<function_results>\n" +
	"...\n" +
	"</function_results>\n\n" +
	ThinkStart + "...thinking about results" + ThinkEnd + "\n\n" +
	"Here are the functions available in JSONSchema format:\n" +
	"<functions>\n"

const v32ToolsTail = "\n</functions>\n"

// EncodeV32 renders messages into a DeepSeek-V3.2 prompt, byte for byte as
// DeepSeek's encoding_dsv32.encode_messages does (thinking_mode from
// opts.Thinking, drop_thinking = !opts.KeepThinking, context =
// opts.Context, add_default_bos_token = !opts.NoBOS). V3.2 wraps calls in
// a <｜DSML｜function_calls> block, appends tool results to the stream as
// <function_results>, and has no latest_reminder, task or reasoning
// effort. Arguments must be JSON objects (LenientArguments is ignored).
//
// Errors: as EncodeV4; ErrInvalidOption if opts.ReasoningEffort is set.
func EncodeV32(messages []Message, opts *Options) (string, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.ReasoningEffort != "" {
		return "", fmt.Errorf("%w: V3.2 has no reasoning effort", ErrInvalidOption)
	}
	all := make([]Message, 0, len(opts.Context)+len(messages))
	all = append(append(all, opts.Context...), messages...)
	if err := validate(all, true); err != nil {
		return "", err
	}
	if err := checkEnding(messages, len(opts.Context), opts.Ending); err != nil {
		return "", err
	}
	full := make([]*v4msg, len(all))
	for i := range all {
		full[i] = &v4msg{src: i, m: &all[i], role: all[i].Role}
	}
	if opts.Thinking && !opts.KeepThinking {
		full = dropThinking(full, true)
	}
	var b strings.Builder
	if !opts.NoBOS && len(opts.Context) == 0 {
		b.WriteString(BOS)
	}
	r := &v32renderer{msgs: full, thinking: opts.Thinking, b: &b, lastUser: lastUserIndex(full), ending: opts.Ending}
	max := opts.maxOut()
	for i := range len(messages) {
		idx := i + len(opts.Context)
		if idx >= len(full) {
			return "", fmt.Errorf("%w: context messages removed by drop-thinking shift the rendering", ErrInvalidMessage)
		}
		if err := r.render(idx); err != nil {
			return "", err
		}
		if b.Len() > max {
			return "", fmt.Errorf("%w: prompt longer than %d bytes", ErrLimit, max)
		}
	}
	return b.String(), nil
}

type v32renderer struct {
	msgs     []*v4msg
	thinking bool
	b        *strings.Builder
	lastUser int
	ending   Ending
}

// opening reports whether the assistant-turn opening that follows message
// index is written (add_generation_prompt=false and continue_final_message
// omit the last message's).
func (r *v32renderer) opening(index int) bool {
	return index < len(r.msgs)-1 || (r.ending != EndNoGenerationPrompt && r.ending != EndContinueFinal)
}

func (r *v32renderer) thinkAfterUser(index int) {
	if !r.opening(index) {
		return
	}
	if index == r.lastUser && r.thinking {
		r.b.WriteString(ThinkStart)
	} else {
		r.b.WriteString(ThinkEnd)
	}
}

func (r *v32renderer) render(index int) error {
	b := r.b
	v := r.msgs[index]
	m := v.m
	switch v.role {
	case "system":
		b.WriteString(m.text(""))
		if len(m.Tools) > 0 {
			b.WriteString("\n\n" + v32ToolsHead)
			if err := writeToolSchemas(b, v); err != nil {
				return err
			}
			b.WriteString(v32ToolsTail)
		}
		if err := writeResponseFormat(b, v); err != nil {
			return err
		}
	case "developer":
		b.WriteString(UserToken)
		if len(m.Tools) > 0 {
			b.WriteString("\n\n" + v32ToolsHead)
			if err := writeToolSchemas(b, v); err != nil {
				return err
			}
			b.WriteString(v32ToolsTail)
		}
		if err := writeResponseFormat(b, v); err != nil {
			return err
		}
		b.WriteString("\n\n# The user's message is: " + m.text(""))
		if r.opening(index) {
			b.WriteString(AssistantToken)
		}
		r.thinkAfterUser(index)
	case "user":
		b.WriteString(UserToken + m.text("\n\n"))
		if r.opening(index) {
			b.WriteString(AssistantToken)
		}
		r.thinkAfterUser(index)
	case "tool":
		prev := index - 1
		for prev >= 0 && r.msgs[prev].role == "tool" {
			prev--
		}
		if prev < 0 || r.msgs[prev].role != "assistant" {
			return msgErr(v.src, v.role, ErrToolResultWithoutCall, "tool message does not follow an assistant turn")
		}
		order := index - prev
		calls := r.msgs[prev].m.ToolCalls
		if len(calls) < order {
			return msgErr(v.src, v.role, ErrToolResultWithoutCall, "more tool results than calls")
		}
		if order == 1 {
			b.WriteString("\n\n<function_results>")
		}
		b.WriteString("\n<result>" + m.text("\n\n") + "</result>")
		if order == len(calls) {
			b.WriteString("\n</function_results>")
			if !r.opening(index) {
				return nil
			}
			if index >= r.lastUser && r.thinking {
				b.WriteString("\n\n" + ThinkStart)
			} else {
				b.WriteString("\n\n" + ThinkEnd)
			}
		}
	case "assistant":
		open := index == len(r.msgs)-1 && r.ending == EndContinueFinal
		if r.thinking && index > r.lastUser {
			if v.reasoning() == "" && len(m.ToolCalls) == 0 && !open {
				return msgErr(v.src, v.role, ErrInvalidMessage, "in thinking mode an assistant turn after the last user message needs reasoning_content or tool_calls")
			}
			b.WriteString(v.reasoning())
			if !open || m.text("") != "" {
				b.WriteString(ThinkEnd)
			}
		}
		b.WriteString(m.text(""))
		if len(m.ToolCalls) > 0 {
			b.WriteString("\n\n<" + DSML + "function_calls>\n")
			if err := writeInvokes(b, v, false); err != nil {
				return err
			}
			b.WriteString("\n</" + DSML + "function_calls>")
		}
		if open {
			return nil
		}
		b.WriteString(EOS)
		if index == len(r.msgs)-1 && r.ending == EndGenerationPrompt {
			r.newTurn()
		}
	default:
		return msgErr(v.src, v.role, ErrUnknownRole, "unknown role %q", v.role)
	}
	if v.role == "system" && index == len(r.msgs)-1 && r.ending == EndGenerationPrompt {
		r.newTurn()
	}
	return nil
}

// newTurn opens a new assistant turn after a trailing assistant or system
// message (add_generation_prompt=true).
func (r *v32renderer) newTurn() {
	r.b.WriteString(AssistantToken)
	if r.thinking {
		r.b.WriteString(ThinkStart)
	} else {
		r.b.WriteString(ThinkEnd)
	}
}
