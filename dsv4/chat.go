package dsv4

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
	"github.com/dsv4go/dsv4go/template"
)

// textTokenizer is what the chat layer needs from a tokenizer.
type textTokenizer interface {
	// Encode tokenizes text with special-token matching on and no BOS added.
	Encode(text string) ([]int32, error)
	// NewDecoder returns a streaming detokenizer that keeps special tokens.
	NewDecoder() tokenDecoder
	// TokenString is one token's text (for logprobs).
	TokenString(id int32) string
	// IsSpecial reports whether id is a special token (one that
	// skip_special_tokens drops: BOS, EOS, pad...).
	IsSpecial(id int32) bool
}

// tokenDecoder turns ids into text without breaking UTF-8.
type tokenDecoder interface {
	Add(id int32) string // text completed by id (may be "")
	Flush() string       // whatever is held back
}

// outputParser splits generated text into reasoning, content and tool calls.
type outputParser interface {
	Feed(text string) []ChatDelta
	Finish() []ChatDelta
}

// chatCodec is the text side of an Engine: tokenizer, prompt renderer and
// output parsers.
type chatCodec struct {
	tok textTokenizer
	// render returns the prompt text of req in the given mode with the
	// tools to declare (nil: none).
	render func(req *ChatRequest, thinking bool, tools []Tool) (string, error)
	// newParser returns a parser for one output; parseTools false means no
	// tool-call parsing (tool_choice none); streamCalls asks for tool calls
	// as they are parsed rather than when their block closes
	// (parse.Options.StreamCalls).
	newParser func(thinking, parseTools, streamCalls bool, tools []Tool) outputParser
	// thinkEnd is the id of </think> (-1: none): it ends reasoning.
	thinkEnd int32
	// toolPrefix returns the text that opens a call of name (or, for "",
	// any function's name): forced for tool_choice required / named.
	// nil: forcing is not supported and tool_choice only shapes the prompt.
	toolPrefix func(name string) string
	// maxPromptBytes bounds the rendered prompt.
	maxPromptBytes int
}

// ErrNoChat is returned by Chat and Complete on an Engine built without a
// tokenizer.
var ErrNoChat = fmt.Errorf("dsv4: engine has no tokenizer: chat and completions are unavailable")

// thinkingMode reads chat_template_kwargs thinking / enable_thinking with
// Jinja's truthiness (template.Truthy): a Jinja chat template, and
// apply_chat_template's kwargs, test them as `{% if thinking %}`.
func (r *ChatRequest) thinkingMode() bool {
	for _, k := range []string{"thinking", "enable_thinking"} {
		if template.Truthy(r.ChatTemplateKwargs[k]) {
			return true
		}
	}
	return false
}

// generationPrompt is add_generation_prompt with its default (true),
// false when the final message is continued.
func (r *ChatRequest) generationPrompt() bool {
	return !r.ContinueFinalMessage && (r.AddGenerationPrompt == nil || *r.AddGenerationPrompt)
}

// echoText is the text that echo puts before the reply: the last
// message's content when its role is the one vLLM answers with
// (get_chat_request_role), else "".
func (r *ChatRequest) echoText() string {
	if !r.Echo || len(r.Messages) == 0 {
		return ""
	}
	last := &r.Messages[len(r.Messages)-1]
	role := "assistant"
	if !r.generationPrompt() {
		role = last.Role
	}
	if last.Role != role {
		return ""
	}
	if last.ContentParts == nil {
		return last.Content
	}
	var texts []string
	for _, p := range last.ContentParts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// toolChoice returns the effective tool_choice mode and function name.
func (r *ChatRequest) toolChoice() (string, string) {
	if r.ToolChoice == nil {
		if len(r.Tools) > 0 {
			return "auto", ""
		}
		return "none", ""
	}
	return r.ToolChoice.Mode, r.ToolChoice.Function
}

// Sampling converts the request's sampling fields. Defaults follow the
// OpenAI API (temperature 1, top_p 1).
func (r *ChatRequest) Sampling() (SamplingParams, error) {
	if r == nil {
		return SamplingParams{}, paramErr("request", "nil request")
	}
	p := SamplingParams{
		Temperature:      1,
		MinP:             r.MinP,
		Seed:             r.Seed,
		PresencePenalty:  r.PresencePenalty,
		FrequencyPenalty: r.FrequencyPenalty,
		MinTokens:        r.MinTokens,
		StopTokenIDs:     r.StopTokenIDs,
		IgnoreEOS:        r.IgnoreEOS,
		Stop:             r.Stop,
		Logprobs:         r.Logprobs,

		IncludeStopStrInOutput: r.IncludeStopStrInOutput,
	}
	if r.Temperature != nil {
		p.Temperature = *r.Temperature
	}
	if r.RepetitionPenalty != nil {
		// vLLM (SamplingParams._verify_args) rejects <= 0; SamplingParams
		// reads 0 as "unset", so an explicit 0 is refused here.
		if rp := *r.RepetitionPenalty; !(rp > 0) {
			return p, paramErr("repetition_penalty", "must be in (0, 10], got %v", rp)
		}
		p.RepetitionPenalty = *r.RepetitionPenalty
	}
	if r.TopP != nil {
		p.TopP = *r.TopP
		if p.TopP == 0 {
			return p, paramErr("top_p", "must be in (0, 1]")
		}
	}
	if r.TopK != nil {
		p.TopK = max(*r.TopK, 0)
		if *r.TopK < -1 {
			return p, paramErr("top_k", "must be -1 or ≥ 0")
		}
	}
	switch {
	case r.MaxCompletionTokens != nil:
		if *r.MaxCompletionTokens < 1 {
			return p, paramErr("max_completion_tokens", "must be ≥ 1, got %d", *r.MaxCompletionTokens)
		}
		p.MaxTokens = *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		if *r.MaxTokens < 1 {
			return p, paramErr("max_tokens", "must be ≥ 1, got %d", *r.MaxTokens)
		}
		p.MaxTokens = *r.MaxTokens
	}
	if r.TopLogprobs != nil {
		if !r.Logprobs && *r.TopLogprobs > 0 {
			return p, paramErr("top_logprobs", "requires logprobs: true")
		}
		p.TopLogprobs = *r.TopLogprobs
	}
	if r.PromptLogprobs != nil {
		k := *r.PromptLogprobs
		p.PromptLogprobs = &k
	}
	if len(r.LogitBias) > 0 {
		p.LogitBias = make(map[int32]float64, len(r.LogitBias))
		for k, v := range r.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return p, paramErr("logit_bias", "key %q is not a token id", k)
			}
			p.LogitBias[int32(id)] = v
		}
	}
	return p, p.Validate(0)
}

