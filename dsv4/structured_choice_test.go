package dsv4_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/regexgrammar"
)

// choiceRegexCases are the choice and regex constraints of the end-to-end
// tests, through structured_outputs and the legacy guided_* fields.
var choiceRegexCases = []struct {
	name    string
	so      string // structured_outputs JSON, or "" for the legacy fields
	choice  []string
	pattern string
}{
	{"choice", `{"choice":["positive","negative","neutral"]}`, []string{"positive", "negative", "neutral"}, ""},
	{"guided_choice", "", []string{"yes", "no", "très bien 😀", "maybe later"}, ""},
	{"regex", `{"regex":"\\d{3}-[a-z]{2,5}"}`, nil, `\d{3}-[a-z]{2,5}`},
	{"guided_regex", "", nil, `^(yes|no), because [a-zé ]{1,12}\.$`},
	{"regex open", `{"regex":"[A-Za-z]+( [A-Za-z]+)*"}`, nil, `[A-Za-z]+( [A-Za-z]+)*`},
}

// setChoiceRegex sets case c on s.
func setChoiceRegex(t *testing.T, s *dsv4.RequestSampling, so string, choice []string, pattern string) {
	t.Helper()
	switch {
	case so != "":
		s.StructuredOutputs = new(dsv4.StructuredOutputs)
		if err := json.Unmarshal([]byte(so), s.StructuredOutputs); err != nil {
			t.Fatal(err)
		}
	case choice != nil:
		s.GuidedChoice = choice
	default:
		s.GuidedRegex = &pattern
	}
}

// checkChoiceRegex checks one output: with "stop" a full match (the
// package's matcher and Go's regexp agree; for choices, one of them), with
// "length" a viable prefix.
func checkChoiceRegex(t *testing.T, choice []string, pattern, out, finish string) {
	t.Helper()
	var g *regexgrammar.Grammar
	var err error
	if choice != nil {
		g, err = regexgrammar.Choice(choice)
	} else {
		g, err = regexgrammar.Compile(pattern)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := g.Start()
	if !st.FeedBytes([]byte(out)) {
		t.Fatalf("%q (finish %s) does not follow %q%q", out, finish, pattern, choice)
	}
	switch finish {
	case "stop":
		if !st.Accepting() {
			t.Fatalf("%q finished with stop but is not a match", out)
		}
		if choice != nil && !slices.Contains(choice, out) {
			t.Fatalf("%q is not one of %q", out, choice)
		}
		if choice == nil && !regexp.MustCompile(`^(?:`+pattern+`)$`).MatchString(out) {
			t.Fatalf("%q does not match %q for regexp", out, pattern)
		}
	case "length":
	default:
		t.Fatalf("finish %q for %q", finish, out)
	}
}

// TestChoiceRegexOutputs runs structured_outputs choice / regex and the
// legacy guided_choice / guided_regex on the embedded model: greedy and
// sampled (3 seeds), n = 2, streamed and not; every output is one of the
// choices or matches the pattern in full when it ends with "stop", and the
// streamed text equals the other.
func TestChoiceRegexOutputs(t *testing.T) {
	e := tinyEngine(t)
	stops := 0
	for _, c := range choiceRegexCases {
		for _, temp := range []float64{0, 1} {
			for seed := int64(1); seed <= 3; seed++ {
				if temp == 0 && seed > 1 {
					break
				}
				t.Run(fmt.Sprintf("%s/T%v/seed%d", c.name, temp, seed), func(t *testing.T) {
					req := func(stream bool) *dsv4.ChatRequest {
						r := &dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: "Is this review positive? Answer."}}, Stream: stream}
						setChoiceRegex(t, &r.RequestSampling, c.so, c.choice, c.pattern)
						mx, n := 24, 2
						r.Temperature, r.Seed, r.MaxTokens, r.N = &temp, &seed, &mx, &n
						r.Logprobs = true
						return r
					}
					resp, err := e.Chat(context.Background(), req(false))
					if err != nil {
						t.Fatal(err)
					}
					sresp := streamedResponse(t, e, req(true))
					for i, ch := range resp.Choices {
						out := *ch.Message.Content
						checkChoiceRegex(t, c.choice, c.pattern, out, ch.FinishReason)
						if c.choice != nil && ch.FinishReason != "stop" {
							t.Errorf("choice output %q finished %q", out, ch.FinishReason)
						}
						if ch.FinishReason == "stop" {
							stops++
						}
						if s := *sresp.Choices[i].Message.Content; s != out || sresp.Choices[i].FinishReason != ch.FinishReason {
							t.Errorf("choice %d: streamed %q (%s), not streamed %q (%s)", i, s, sresp.Choices[i].FinishReason, out, ch.FinishReason)
						}
						for _, lp := range ch.Logprobs.Content {
							if lp.Logprob < -9999 || lp.Logprob > 0 {
								t.Errorf("logprob %v of %q", lp.Logprob, lp.Token)
							}
						}
					}
				})
			}
		}
	}
	if stops == 0 {
		t.Error("no output finished with a match")
	}
	t.Logf("%d outputs complete", stops)
}

