package template

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// endingCase is one encoder case of TestEndingV4 / TestEndingV32: the
// messages, thinking mode and Ending, and the prompt or error wanted.
type endingCase struct {
	name     string
	msgs     []Message
	thinking bool
	ending   Ending
	want     string
	err      error
}

// runEndingCases encodes every case with encode and compares.
func runEndingCases(t *testing.T, encode func([]Message, *Options) (string, error), tests []endingCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encode(tt.msgs, &Options{Thinking: tt.thinking, Ending: tt.ending})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestEndingV4 covers add_generation_prompt and continue_final_message on
// the V4 encoder (Options.Ending), hand-checked against the format of
// shared/docs/dsv4-formats.md §2.2.
func TestEndingV4(t *testing.T) {
	user := Message{Role: "user", Content: "Hi"}
	asst := Message{Role: "assistant", Content: "Hello", ReasoningContent: "greet"}
	sys := Message{Role: "system", Content: "Be brief."}
	tests := []endingCase{
		{"native user", []Message{user}, false, EndNative, BOS + "<｜User｜>Hi<｜Assistant｜></think>", nil},
		{"native trailing assistant", []Message{user, asst}, false, EndNative, BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello" + EOS, nil},
		{"agp user", []Message{user}, false, EndGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜></think>", nil},
		{"agp user thinking", []Message{user}, true, EndGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜><think>", nil},
		{"agp trailing assistant", []Message{user, asst}, false, EndGenerationPrompt,
			BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello" + EOS + "<｜Assistant｜></think>", nil},
		{"agp trailing assistant thinking", []Message{user, asst}, true, EndGenerationPrompt,
			BOS + "<｜User｜>Hi<｜Assistant｜><think>greet</think>Hello" + EOS + "<｜Assistant｜><think>", nil},
		{"agp system only", []Message{sys}, false, EndGenerationPrompt, BOS + "Be brief.<｜Assistant｜></think>", nil},
		{"agp trailing reminder", []Message{user, asst, {Role: "latest_reminder", Content: "2026-01-01"}}, false, EndGenerationPrompt,
			BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello" + EOS + "<｜latest_reminder｜>2026-01-01<｜Assistant｜></think>", nil},
		{"agp task keeps the task opening", []Message{{Role: "user", Content: "q", Task: "query"}}, false, EndGenerationPrompt,
			BOS + "<｜User｜>q<｜query｜>", nil},
		{"no agp user", []Message{sys, user}, false, EndNoGenerationPrompt, BOS + "Be brief.<｜User｜>Hi", nil},
		{"no agp user thinking", []Message{user}, true, EndNoGenerationPrompt, BOS + "<｜User｜>Hi", nil},
		{"no agp task", []Message{{Role: "user", Content: "q", Task: "action"}}, false, EndNoGenerationPrompt, BOS + "<｜User｜>q", nil},
		{"no agp trailing assistant", []Message{user, asst}, false, EndNoGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello" + EOS, nil},
		{"no agp tool result", []Message{user, {Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: "{}"}}}}, {Role: "tool", ToolCallID: "c", Content: "r"}}, false, EndNoGenerationPrompt,
			BOS + "<｜User｜>Hi<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS + "<｜User｜><tool_result>r</tool_result>", nil},
		{"continue chat", []Message{user, asst}, false, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello", nil},
		{"continue chat parts", []Message{user, {Role: "assistant", ContentParts: []ContentPart{{Type: "text", Text: "He"}, {Type: "text", Text: "llo"}}}}, false, EndContinueFinal,
			BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello", nil},
		{"continue thinking content", []Message{user, asst}, true, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜><think>greet</think>Hello", nil},
		{"continue thinking reasoning", []Message{user, {Role: "assistant", ReasoningContent: "Let me"}}, true, EndContinueFinal,
			BOS + "<｜User｜>Hi<｜Assistant｜><think>Let me", nil},
		{"continue thinking empty", []Message{user, {Role: "assistant"}}, true, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜><think>", nil},
		{"continue chat ignores reasoning", []Message{user, {Role: "assistant", ReasoningContent: "Let me"}}, false, EndContinueFinal,
			BOS + "<｜User｜>Hi<｜Assistant｜></think>", nil},
		{"continue earlier turn dropped", []Message{user, asst, user, {Role: "assistant", Content: "A"}}, true, EndContinueFinal,
			BOS + "<｜User｜>Hi<｜Assistant｜></think>Hello" + EOS + "<｜User｜>Hi<｜Assistant｜><think></think>A", nil},
		{"continue after task", []Message{{Role: "user", Content: "q", Task: "action"}, {Role: "assistant", Content: "Sea"}}, true, EndContinueFinal,
			BOS + "<｜User｜>q<｜Assistant｜><think><｜action｜>Sea", nil},
		{"continue user last", []Message{user}, false, EndContinueFinal, "", ErrInvalidMessage},
		{"continue tool calls", []Message{user, {Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: "{}"}}}}}, false, EndContinueFinal, "", ErrInvalidMessage},
		{"continue no messages", nil, false, EndContinueFinal, "", ErrInvalidOption},
		{"bad ending", []Message{user}, false, Ending(9), "", ErrInvalidOption},
	}
	runEndingCases(t, EncodeV4, tests)
}

// TestEndingV4ContinueIsWoEOS: outside the open-reasoning case, continuing
// the final message renders exactly what DeepSeek's encoder renders for it
// with wo_eos (covered by the Python goldens); EndGenerationPrompt and
// EndNoGenerationPrompt agree with the encoder where it already ends with
// (or without) an opening.
func TestEndingV4ContinueIsWoEOS(t *testing.T) {
	convs := [][]Message{
		{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hel"}},
		{{Role: "system", Content: "s"}, {Role: "user", Content: "a"}, {Role: "assistant", Content: "b", ReasoningContent: "r"}, {Role: "user", Content: "c"}, {Role: "assistant", Content: "d", ReasoningContent: "r2"}},
		{{Role: "system", Content: "s", Tools: []Tool{{Type: "function", Function: []byte(`{"name": "f"}`)}}}, {Role: "user", Content: "a"}, {Role: "assistant", Content: "b", ReasoningContent: "r"}},
	}
	for i, msgs := range convs {
		for _, thinking := range []bool{false, true} {
			for _, keep := range []bool{false, true} {
				o := Options{Thinking: thinking, KeepThinking: keep}
				woEOS := append([]Message(nil), msgs...)
				woEOS[len(woEOS)-1].WoEOS = true
				want, err := EncodeV4(woEOS, &o)
				if err != nil {
					t.Fatal(err)
				}
				o.Ending = EndContinueFinal
				got, err := EncodeV4(msgs, &o)
				if err != nil || got != want {
					t.Errorf("conv %d thinking %v keep %v: continue %q (%v), wo_eos %q", i, thinking, keep, got, err, want)
				}
				// A trailing user turn: add_generation_prompt true is the
				// encoder's own ending; false drops the opening.
				withUser := append(append([]Message(nil), msgs...), Message{Role: "user", Content: "next"})
				o.Ending = EndNative
				native, _ := EncodeV4(withUser, &o)
				o.Ending = EndGenerationPrompt
				if agp, _ := EncodeV4(withUser, &o); agp != native {
					t.Errorf("conv %d: agp %q, native %q", i, agp, native)
				}
				o.Ending = EndNoGenerationPrompt
				noAGP, _ := EncodeV4(withUser, &o)
				if !strings.HasPrefix(native, noAGP) || !strings.HasSuffix(noAGP, "next") || native[len(noAGP):] != AssistantToken+map[bool]string{false: ThinkEnd, true: ThinkStart}[thinking] {
					t.Errorf("conv %d: no agp %q, native %q", i, noAGP, native)
				}
			}
		}
	}
}

func TestEndingV32(t *testing.T) {
	user := Message{Role: "user", Content: "Hi"}
	asst := Message{Role: "assistant", Content: "Hello", ReasoningContent: "greet"}
	call := Message{Role: "assistant", ReasoningContent: "r", ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: "{}"}}}}
	tool := Message{Role: "tool", ToolCallID: "c", Content: "x"}
	tests := []endingCase{
		{"agp user", []Message{user}, false, EndGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜></think>", nil},
		{"agp trailing assistant", []Message{user, asst}, true, EndGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜><think>greet</think>Hello" + EOS + "<｜Assistant｜><think>", nil},
		{"agp system", []Message{{Role: "system", Content: "s"}}, false, EndGenerationPrompt, BOS + "s<｜Assistant｜></think>", nil},
		{"no agp user", []Message{user}, true, EndNoGenerationPrompt, BOS + "<｜User｜>Hi", nil},
		{"no agp tool", []Message{user, call, tool}, true, EndNoGenerationPrompt,
			BOS + "<｜User｜>Hi<｜Assistant｜><think>r</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n</｜DSML｜function_calls>" + EOS + "\n\n<function_results>\n<result>x</result>\n</function_results>", nil},
		{"continue thinking content", []Message{user, asst}, true, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜><think>greet</think>Hello", nil},
		{"continue thinking reasoning", []Message{user, {Role: "assistant", ReasoningContent: "Let"}}, true, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜><think>Let", nil},
		{"continue chat", []Message{user, {Role: "assistant", Content: "He"}}, false, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜></think>He", nil},
		{"continue user last", []Message{user}, false, EndContinueFinal, "", ErrInvalidMessage},
	}
	runEndingCases(t, EncodeV32, tests)
}

// TestParseChatRequestEnding: the request fields, their defaults and
// conflicts, and the renderers that read them.
func TestParseChatRequestEnding(t *testing.T) {
	const conv = `"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}]`
	const userOnly = `"messages": [{"role": "user", "content": "Hi"}]`
	tests := []struct {
		name   string
		body   string
		ending Ending
		v4     string
		err    bool
	}{
		{"defaults", `{` + conv + `}`, EndGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜></think>Hel" + EOS + "<｜Assistant｜></think>", false},
		{"agp false", `{"add_generation_prompt": false, ` + userOnly + `}`, EndNoGenerationPrompt, BOS + "<｜User｜>Hi", false},
		{"continue", `{"continue_final_message": true, "add_generation_prompt": false, ` + conv + `}`, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜></think>Hel", false},
		{"continue implies agp false", `{"continue_final_message": true, ` + conv + `}`, EndContinueFinal, BOS + "<｜User｜>Hi<｜Assistant｜></think>Hel", false},
		{"continue false", `{"continue_final_message": false, ` + userOnly + `}`, EndGenerationPrompt, BOS + "<｜User｜>Hi<｜Assistant｜></think>", false},
		{"both true", `{"continue_final_message": true, "add_generation_prompt": true, ` + conv + `}`, 0, "", true},
		{"continue user last", `{"continue_final_message": true, ` + userOnly + `}`, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseChatRequest([]byte(tt.body))
			if tt.err {
				if !errors.Is(err, ErrInvalidRequest) {
					t.Fatalf("err %v, want ErrInvalidRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Ending() != tt.ending {
				t.Errorf("ending %d, want %d", req.Ending(), tt.ending)
			}
			got, err := (&V4Renderer{}).Render(context.Background(), req)
			if err != nil || got != tt.v4 {
				t.Errorf("V4Renderer %q (%v), want %q", got, err, tt.v4)
			}
		})
	}
}

// TestZeroChatRequestOpensTurn: a ChatRequest built in Go with no ending
// fields set renders as ParseChatRequest's defaults do (an assistant turn
// opened), as before add_generation_prompt existed.
func TestZeroChatRequestOpensTurn(t *testing.T) {
	req := &ChatRequest{Messages: []Message{{Role: "user", Content: "Hi"}}}
	if req.Ending() != EndGenerationPrompt {
		t.Fatalf("ending %d, want EndGenerationPrompt", req.Ending())
	}
	got, err := (&V4Renderer{}).Render(context.Background(), req)
	if want := BOS + "<｜User｜>Hi<｜Assistant｜></think>"; err != nil || got != want {
		t.Errorf("V4Renderer %q (%v), want %q", got, err, want)
	}
}

// TestJinjaContinueFinal: the Jinja renderer cuts the output after the
// final message as transformers' continue_final_message does, and passes
// add_generation_prompt.
func TestJinjaContinueFinal(t *testing.T) {
	j, err := ParseJinja(`{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &JinjaRenderer{Template: j}
	tests := []struct {
		name, body, want string
		err              bool
	}{
		{"agp", `{"messages": [{"role": "user", "content": "Hi"}]}`, "<user>Hi</user><assistant>", false},
		{"no agp", `{"add_generation_prompt": false, "messages": [{"role": "user", "content": "Hi"}]}`, "<user>Hi</user>", false},
		{"continue", `{"continue_final_message": true, "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}]}`, "<user>Hi</user><assistant>Hel", false},
		{"continue trailing space kept", `{"continue_final_message": true, "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel "}]}`, "<user>Hi</user><assistant>Hel ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseChatRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Render(context.Background(), req)
			if tt.err {
				if err == nil {
					t.Errorf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
	// transformers' rule on its own: the message's trailing whitespace
	// survives only when the template kept it.
	for _, tc := range []struct{ rendered, final, want string }{
		{"<a>Hel </a>", "Hel ", "<a>Hel "},
		{"<a>Hel</a>", "Hel ", "<a>Hel"},
		{"<a>Hel</a>", " Hel", "<a>Hel"},
		{"<a>x</a><a>x</a>", "x", "<a>x</a><a>x"},
		{"<a></a>", "", "<a></a>"},
	} {
		got, err := continueFinal(tc.rendered, &Message{Role: "assistant", Content: tc.final})
		if err != nil || got != tc.want {
			t.Errorf("continueFinal(%q, %q) = %q (%v), want %q", tc.rendered, tc.final, got, err, tc.want)
		}
	}
	if _, err := continueFinal("<a>x</a>", &Message{Role: "assistant", Content: "y"}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("absent final message: %v", err)
	}
}