// MaxChoices bounds n.
const MaxChoices = 16

// chatConstraints are a chat request's compiled output constraints.
type chatConstraints struct {
	con   *OutputConstraint // response_format or structured_outputs (nil: none)
	tcon  *OutputConstraint // tool_choice's (nil: none)
	tname string            // the function a named tool_choice's output is the arguments of
}

// validate checks r and compiles its constraints into cons, each once
// (taken from cc where cc has it; nil cc compiles them anew).
func (r *ChatRequest) validate(cc *constraintCache, cons *chatConstraints) error {
	if len(r.Messages) == 0 {
		return paramErr("messages", "must not be empty")
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool", "latest_reminder":
		default:
			return paramErr(fmt.Sprintf("messages[%d].role", i), "unknown role %q", m.Role)
		}
		for _, p := range m.ContentParts {
			if p.Type != "text" && m.Role != "tool" {
				return paramErr(fmt.Sprintf("messages[%d].content", i), "unsupported content part type %q", p.Type)
			}
		}
	}
	if r.ContinueFinalMessage {
		if r.AddGenerationPrompt != nil && *r.AddGenerationPrompt {
			return paramErr("continue_final_message", "cannot set both continue_final_message and add_generation_prompt to true")
		}
		last := r.Messages[len(r.Messages)-1]
		if last.Role != "assistant" {
			return paramErr("continue_final_message", "continue_final_message needs the last message to be an assistant message, got role %q", last.Role)
		}
		if len(last.ToolCalls) > 0 {
			return paramErr("continue_final_message", "the final assistant message has tool_calls: there is no text to continue")
		}
	}
	if r.Tools != nil && len(r.Tools) == 0 {
		// vLLM's check_tool_usage (and OpenAI) refuse an empty array.
		return paramErr("tools", "must not be an empty array: give at least one tool or leave tools out")
	}
	names := map[string]bool{}
	for i, t := range r.Tools {
		if t.Type != "function" {
			return paramErr(fmt.Sprintf("tools[%d].type", i), "must be \"function\", got %q", t.Type)
		}
		if err := checkToolName(t.Function.Name); err != nil {
			return paramErr(fmt.Sprintf("tools[%d].function.name", i), "%s", err)
		}
		if names[t.Function.Name] {
			return paramErr(fmt.Sprintf("tools[%d].function.name", i), "duplicate tool name %q", t.Function.Name)
		}
		if err := checkToolParameters(t.Function.Parameters); err != nil {
			return paramErr(fmt.Sprintf("tools[%d].function.parameters", i), "%s", err)
		}
		names[t.Function.Name] = true
	}
	var err error
	if cons.con, err = r.constraint(cc); err != nil {
		return err
	}
	if cons.tcon, cons.tname, err = r.toolConstraint(cc); err != nil {
		return err
	}
	mode, name := r.toolChoice()
	switch mode {
	case "auto", "required":
		// vLLM's check_tool_usage: any tool_choice but "none" needs tools.
		if len(r.Tools) == 0 {
			return paramErr("tool_choice", "%q needs tools", mode)
		}
	case "function":
		if !names[name] {
			return paramErr("tool_choice", "function %q is not among the tools", name)
		}
	}
	if r.N != nil && (*r.N < 1 || *r.N > MaxChoices) {
		return paramErr("n", "must be in [1, %d], got %d", MaxChoices, *r.N)
	}
	if err := checkPromptLogprobsStream(r.PromptLogprobs, r.Stream); err != nil {
		return err
	}
	if err := checkStreamOptions(r.StreamOptions, r.Stream); err != nil {
		return err
	}
	switch strings.ToLower(r.ReasoningEffort) {
	case "", "low", "medium", "high", "max", "xhigh", "minimal", "none":
	default:
		return paramErr("reasoning_effort", "unknown value %q", r.ReasoningEffort)
	}
	return nil
}

// chatRun is a prepared chat request: prompt ids and per-choice settings.
type chatRun struct {
	e          *Engine
	req        *ChatRequest
	p          SamplingParams
	prompt     []int32
	thinking   bool // thinking mode (chat_template_kwargs)
	reasoning  bool // the output starts inside reasoning (thinking mode, prompt ends in a think block)
	tools      []Tool
	parseTools bool
	prefix     string // forced output text already in the prompt
	forceAfter []int32
	n          int
	parallel   bool
	prompts    [][]int32 // one per prompt of a batch; choices i*n..i*n+n-1
	completion bool      // /v1/completions: no role, no parsing
	echo       []string  // completion echo: prompt text per prompt; chat echo: the last message's text
	echoOnly   bool      // completion echo with max_tokens 0: the one generated token is dropped
	conAfter   int32     // with p.Constraint: the token that activates it (</think>), -1: from the start
	// named is the function whose arguments the output is (a named
	// tool_choice, enforced by toolConstraint): the content is turned into
	// one tool call's arguments, finish_reason "stop" as in vLLM. "": none.
	named string
	// toolArray: the output is tool_choice "required"'s JSON array of
	// {"name", "parameters"} objects (enforced by toolConstraint); each
	// element is turned into one tool call.
	toolArray bool
	// streamCalls: parsed tool calls are sent as they are parsed (header,
	// then argument fragments), as vLLM streams them; set for a streamed
	// request (ChatRequest.Stream), not for Chat, whose answer keeps the
	// block-at-once parse.
	streamCalls bool
}

// constrainedTools reports whether tool_choice constrains the output to
// JSON that is turned into tool calls (no DSML forced or parsed).
func (run *chatRun) constrainedTools() bool { return run.named != "" || run.toolArray }