// TestChoiceRegexCompletions checks the legacy and structured_outputs
// fields on the completions API (streamed, n = 2, sampled).
func TestChoiceRegexCompletions(t *testing.T) {
	e := tinyEngine(t)
	for _, c := range choiceRegexCases[:4] {
		t.Run(c.name, func(t *testing.T) {
			var req dsv4.CompletionRequest
			setChoiceRegex(t, &req.RequestSampling, c.so, c.choice, c.pattern)
			req.Prompt = dsv4.Prompt{Texts: []string{"The answer: "}}
			n, mx, seed, temp := 2, 24, int64(11), 1.0
			req.N, req.MaxTokens, req.Seed, req.Temperature = &n, &mx, &seed, &temp
			stream, err := e.CompleteStream(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			texts := make([]string, n)
			finish := make([]string, n)
			for ch, err := range stream {
				if err != nil {
					t.Fatal(err)
				}
				if ch.Index >= 0 {
					texts[ch.Index] += ch.Delta.Content
					if ch.FinishReason != "" {
						finish[ch.Index] = ch.FinishReason
					}
				}
			}
			for i := range texts {
				checkChoiceRegex(t, c.choice, c.pattern, texts[i], finish[i])
			}
		})
	}
}

// TestChoiceEnds checks that generation ends once the matcher accepts
// nothing more: min_tokens cannot hold back EOS after a complete choice
// (the output is one choice, then EOS, finish "stop"), and a regex whose
// match cannot grow ends likewise.
func TestChoiceEnds(t *testing.T) {
	e := tinyEngine(t)
	prompt, err := e.ChatPrompt(&dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: "Pick one"}}})
	if err != nil {
		t.Fatal(err)
	}
	yes, _ := dsv4.ChoiceConstraint([]string{"yes", "no"})
	digits, _ := dsv4.RegexConstraint(`[0-9]{2}`)
	for _, c := range []struct {
		name string
		con  *dsv4.OutputConstraint
		p    dsv4.SamplingParams
		ok   func(string) bool
	}{
		{"choice min_tokens", yes, dsv4.SamplingParams{MaxTokens: 40, MinTokens: 20}, func(s string) bool { return s == "yes" || s == "no" }},
		{"regex sampled", digits, dsv4.SamplingParams{MaxTokens: 40, MinTokens: 20, Temperature: 1, Seed: new(int64(3))}, regexp.MustCompile(`^[0-9]{2}$`).MatchString},
	} {
		c.p.Constraint = c.con
		it, err := e.Generate(context.Background(), prompt, c.p)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		finish := ""
		for tok, err := range it {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tok.ID)
			finish = tok.FinishReason
		}
		if finish != "stop" || len(ids) < 2 || !isEOS(e, ids[len(ids)-1]) {
			t.Fatalf("%s: finish %q after %v", c.name, finish, ids)
		}
		text, _ := e.Detokenize(ids[:len(ids)-1])
		if !c.ok(text) {
			t.Fatalf("%s: output %q", c.name, text)
		}
	}
}