func (e *Engine) prepareChat(req *ChatRequest) (*chatRun, error) {
	if e == nil {
		return nil, errNilEngine
	}
	if req == nil {
		return nil, paramErr("request", "nil request")
	}
	c := e.chat
	if c == nil {
		return nil, ErrNoChat
	}
	var cons chatConstraints
	if err := req.validate(e.cons, &cons); err != nil {
		return nil, err
	}
	p, err := req.Sampling()
	if err != nil {
		return nil, err
	}
	if err := p.Validate(e.b.VocabSize()); err != nil {
		return nil, err
	}
	if req.Stream {
		p.PromptLogprobs = nil // 0 (the only value allowed): a stream has no place for them
	}
	run := &chatRun{e: e, req: req, p: p, thinking: req.thinkingMode(), n: 1, parallel: true}
	if req.N != nil {
		run.n = *req.N
	}
	if req.ParallelToolCalls != nil {
		run.parallel = *req.ParallelToolCalls
	}
	mode, name := req.toolChoice()
	if mode != "none" {
		run.tools = req.Tools
		run.parseTools = true
	}
	tcon, tname := cons.tcon, cons.tname
	if tcon != nil && e.constraintVocab() != nil && (!run.thinking || c.thinkEnd >= 0) {
		// As vLLM: the output is the function's arguments, constrained to
		// its parameters schema, or (required) the array of calls; no
		// DSML is forced or parsed.
		if tname == "" {
			run.toolArray = true
		}
		run.named = tname
		run.parseTools = false
	}
	text, err := c.render(req, run.thinking, run.tools)
	if err != nil {
		return nil, err
	}
	run.reasoning = run.thinking
	if !req.generationPrompt() {
		// The prompt does not end with a fresh opening: the output starts
		// in reasoning only if the prompt ends inside a think block (a
		// continued message whose reasoning is open).
		run.reasoning = run.thinking && strings.LastIndex(text, template.ThinkStart) > strings.LastIndex(text, template.ThinkEnd)
	}
	if c.maxPromptBytes > 0 && len(text) > c.maxPromptBytes {
		return nil, fmt.Errorf("%w: prompt of %d bytes", ErrContextLength, len(text))
	}
	ids, err := c.tok.Encode(text)
	if err != nil {
		return nil, err
	}
	if !run.constrainedTools() && (mode == "required" || mode == "function") && c.toolPrefix != nil {
		pre := c.toolPrefix(name)
		pids, err := c.tok.Encode(pre)
		if err != nil {
			return nil, err
		}
		if run.reasoning && c.thinkEnd >= 0 {
			run.forceAfter = pids
		} else {
			run.prefix = pre
			ids = append(ids, pids...)
		}
	}
	if echo := req.echoText(); echo != "" {
		run.echo = []string{echo}
	}
	run.prompt = ids
	con := cons.con
	run.conAfter = -1
	if run.constrainedTools() {
		con = tcon
	}
	switch {
	case con == nil, !run.constrainedTools() && (mode == "required" || mode == "function"):
		// A forced tool call is the output then, as vLLM gives the tool's
		// schema precedence over response_format.
	case run.reasoning && c.thinkEnd < 0:
		// The end of the reasoning cannot be told: not enforced.
	case e.constraintVocab() != nil:
		run.p.Constraint = con
		if run.reasoning {
			// As vLLM's structured outputs with a reasoning parser: the
			// grammar applies from the end of the reasoning on.
			run.conAfter = c.thinkEnd
		}
	}
	return run, nil
}

// toolConstraint returns the output constraint that tool_choice imposes
// and the function it names, as vLLM's get_json_schema_from_tools
// (tool_parsers/utils.py) builds it: for a named function, the function's
// parameters schema; for "required" (one tool or several: vLLM builds the
// array whatever the number of tools, so that one tool may be called
// several times), vLLM's array: {"type": "array", "minItems": 1, "items":
// {"anyOf": [...]}} with one alternative per tool, {"properties": {"name":
// {"type": "string", "enum": [NAME]}, "parameters": PARAMETERS},
// "required": ["name", "parameters"]}, and the tools' $defs gathered at
// the top (the same name with different schemas is a *ParamError, as vLLM
// refuses it); the name returned is "" then. A function without
// parameters gets any JSON object (vLLM leaves a named one unconstrained
// and gives {"type": "object", "properties": {}} in the array; arguments
// must be an object). A schema outside JSONSchemaConstraint's subset is a
// *ParamError naming tools[i].function.parameters and the keyword, as
// response_format's is; under "required", more tools than
// jsongrammar.MaxLive (128), or an array schema over
// JSONSchemaConstraint's limits (MaxSchemaBytes...), is a *ParamError on
// tools. Constraints come from cc (nil: compiled anew).
func (r *ChatRequest) toolConstraint(cc *constraintCache) (*OutputConstraint, string, error) {
	mode, name := r.toolChoice()
	switch {
	case mode == "function":
	case mode == "required" && len(r.Tools) > 0:
		con, err := r.toolArrayConstraint(cc)
		return con, "", err
	default:
		return nil, "", nil
	}
	for i, t := range r.Tools {
		if t.Function.Name != name {
			continue
		}
		ps := bytes.TrimSpace(t.Function.Parameters)
		if len(ps) == 0 || bytes.Equal(ps, []byte("null")) {
			return cc.jsonObject(), name, nil
		}
		con, err := compileSchema(cc, ps, fmt.Sprintf("tools[%d].function.parameters", i))
		if err != nil {
			return nil, "", err
		}
		return con, name, nil
	}
	return nil, "", nil // an unknown name: validate reports it
}

// toolArrayConstraint compiles tool_choice "required"'s array schema over
// r.Tools (see toolConstraint), or takes it from cc.
func (r *ChatRequest) toolArrayConstraint(cc *constraintCache) (*OutputConstraint, error) {
	if len(r.Tools) > jsongrammar.MaxLive {
		return nil, paramErr("tools", "tool_choice \"required\" supports at most %d tools, got %d", jsongrammar.MaxLive, len(r.Tools))
	}
	defs := map[string]json.RawMessage{}
	owner := map[string]int{} // $defs name -> the first tool that has it
	alts := make([]json.RawMessage, len(r.Tools))
	for i, t := range r.Tools {
		param := fmt.Sprintf("tools[%d].function.parameters", i)
		ps := bytes.TrimSpace(t.Function.Parameters)
		if len(ps) == 0 || bytes.Equal(ps, []byte("null")) {
			ps = []byte(`{"type":"object","properties":{}}`)
		} else {
			// The tools are compiled once, together (each alone first cost
			// up to the pattern budget per tool: 12.9 s for 128 tools);
			// arrayParamError names the tool of an error.
			var top map[string]json.RawMessage
			if err := json.Unmarshal(ps, &top); err != nil {
				return nil, paramErr(param, "must be a JSON object (a JSON Schema)")
			}
			if d, ok := top["$defs"]; ok {
				var ds map[string]json.RawMessage
				if err := json.Unmarshal(d, &ds); err != nil {
					return nil, paramErr(param, "$defs must be an object")
				}
				for k, v := range ds {
					if old, ok := defs[k]; ok {
						if !sameJSON(old, v) {
							return nil, paramErr(param, "$defs %q differs from another tool's: not supported (vLLM refuses it too)", k)
						}
						continue
					}
					defs[k] = v
					owner[k] = i
				}
				delete(top, "$defs")
				var err error
				if ps, err = json.Marshal(top); err != nil {
					return nil, paramErr(param, "%s", err)
				}
			}
		}
		name, _ := json.Marshal(t.Function.Name)
		alts[i] = json.RawMessage(fmt.Sprintf(`{"properties":{"name":{"type":"string","enum":[%s]},"parameters":%s},"required":["name","parameters"]}`, name, ps))
	}
	schema := map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"anyOf": alts}}
	if len(defs) > 0 {
		schema["$defs"] = defs
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, paramErr("tools", "%s", err)
	}
	con, err := cc.schema(b)
	if err != nil {
		return nil, arrayParamError(err, owner)
	}
	return con, nil
}

// arrayParamError turns an error compiling tool_choice "required"'s array
// schema into a *ParamError on the tool at fault, its path relative to
// the tool's parameters: an error under /items/anyOf/I/properties/
// parameters is tool I's, one under /$defs/NAME the first tool with
// that definition's, any other (a limit on the whole array) is on tools.
func arrayParamError(err error, owner map[string]int) error {
	e, ok := err.(*jsongrammar.Error)
	if !ok {
		return &ParamError{Param: "tools", Msg: err.Error()}
	}
	param := func(i int) string { return fmt.Sprintf("tools[%d].function.parameters", i) }
	if rest, ok := strings.CutPrefix(e.Path, "/items/anyOf/"); ok {
		num, rest, _ := strings.Cut(rest, "/")
		i, err := strconv.Atoi(num)
		if rest, ok := strings.CutPrefix("/"+rest, "/properties/parameters"); ok && err == nil && (rest == "" || rest[0] == '/') {
			te := *e
			te.Path = rest
			return &ParamError{Param: param(i), Msg: te.Error()}
		}
	}
	if rest, ok := strings.CutPrefix(e.Path, "/$defs/"); ok {
		name, _, _ := strings.Cut(rest, "/")
		name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
		if i, ok := owner[name]; ok {
			return &ParamError{Param: param(i), Msg: e.Error()}
		}
	}
	return &ParamError{Param: "tools", Msg: e.Error()}
}

// sameJSON reports whether two JSON texts hold equal values (object keys
// in any order), as Python compares the dicts.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// constraint returns the output constraint of response_format or
// structured_outputs (nil: none), from cc (nil: compiled anew).
func (r *ChatRequest) constraint(cc *constraintCache) (*OutputConstraint, error) {
	return requestConstraint(cc, r.ResponseFormat, &r.RequestSampling)
}

// tokenStop returns matched_stop and stop_reason of a step that stop token
// id ended: matched_stop is the id; stop_reason is the id for a
// stop_token_ids hit (or any stop token under ignore_eos) and null for
// EOS, as vLLM sets them.
func (run *chatRun) tokenStop(id int32) (matched, stopReason any) {
	if run.p.IgnoreEOS || !slices.Contains(run.e.b.EOS(), id) {
		return id, id
	}
	return id, nil
}

// forcer returns the scheduler hook that forces the tool-call opening after
// </think> in thinking mode.
func (run *chatRun) forcer() func(int32) []int32 {
	if len(run.forceAfter) == 0 {
		return nil
	}
	fired := false
	end := run.e.chat.thinkEnd
	return func(tok int32) []int32 {
		if fired || tok != end {
			return nil
		}
		fired = true
		return run.forceAfter
	}
}

// Chat runs a chat request to completion: the messages are rendered with
// the model's chat encoding, generated (n choices, continuous batching with
// other requests), and parsed into reasoning_content, content and
// tool_calls. Errors wrapping ErrInvalidParams (bad request),
// ErrContextLength, ErrRequestTooLarge, ErrQueueFull and ErrEngineClosed
// come before generation (a nil req or Engine: ErrInvalidParams); ctx
// cancellation stops it, frees its state and returns ctx.Err(), never a
// partial response.
func (e *Engine) Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error) {
	if e != nil && ctx == nil {
		return nil, errNilContext
	}
	stream, err := e.chatStream(ctx, req, false)
	if err != nil {
		return nil, err
	}
	var acc ChatAccumulator
	for ch, err := range stream {
		if err != nil {
			return nil, err
		}
		acc.Add(ch)
	}
	return acc.Response(), nil
}

// ChatAccumulator folds ChatStream chunks into a ChatResponse, as an
// OpenAI client does: texts concatenate, tool calls collect by index.
// The zero value is ready to use.
type ChatAccumulator struct {
	choices []ChatChoice
	accs    []*chatAcc
	usage   Usage
	prompt  []PromptPosition
}

type chatAcc struct {
	content, reasoning strings.Builder
	calls              []ToolCall
}

// Add folds one chunk in (a nil chunk is ignored).
func (a *ChatAccumulator) Add(ch *ChatChunk) {
	if ch == nil {
		return
	}
	if ch.Usage != nil {
		a.usage = *ch.Usage
		return
	}
	if ch.Index < 0 || ch.Index >= MaxChoices*MaxPromptBatch {
		return
	}
	for ch.Index >= len(a.choices) {
		a.choices = append(a.choices, ChatChoice{Index: len(a.choices), Message: ChatMessage{Role: "assistant"}})
		a.accs = append(a.accs, &chatAcc{})
	}
	c, acc := &a.choices[ch.Index], a.accs[ch.Index]
	if ch.PromptLogprobs != nil {
		a.prompt = ch.PromptLogprobs
	}
	acc.content.WriteString(ch.Delta.Content)
	acc.reasoning.WriteString(ch.Delta.ReasoningContent)
	for _, tc := range ch.Delta.ToolCalls {
		if tc.Index < 0 || tc.Index > 1<<16 {
			continue
		}
		for tc.Index >= len(acc.calls) {
			acc.calls = append(acc.calls, ToolCall{Type: "function"})
		}
		call := &acc.calls[tc.Index]
		if tc.ID != "" {
			call.ID = tc.ID
		}
		call.Function.Name += tc.Function.Name
		call.Function.Arguments += tc.Function.Arguments
	}
	if ch.Logprobs != nil {
		if c.Logprobs == nil {
			c.Logprobs = &ChatLogprobs{Content: []LogprobEntry{}}
		}
		c.Logprobs.Content = append(c.Logprobs.Content, ch.Logprobs.Content...)
	}
	if ch.FinishReason != "" {
		c.FinishReason = ch.FinishReason
		c.MatchedStop = ch.MatchedStop
		c.StopReason = ch.StopReason
	}
}