// TestChoiceRegexErrors checks the 400s of the choice and regex fields.
func TestChoiceRegexErrors(t *testing.T) {
	e := tinyEngine(t)
	for _, c := range []struct {
		name, so, param, msg string
		legacyChoice         []string
		legacyRegex          *string
		rf                   string
	}{
		{name: "backreference", so: `{"regex":"(a)\\1"}`, param: "structured_outputs.regex", msg: "backreferences are not supported"},
		{name: "lookahead", so: `{"regex":"(?=a)a"}`, param: "structured_outputs.regex", msg: "unsupported Perl syntax"},
		{name: "inner anchor", so: `{"regex":"a^b"}`, param: "structured_outputs.regex", msg: "unsupported ^"},
		{name: "multiline", so: `{"regex":"(?m)a$"}`, param: "structured_outputs.regex", msg: "unsupported $"},
		{name: "word boundary", so: `{"regex":"\\bword"}`, param: "structured_outputs.regex", msg: `unsupported \b`},
		{name: "long", so: `{"regex":"` + strings.Repeat("a", dsv4.MaxRegexBytes+1) + `"}`, param: "structured_outputs.regex", msg: "pattern bytes"},
		{name: "empty choice", so: `{"choice":[]}`, param: "structured_outputs.choice", msg: "at least one"},
		{name: "many choices", so: `{"choice":[` + strings.Repeat(`"x",`, dsv4.MaxChoiceList) + `"y"]}`, param: "structured_outputs.choice", msg: "choices"},
		{name: "two kinds", so: `{"choice":["a"],"regex":"a"}`, param: "structured_outputs", msg: "only one kind of structured outputs constraint is allowed, got regex, choice"},
		{name: "with response_format", so: `{"regex":"a"}`, rf: `{"type":"json_object"}`, param: "structured_outputs", msg: "only one kind"},
		{name: "grammar", so: `{"grammar":"root ::= \"a\""}`, param: "structured_outputs.grammar", msg: "not supported"},
		{name: "guided_regex", legacyRegex: new(string(`a(?<=b)`)), param: "guided_regex", msg: "lookaround assertions are not supported"},
		{name: "guided_choice", legacyChoice: []string{}, param: "guided_choice", msg: "at least one"},
		{name: "guided both", legacyChoice: []string{"a"}, legacyRegex: new(string(`a`)), param: "guided_choice", msg: "only one kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := chatReq("hi", c.rf, 4)
			if c.so != "" {
				r.StructuredOutputs = new(dsv4.StructuredOutputs)
				if err := json.Unmarshal([]byte(c.so), r.StructuredOutputs); err != nil {
					t.Fatal(err)
				}
			}
			r.GuidedChoice, r.GuidedRegex = c.legacyChoice, c.legacyRegex
			_, err := e.Chat(context.Background(), r)
			var pe *dsv4.ParamError
			if !errors.As(err, &pe) || !errors.Is(err, dsv4.ErrInvalidParams) {
				t.Fatalf("got %v, want a ParamError", err)
			}
			if pe.Param != c.param || !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("got param %q msg %q, want %q containing %q", pe.Param, pe.Msg, c.param, c.msg)
			}
		})
	}
	// structured_outputs wins over the legacy fields, as in vLLM.
	r := chatReq("hi", "", 8)
	r.StructuredOutputs = &dsv4.StructuredOutputs{Choice: []string{"ok"}}
	r.GuidedRegex = new(string(`(`))
	resp, err := e.Chat(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; *c.Message.Content != "ok" || c.FinishReason != "stop" {
		t.Fatalf("got %q (%s)", *c.Message.Content, c.FinishReason)
	}
}

// TestChoiceThinking checks that in thinking mode the reasoning is not
// constrained and the content after </think> is one of the choices.
func TestChoiceThinking(t *testing.T) {
	e := tinyEngine(t)
	r := chatReq(tinyArithQ, "", 160)
	r.ChatTemplateKwargs = map[string]any{"thinking": true}
	r.StructuredOutputs = &dsv4.StructuredOutputs{Choice: []string{"391", "392", "no idea"}}
	resp, err := e.Chat(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if c.Message.ReasoningContent == nil || *c.Message.ReasoningContent == "" {
		t.Fatalf("reasoning %v", c.Message.ReasoningContent)
	}
	if c.FinishReason != "stop" || c.Message.Content == nil || !slices.Contains([]string{"391", "392", "no idea"}, *c.Message.Content) {
		t.Fatalf("content %v, finish %q", c.Message.Content, c.FinishReason)
	}
	t.Logf("reasoning %q, content %q", *c.Message.ReasoningContent, *c.Message.Content)
}