// Response returns the accumulated response. Content is nil (JSON null)
// when the reply is only tool calls, as OpenAI returns it, or only
// reasoning (a thinking-mode reply cut inside its reasoning or ending right
// after it), as vLLM's DeepSeek reasoning parsers ("content or None") and
// SGLang return it; an empty reply without reasoning has content "".
func (a *ChatAccumulator) Response() *ChatResponse {
	resp := &ChatResponse{Choices: make([]ChatChoice, len(a.choices)), Usage: a.usage, PromptLogprobs: a.prompt}
	for i := range a.choices {
		c, acc := a.choices[i], a.accs[i]
		content, reasoning := acc.content.String(), acc.reasoning.String()
		if content != "" || (len(acc.calls) == 0 && reasoning == "") {
			c.Message.Content = &content
		}
		if reasoning != "" {
			c.Message.ReasoningContent = &reasoning
		}
		c.Message.ToolCalls = acc.calls
		resp.Choices[i] = c
	}
	return resp
}

// ChatStream runs a chat request and returns an iterator over its chunks,
// OpenAI's streaming deltas: the first chunk of each choice carries role
// "assistant"; reasoning_content, content and tool-call fragments follow;
// each choice's last chunk carries its finish_reason ("stop", "length",
// "tool_calls"); a final chunk with Index -1 carries the Usage. With n > 1
// choices interleave. When req.Stream is set, a tool call parsed from the
// model's tool-call block comes as vLLM streams it: a delta with its
// index, id, type and name (and any argument text of the same token), then
// deltas of index and argument fragments as they are parsed, concatenating
// to its arguments (parse.Options.StreamCalls; a block cut by max_tokens or
// malformed after a call was sent is then not taken back: the call stays
// and the block's text also comes as content, where Chat answers content
// only). Without req.Stream (and in Chat) calls come when their block
// closes, so the accumulated stream always equals Chat's answer. Errors before generation are returned at once; an
// error during generation is the iterator's last element: a stream cut short
// (ctx ended: ctx.Err(); the engine closed) ends with it, never with the
// Usage chunk, so the Usage chunk means every choice finished. Breaking out of
// the loop or cancelling ctx stops every choice and frees their state. The
// choices are queued when ChatStream returns: range over the iterator (or
// cancel ctx); unread, they pause and end as Generate's do
// (EngineOptions.MaxUnread, UnreadTimeout, ErrUnreadTimeout). The iterator
// is single-use: a second range yields only (nil, ErrIteratorReused).
//
// The iterator form (Go 1.23 range-over-func) was chosen over a callback:
// the caller's loop body is the callback, break is cancellation, and the
// ordering of chunks is the caller's to see.
func (e *Engine) ChatStream(ctx context.Context, req *ChatRequest) (iter.Seq2[*ChatChunk, error], error) {
	if e != nil && ctx == nil {
		return nil, errNilContext
	}
	return e.chatStream(ctx, req, req != nil && req.Stream)
}

// chatStream is ChatStream; streamCalls sends parsed tool calls as they
// are parsed (chatRun.streamCalls).
func (e *Engine) chatStream(ctx context.Context, req *ChatRequest, streamCalls bool) (iter.Seq2[*ChatChunk, error], error) {
	run, err := e.prepareChat(req)
	if err != nil {
		return nil, err
	}
	run.prompts = [][]int32{run.prompt}
	run.streamCalls = streamCalls
	return run.stream(ctx)
}

// stream starts every choice (n per prompt) and merges their chunks.
func (run *chatRun) stream(ctx context.Context) (iter.Seq2[*ChatChunk, error], error) {
	if ctx == nil {
		return nil, errNilContext
	}
	e := run.e
	ctx, cancel := context.WithCancel(ctx)
	total := run.n * len(run.prompts)
	reqs := make([]*request, total)
	for i := range reqs {
		p := run.p
		if p.Seed != nil {
			s := *p.Seed + int64(i%run.n)
			p.Seed = &s
		}
		if !run.completion && i%run.n != 0 {
			p.PromptLogprobs = nil // chat's prompt_logprobs are the response's, from choice 0
		}
		r, err := e.start(ctx, run.prompts[i/run.n], p, run.forcer(), run.conAfter)
		if err != nil {
			cancel()
			return nil, err
		}
		reqs[i] = r
	}
	var used atomic.Bool
	return func(yield func(*ChatChunk, error) bool) {
		if used.Swap(true) {
			yield(nil, ErrIteratorReused) // single-use; never a fake chunk
			return
		}
		defer cancel()
		out := make(chan *chatChunkOrErr, 16*total)
		var wg sync.WaitGroup
		counts := make([]choiceCount, total)
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i] = run.choice(ctx, i, r, out)
			}()
		}
		go func() { wg.Wait(); close(out) }()
		ok := true
		for ch := range out {
			if !ok {
				continue // drain so the choice goroutines end
			}
			if ch.err != nil {
				yield(nil, ch.err)
				ok = false
				cancel()
				continue
			}
			if !yield(&ch.ChatChunk, nil) {
				ok = false
				cancel()
			}
		}
		if !ok {
			return
		}
		// A choice that ended without its finish chunk was cut short:
		// ctx ended (its error may have been dropped by a send that saw
		// ctx done first) or generation failed. Say so rather than end
		// the stream as if it had completed.
		for _, c := range counts {
			if !c.finished {
				err := c.err
				if err == nil {
					err = ctx.Err()
				}
				if err == nil {
					err = ErrEngineClosed
				}
				yield(nil, err)
				return
			}
		}
		u := &Usage{}
		for _, p := range run.prompts {
			u.PromptTokens += len(p)
		}
		reasoning := 0
		for _, c := range counts {
			u.CompletionTokens += c.tokens
			reasoning += c.reasoning
		}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		cached := 0
		for i := 0; i < total; i += run.n {
			most := int64(0)
			for _, r := range reqs[i : i+run.n] {
				most = max(most, r.cached.Load())
			}
			cached += int(most)
		}
		if cached > 0 {
			u.PromptTokensDetails = &PromptTokensDetails{CachedTokens: cached}
		}
		if run.thinking {
			u.CompletionTokensDetails = &CompletionTokensDetail{ReasoningTokens: reasoning}
		}
		yield(&ChatChunk{Index: -1, Usage: u}, nil)
	}, nil
}

type chatChunkOrErr = struct {
	ChatChunk
	err error
}

// choiceCount is what one choice's pipeline reports when it ends: its
// token counts, whether it sent its finish chunk, and the error that
// ended it otherwise (nil when ctx ended).
type choiceCount struct {
	tokens, reasoning int
	finished          bool
	err               error
}

// newToolCallID returns an OpenAI-style call id.
func newToolCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// choice runs one choice's pipeline: tokens → text (stop strings) → parser
// → chunks on out.
func (run *chatRun) choice(ctx context.Context, idx int, r *request, out chan<- *chatChunkOrErr) choiceCount {
	c := run.e.chat
	var cnt choiceCount
	plen := len(run.prompts[idx/run.n])
	send := func(ch *chatChunkOrErr) bool {
		if ch.err == nil {
			ch.RunningUsage = &Usage{PromptTokens: plen, CompletionTokens: cnt.tokens, TotalTokens: plen + cnt.tokens}
		}
		select {
		case out <- ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var parser outputParser = plainParser{}
	if !run.completion {
		if !send(&chatChunkOrErr{ChatChunk: ChatChunk{Index: idx, Delta: ChatDelta{Role: "assistant"}}}) {
			return cnt
		}
		parser = c.newParser(run.reasoning, run.parseTools, run.streamCalls, run.tools)
		switch {
		case run.named != "":
			parser = &namedParser{p: parser, name: run.named}
		case run.toolArray:
			parser = &arrayParser{p: parser}
		}
	}
	dec := c.tok.NewDecoder()
	stops := newStopMatcher(run.p.Stop, run.p.IncludeStopStrInOutput)
	callIDs := map[int]string{}
	sawCalls := false
	// build makes the chunk of one step's parser deltas and logprobs.
	build := func(deltas []ChatDelta, lp *ChatLogprobs) *chatChunkOrErr {
		ch := &chatChunkOrErr{ChatChunk: ChatChunk{Index: idx, Logprobs: lp}}
		d := &ch.Delta
		for _, x := range deltas {
			d.Content += x.Content
			d.ReasoningContent += x.ReasoningContent
			for _, tc := range x.ToolCalls {
				if !run.parallel && tc.Index > 0 {
					continue
				}
				sawCalls = true
				if tc.Function.Name != "" || tc.ID != "" {
					if _, ok := callIDs[tc.Index]; !ok {
						id := tc.ID
						if id == "" {
							id = newToolCallID()
						}
						callIDs[tc.Index] = id
						tc.ID = id
						tc.Type = "function"
					}
				}
				// merge fragments of the same call within one chunk
				if n := len(d.ToolCalls); n > 0 && d.ToolCalls[n-1].Index == tc.Index && tc.ID == "" {
					d.ToolCalls[n-1].Function.Arguments += tc.Function.Arguments
					continue
				}
				d.ToolCalls = append(d.ToolCalls, tc)
			}
		}
		return ch
	}
	// deliver sends a step's chunk, unless it carries nothing.
	deliver := func(deltas []ChatDelta, lp *ChatLogprobs) bool {
		ch := build(deltas, lp)
		if ch.Delta.Empty() && lp == nil {
			return true
		}
		return send(ch)
	}
	if run.prefix != "" {
		if !deliver(parser.Feed(run.prefix), nil) {
			return cnt
		}
	}
	// The echoed prompt goes first; when prompt logprobs come (with the
	// first token), it waits for them and carries them.
	echo := ""
	if run.echo != nil {
		echo = run.echo[idx/run.n]
		if run.p.PromptLogprobs == nil {
			if !deliver([]ChatDelta{{Content: echo}}, nil) {
				return cnt
			}
			echo = ""
		}
	}
	inReasoning := run.reasoning
	finish := ""
	// The last step's deltas and logprobs go in the chunk with
	// finish_reason, as vLLM streams each engine step as one chunk
	// (serving_chat.py, serving_completion.py): a choice ending on EOS has
	// that token's logprobs, and no text, in its finishing chunk.
	var lastDeltas []ChatDelta
	var lastLP *ChatLogprobs
	var matched, stopReason any
	for tok, err := range run.e.tokens(r) {
		if err != nil {
			cnt.err = err
			send(&chatChunkOrErr{err: err})
			return cnt
		}
		if tok.PromptLogprobs != nil || echo != "" {
			ch := &chatChunkOrErr{ChatChunk: ChatChunk{Index: idx, Delta: ChatDelta{Content: echo}}}
			if tok.PromptLogprobs != nil {
				ch.PromptTokens, ch.PromptLogprobs = run.e.promptPositions(run.prompts[idx/run.n], tok.PromptLogprobs)
			}
			if !send(ch) {
				return cnt
			}
			echo = ""
		}
		cnt.tokens++
		if run.echoOnly {
			// vLLM's echo_without_generation: the prompt was the whole
			// text; the token gives finish_reason and usage only.
			finish = tok.FinishReason
			if tok.StopToken {
				finish = "stop"
				matched, stopReason = run.tokenStop(tok.ID)
			}
			if finish == "" {
				finish = "length"
			}
			break
		}
		if inReasoning {
			cnt.reasoning++
			if tok.ID == c.thinkEnd {
				inReasoning = false
			}
		}
		var lp *ChatLogprobs
		if run.p.Logprobs {
			lp = &ChatLogprobs{Content: []LogprobEntry{run.e.logprobEntry(tok)}}
		}
		var text string
		if tok.StopToken {
			// vLLM V1 (detokenizer.py, BaseIncrementalDetokenizer.update)
			// leaves a stop-terminated step's last token out of the text
			// unless include_stop_str_in_output; skip_special_tokens then
			// still drops a special one (EOS).
			if run.p.IncludeStopStrInOutput && !c.tok.IsSpecial(tok.ID) {
				text = dec.Add(tok.ID)
			}
			text += dec.Flush()
			matched, stopReason = run.tokenStop(tok.ID)
			finish = "stop"
		} else {
			text = dec.Add(tok.ID)
			if tok.FinishReason != "" {
				text += dec.Flush()
				finish = tok.FinishReason
			}
		}
		var emit, hit string
		if cnt.tokens > run.p.MinTokens {
			emit, hit = stops.push(text)
		} else { // vLLM: no stop string within min_tokens
			emit = stops.skip(text)
		}
		if hit != "" {
			finish, matched, stopReason = "stop", hit, hit
		}
		if finish != "" {
			if hit == "" {
				emit += stops.flush()
			}
			lastDeltas = append(parser.Feed(emit), parser.Finish()...)
			lastLP = lp
			break
		}
		if !deliver(parser.Feed(emit), lp) {
			return cnt
		}
	}
	if finish == "" { // the iterator ended without a finish: cancelled
		return cnt
	}
	ch := build(lastDeltas, lastLP)
	if finish == "stop" && sawCalls && run.named == "" {
		// vLLM: "tool_calls" for auto and required (its array of calls),
		// "stop" for a named tool_choice.
		finish = "tool_calls"
	}
	ch.FinishReason, ch.MatchedStop, ch.StopReason = finish, matched, stopReason
	cnt.finished = send(ch)
	return cnt
}

// logprobEntry renders a token's logprobs in OpenAI's chat form.
func (e *Engine) logprobEntry(t Token) LogprobEntry {
	s := e.chat.tok.TokenString(t.ID)
	ent := LogprobEntry{Token: s, Logprob: t.Logprob, Bytes: byteInts(s), TopLogprobs: []TopLogprob{}}
	for _, a := range t.TopLogprobs {
		as := e.chat.tok.TokenString(a.ID)
		ent.TopLogprobs = append(ent.TopLogprobs, TopLogprob{Token: as, Logprob: a.Logprob, Bytes: byteInts(as)})
	}
	return ent
}

// promptPositions renders the prompt logprobs of prompt (Token.PromptLogprobs)
// as vLLM's prompt_logprobs, with each prompt token's text.
func (e *Engine) promptPositions(prompt []int32, lps []*PromptLogprob) ([]string, []PromptPosition) {
	tokens := make([]string, len(prompt))
	out := make([]PromptPosition, len(lps))
	ranked := func(id int32, lp float32, rank int) RankedLogprob {
		if math.IsInf(float64(lp), -1) {
			lp = -9999 // vLLM's clamp_prompt_logprobs: JSON has no -Infinity
		}
		return RankedLogprob{ID: id, Logprob: lp, Rank: rank, DecodedToken: e.chat.tok.TokenString(id)}
	}
	for i, id := range prompt {
		tokens[i] = e.chat.tok.TokenString(id)
		lp := lps[i]
		if lp == nil {
			continue
		}
		pos := PromptPosition{ranked(lp.ID, lp.Logprob, lp.Rank)}
		for j, t := range lp.Top {
			if t.ID == lp.ID {
				pos[0].Rank = j + 1
				continue
			}
			pos = append(pos, ranked(t.ID, t.Logprob, j+1))
		}
		out[i] = pos
	}
	return tokens, out
}

func byteInts(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// stopMatcher finds stop strings in streamed text. By default it holds
// back any suffix that may be the start of one, so that a match is cut from
// the text before any of it is released. With include (vLLM's
// include_stop_str_in_output) nothing is held back, as vLLM's detokenizer
// sets stop_buffer_length to 0 then: text is released at once, the last
// bytes released are kept to find a stop string that spans pushes, and the
// text is cut after the match (StopChecker.check_stop_strings with
// include_in_output).
type stopMatcher struct {
	stops   []string
	include bool
	held    string // withheld text that may start a stop string (!include)
	tail    string // released text kept for matching (include)
	maxLen  int    // longest stop string, in bytes
	done    bool
}

func newStopMatcher(stops []string, include bool) *stopMatcher {
	m := &stopMatcher{stops: stops, include: include}
	for _, s := range stops {
		m.maxLen = max(m.maxLen, len(s))
	}
	return m
}

// push adds text and returns what can be released; on a match it returns
// the text up to the match (without it, or with it when include) and the
// stop string. A match ends in text (vLLM searches only the window that
// the new text can complete: check_stop_strings' new_char_count).
func (m *stopMatcher) push(text string) (string, string) { return m.add(text, true) }

// skip adds text in which no stop string is looked for: the output of the
// first min_tokens tokens (vLLM's detokenizer checks stop strings only
// once more than min_tokens tokens were generated, and a later match must
// end after this text). It returns what can be released.
func (m *stopMatcher) skip(text string) string {
	out, _ := m.add(text, false)
	return out
}

func (m *stopMatcher) add(text string, search bool) (string, string) {
	if m.done {
		return "", ""
	}
	if len(m.stops) == 0 {
		return text, ""
	}
	prev := m.held
	if m.include {
		prev = m.tail
	}
	buf := prev + text
	best, hit := -1, ""
	for _, s := range m.stops {
		if !search {
			break
		}
		from := max(len(prev)-len(s)+1, 0) // the match must end in text
		if i := strings.Index(buf[from:], s); i >= 0 && (best < 0 || from+i < best) {
			best, hit = from+i, s
		}
	}
	if best >= 0 {
		m.done = true
		m.held, m.tail = "", ""
		if m.include {
			// The match ends in text: one within the tail alone was
			// found by an earlier push.
			return buf[len(prev):max(best+len(hit), len(prev))], hit
		}
		return buf[:best], hit
	}
	if m.include {
		m.tail = buf[max(len(buf)-(m.maxLen-1), 0):]
		return text, ""
	}
	hold := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(buf)); k > hold; k-- {
			if strings.HasSuffix(buf, s[:k]) {
				hold = k
				break
			}
		}
	}
	m.held = buf[len(buf)-hold:]
	return buf[:len(buf)-hold], ""
}

// flush releases the held-back text at the end of the output.
func (m *stopMatcher) flush() string {
	s := m.held
	m.held = ""
	return s
}

// MaxToolNameLen is the longest tool function name accepted (OpenAI's
// limit: names match ^[a-zA-Z0-9_-]{1,64}$).
const MaxToolNameLen = 64

// checkToolName enforces OpenAI's function-name rule, ^[a-zA-Z0-9_-]{1,64}$,
// so a name cannot smuggle quotes or special-token literals into the
// prompt's tools block.
func checkToolName(name string) error {
	if name == "" {
		return errors.New("must not be empty")
	}
	if len(name) > MaxToolNameLen {
		return fmt.Errorf("must be at most %d characters, got %d", MaxToolNameLen, len(name))
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return fmt.Errorf("must match ^[a-zA-Z0-9_-]{1,64}$, got %q", name)
		}
	}
	return nil
}

// checkToolParameters accepts an absent or null parameters (no
// arguments; vLLM's FunctionDefinition.parameters is Optional[dict]) or a
// JSON object (a JSON Schema), as OpenAI's API requires; a string, number,
// array or boolean is refused.
func checkToolParameters(raw json.RawMessage) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	if t[0] != '{' {
		return fmt.Errorf("must be a JSON object (a JSON Schema), got %s", jsonKind(t))
	}
	return nil
}

// namedParser turns the content of a constrained tool_choice output into
// the arguments of one call of name, as vLLM streams a named tool_choice:
// the first fragment carries the call's id, type and name with the first
// arguments text, later ones only arguments; reasoning passes through.
// vLLM gives the call the choice's index; here it is 0, the call's index
// within its choice, as OpenAI's clients accumulate it.
type namedParser struct {
	p       outputParser
	name    string
	started bool
}

// Feed implements outputParser.
func (n *namedParser) Feed(text string) []ChatDelta { return n.convert(n.p.Feed(text), false) }

// Finish implements outputParser: a call is always returned, with empty
// arguments when no content came (a max_tokens cut before any).
func (n *namedParser) Finish() []ChatDelta { return n.convert(n.p.Finish(), true) }

func (n *namedParser) convert(ds []ChatDelta, last bool) []ChatDelta {
	out := ds[:0:0]
	for _, d := range ds {
		args := d.Content
		d.Content = ""
		for _, tc := range d.ToolCalls { // none: tool calls are not parsed
			args += tc.Function.Arguments
		}
		d.ToolCalls = nil
		if args != "" || (last && !n.started) {
			tc := ToolCallDelta{Function: FunctionCallDelta{Arguments: args}}
			if !n.started {
				tc.Function.Name = n.name
				n.started = true
			}
			d.ToolCalls = []ToolCallDelta{tc}
		}
		if !d.Empty() {
			out = append(out, d)
		}
	}
	if last && !n.started {
		n.started = true
		out = append(out, ChatDelta{ToolCalls: []ToolCallDelta{{Function: FunctionCallDelta{Name: n.name}}}})
	}
	return out
}

// arrayParser turns the content of tool_choice "required" with several
// tools, a JSON array of {"name": NAME, "parameters": ARGUMENTS} objects
// (constrained by toolConstraint), into tool calls, one per element in
// array order (index i for element i), as vLLM's serving_chat streams
// required: a call's first fragment carries its id, type and name once
// the name's string is complete, later fragments the text of its
// parameters value as it comes. The arguments are that text byte for byte
// (vLLM's non-streaming path re-serializes them with json.dumps; the value
// is the same). Reasoning passes through; content outside the elements'
// parameters is dropped, and an element cut before its name is complete
// gives no call.
type arrayParser struct {
	p      outputParser
	depth  int  // open arrays and objects, outside strings
	str    bool // inside a string
	esc    bool // after a backslash inside a string
	item   int  // elements opened so far; the current one is item-1
	phase  int  // where in the current element (arr* below)
	key    []byte
	name   []byte
	scalar bool // the parameters are a number or literal
	named  bool // the current element's call was announced
}

// Phases of arrayParser within an element (depth 2: inside its braces).
const (
	arrKey0   = iota // before a key
	arrKey           // inside a key
	arrColon         // after a key
	arrValue         // after the colon
	arrName          // inside the name's string
	arrParams        // inside the parameters' value
	arrOther         // inside another value (none under the constraint)
)

// Feed implements outputParser.
func (a *arrayParser) Feed(text string) []ChatDelta { return a.convert(a.p.Feed(text)) }

// Finish implements outputParser.
func (a *arrayParser) Finish() []ChatDelta { return a.convert(a.p.Finish()) }

func (a *arrayParser) convert(ds []ChatDelta) []ChatDelta {
	out := ds[:0:0]
	for _, d := range ds {
		text := d.Content
		d.Content, d.ToolCalls = "", nil
		if !d.Empty() {
			out = append(out, d)
		}
		if calls := a.scan(text); len(calls) > 0 {
			out = append(out, ChatDelta{ToolCalls: calls})
		}
	}
	return out
}

// scan advances over content text and returns the tool-call fragments it
// completes.
func (a *arrayParser) scan(text string) []ToolCallDelta {
	var calls []ToolCallDelta
	start := -1 // where the current parameters text begins in text
	if a.phase == arrParams {
		start = 0
	}
	emit := func(end int) { // the parameters text up to end
		if a.named && start >= 0 && end > start {
			calls = append(calls, ToolCallDelta{Index: a.item - 1, Function: FunctionCallDelta{Arguments: text[start:end]}})
		}
		start = -1
	}
	value := func(i int, scalar bool) { // a value starts at i
		switch string(a.key) {
		case "parameters":
			a.phase, a.scalar, start = arrParams, scalar, i
		default:
			a.phase = arrOther
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if a.str {
			end := false
			switch {
			case a.esc:
				a.esc = false
			case c == '\\':
				a.esc = true
			case c == '"':
				a.str, end = false, true
			}
			switch a.phase {
			case arrKey:
				if end {
					a.phase = arrColon
				} else {
					a.key = append(a.key, c)
				}
			case arrName:
				if !end {
					a.name = append(a.name, c)
					break
				}
				a.phase = arrOther
				var name string
				if json.Unmarshal(append(append([]byte{'"'}, a.name...), '"'), &name) == nil && name != "" && !a.named {
					a.named = true
					calls = append(calls, ToolCallDelta{Index: a.item - 1, Function: FunctionCallDelta{Name: name}})
				}
			case arrParams:
				if end && a.depth == 2 {
					emit(i + 1)
					a.phase = arrOther
				}
			}
			continue
		}
		isWS := c == ' ' || c == '\n' || c == '\t' || c == '\r'
		if a.phase == arrParams && a.scalar && (isWS || c == ',' || c == '}') {
			emit(i)
			a.phase, a.scalar = arrOther, false
		}
		switch {
		case c == '"':
			a.str = true
			if a.depth == 2 {
				switch a.phase {
				case arrKey0:
					a.phase, a.key = arrKey, a.key[:0]
				case arrValue:
					if string(a.key) == "name" {
						a.phase, a.name = arrName, a.name[:0]
					} else {
						value(i, false)
					}
				}
			}
		case c == '{' || c == '[':
			switch {
			case a.depth == 1 && c == '{':
				a.item++
				a.phase, a.named = arrKey0, false
			case a.depth == 2 && a.phase == arrValue:
				value(i, false)
			}
			a.depth++
		case c == '}' || c == ']':
			a.depth--
			if a.depth == 2 && a.phase == arrParams {
				emit(i + 1)
				a.phase = arrOther
			}
		case c == ':':
			if a.depth == 2 && a.phase == arrColon {
				a.phase = arrValue
			}
		case c == ',':
			if a.depth == 2 {
				a.phase = arrKey0
			}
		case isWS:
		default:
			if a.depth == 2 && a.phase == arrValue {
				value(i, true)
			}
		}
	}
	if a.phase == arrParams {
		emit(len(text))
	}
	return calls
}
