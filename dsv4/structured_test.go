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
	"github.com/dsv4go/dsv4go/internal/jsongrammar"
)

// structuredSchemas are the schemas of the end-to-end tests: json_object
// (schema ""), and json_schema objects with nested arrays, enums, anyOf,
// bounds (integer and number ranges) and $ref.
var structuredSchemas = []struct{ name, schema string }{
	{"json_object", ""},
	{"person", `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},"required":["name","age","tags"],"additionalProperties":false}`},
	{"optional", `{"type":"object","properties":{"ok":{"type":"boolean"},"score":{"type":"number","minimum":0,"exclusiveMaximum":1},"note":{"anyOf":[{"type":"string","maxLength":8},{"type":"null"}]}},"required":["ok"]}`},
	{"range", `{"type":"object","properties":{"score":{"type":"number","minimum":-1.5,"maximum":2.25},"n":{"type":"number","exclusiveMinimum":0}},"required":["score","n"]}`},
	{"ref", `{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"]}},"type":"object","properties":{"points":{"type":"array","items":{"$ref":"#/$defs/pt"},"minItems":1,"maxItems":2}},"required":["points"]}`},
}

// numberExp finds a number written with an exponent.
var numberExp = regexp.MustCompile(`\d[eE]`)

func responseFormat(schema string) json.RawMessage {
	if schema == "" {
		return json.RawMessage(`{"type":"json_object"}`)
	}
	return json.RawMessage(`{"type":"json_schema","json_schema":{"name":"t","schema":` + schema + `}}`)
}

// checkStructured checks one choice's content against schema: a complete
// value when it finished with "stop" (and valid for encoding/json), a
// prefix of one when cut by "length".
func checkStructured(t *testing.T, schema, content, finish string) {
	t.Helper()
	g := jsongrammar.JSONObject()
	if schema != "" {
		var err error
		if g, err = jsongrammar.Compile([]byte(schema)); err != nil {
			t.Fatal(err)
		}
	}
	st := g.Start()
	if !st.FeedBytes([]byte(content)) {
		t.Fatalf("content %q (finish %s) does not follow the schema", content, finish)
	}
	switch finish {
	case "stop":
		if !st.Accepting() {
			t.Fatalf("content %q finished with stop but is incomplete", content)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(content), &v); err != nil {
			t.Fatalf("content %q: %v", content, err)
		}
		if score, ok := v["score"].(float64); ok && strings.Contains(schema, `"exclusiveMaximum":1}`) && (score < 0 || score >= 1 || numberExp.MatchString(content)) {
			t.Fatalf("content %q: score out of [0, 1) or with an exponent", content)
		}
		if strings.Contains(schema, `"minimum":-1.5`) {
			// Number ranges: written without exponent, at most 6 fraction
			// digits (xgrammar's range expression), within the bounds.
			score, _ := v["score"].(float64)
			n, _ := v["n"].(float64)
			if score < -1.5 || score > 2.25 || n <= 0 || numberExp.MatchString(content) || regexp.MustCompile(`\.\d{7}`).MatchString(content) {
				t.Fatalf("content %q: out of the number ranges", content)
			}
		}
		if strings.Contains(schema, `"required":["name","age","tags"]`) {
			for _, k := range []string{"name", "age", "tags"} {
				if _, ok := v[k]; !ok {
					t.Fatalf("content %q lacks %q", content, k)
				}
			}
			if age, _ := v["age"].(float64); age < 0 || age > 120 || age != float64(int(age)) {
				t.Fatalf("content %q: age out of [0, 120]", content)
			}
		}
	case "length":
	default:
		t.Fatalf("finish %q for %q", finish, content)
	}
}

// TestStructuredOutputs runs response_format json_object and json_schema
// requests on the embedded model: greedy and sampled (several seeds), n = 2,
// streamed and not; every output follows its schema, and the streamed
// text equals the non-streamed one.
func TestStructuredOutputs(t *testing.T) {
	e := tinyEngine(t)
	stops := 0
	for _, sc := range structuredSchemas {
		for _, temp := range []float64{0, 1} {
			for seed := int64(1); seed <= 3; seed++ {
				if temp == 0 && seed > 1 {
					break
				}
				t.Run(fmt.Sprintf("%s/T%v/seed%d", sc.name, temp, seed), func(t *testing.T) {
					req := func(stream bool) *dsv4.ChatRequest {
						r := &dsv4.ChatRequest{
							Messages:       []dsv4.Message{{Role: "user", Content: "Describe a person as JSON."}},
							ResponseFormat: responseFormat(sc.schema),
							Stream:         stream,
						}
						r.Temperature = &temp
						r.Seed = &seed
						r.MaxTokens = new(int)
						*r.MaxTokens = 40
						r.N = new(int)
						*r.N = 2
						r.Logprobs = true
						return r
					}
					resp, err := e.Chat(context.Background(), req(false))
					if err != nil {
						t.Fatal(err)
					}
					sresp := streamedResponse(t, e, req(true))
					if len(resp.Choices) != 2 || len(sresp.Choices) != 2 {
						t.Fatalf("%d and %d choices, want 2", len(resp.Choices), len(sresp.Choices))
					}
					for i, c := range resp.Choices {
						content := *c.Message.Content
						checkStructured(t, sc.schema, content, c.FinishReason)
						if c.FinishReason == "stop" {
							stops++
						}
						if s := *sresp.Choices[i].Message.Content; s != content {
							t.Errorf("choice %d: streamed %q, not streamed %q", i, s, content)
						}
						for _, lp := range c.Logprobs.Content {
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
		t.Error("no output finished with a complete value")
	}
	if stops == 0 {
		t.Error("no output finished with a complete value")
	}
	t.Logf("%d outputs complete", stops)
}

// streamedResponse runs req through ChatStream and folds the chunks.
func streamedResponse(t *testing.T, e *dsv4.Engine, req *dsv4.ChatRequest) *dsv4.ChatResponse {
	t.Helper()
	stream, err := e.ChatStream(context.Background(), req)
	if err == nil {
		var acc dsv4.ChatAccumulator
		for ch, err := range stream {
			if err != nil {
				t.Fatal(err)
			}
			acc.Add(ch)
		}
		return acc.Response()
	}
	t.Fatal(err)
	return nil
}

func chatReq(content string, rf string, maxTokens int) *dsv4.ChatRequest {
	r := &dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: content}}}
	if rf != "" {
		r.ResponseFormat = json.RawMessage(rf)
	}
	zero := 0.0
	r.Temperature = &zero
	r.MaxTokens = &maxTokens
	return r
}

// TestStructuredErrors checks the 400s: unsupported schema keywords (named),
// structural_tag, bad structured_outputs, limits.
func TestStructuredErrors(t *testing.T) {
	e := tinyEngine(t)
	deep := strings.Repeat(`{"type":"array","items":`, 40) + `{}` + strings.Repeat(`}`, 40)
	cases := []struct {
		name, rf, so, param, msg string
	}{
		{"pattern", `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a(?!b)"}}}`, "", "response_format.json_schema.schema", `"pattern": invalid regular expression`},
		{"format unknown", `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"d":{"type":"string","format":"iri"}}}}}`, "", "response_format.json_schema.schema", `/properties/d: "format": "iri" is not supported`},
		{"format length", `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"d":{"type":"string","format":"date","maxLength":10}}}}}`, "", "response_format.json_schema.schema", `/properties/d: "maxLength": not supported together with pattern or format`},
		{"number range empty", `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1.0000001}}}`, "", "response_format.json_schema.schema", `"minimum": no number of at most 6 fraction digits`},
		{"allOf", `{"type":"json_schema","json_schema":{"name":"x","schema":{"allOf":[{"type":"object"}]}}}`, "", "response_format.json_schema.schema", `"allOf"`},
		{"depth", `{"type":"json_schema","json_schema":{"name":"x","schema":` + deep + `}}`, "", "response_format.json_schema.schema", "nested deeper than 32"},
		{"size", `{"type":"json_schema","json_schema":{"name":"x","schema":{"description":"` + strings.Repeat("x", 70000) + `"}}}`, "", "response_format.json_schema.schema", "more than 65536"},
		{"no json_schema", `{"type":"json_schema"}`, "", "response_format.json_schema", "required"},
		{"structural_tag", `{"type":"structural_tag","structures":[],"triggers":[]}`, "", "response_format.type", "structural_tag is not supported"},
		{"so regex", "", `{"regex":"a{2,1}"}`, "structured_outputs.regex", "invalid repeat count"},
		{"so two", "", `{"json":{"type":"object"},"json_object":true}`, "structured_outputs", "only one kind"},
		{"so and rf", `{"type":"json_object"}`, `{"json_object":true}`, "structured_outputs", "only one kind"},
		{"so bad schema", "", `{"json":{"type":"object","patternProperties":{}}}`, "structured_outputs.json", `"patternProperties"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := chatReq("hi", c.rf, 4)
			if c.so != "" {
				r.StructuredOutputs = new(dsv4.StructuredOutputs)
				if err := json.Unmarshal([]byte(c.so), r.StructuredOutputs); err != nil {
					t.Fatal(err)
				}
			}
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
}

// TestStructuredTruncated checks that max_tokens cuts a constrained output
// with finish_reason length, leaving a valid prefix (as vLLM).
func TestStructuredTruncated(t *testing.T) {
	e := tinyEngine(t)
	for _, n := range []int{1, 2, 5} {
		resp, err := e.Chat(context.Background(), chatReq("Describe a person as JSON.", `{"type":"json_object"}`, n))
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if c.FinishReason != "length" || resp.Usage.CompletionTokens != n {
			t.Fatalf("max_tokens %d: finish %q after %d tokens", n, c.FinishReason, resp.Usage.CompletionTokens)
		}
		checkStructured(t, "", *c.Message.Content, "length")
		if !strings.HasPrefix(*c.Message.Content, "{") {
			t.Fatalf("content %q", *c.Message.Content)
		}
	}
}

// TestStructuredThinking checks that in thinking mode the reasoning is not
// constrained (the model's own reasoning text, which no JSON grammar would
// allow: it does not start with '{') and the content after </think> is.
func TestStructuredThinking(t *testing.T) {
	e := tinyEngine(t)
	r := chatReq(tinyArithQ, `{"type":"json_object"}`, 120)
	r.ChatTemplateKwargs = map[string]any{"thinking": true}
	resp, err := e.Chat(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if c.Message.ReasoningContent == nil || *c.Message.ReasoningContent == "" || (*c.Message.ReasoningContent)[0] == '{' {
		t.Fatalf("reasoning %v", c.Message.ReasoningContent)
	}
	content := *c.Message.Content
	if content == "" || content[0] != '{' {
		t.Fatalf("content %q", content)
	}
	checkStructured(t, "", content, c.FinishReason)
	if resp.Usage.CompletionTokensDetails == nil || resp.Usage.CompletionTokensDetails.ReasoningTokens == 0 {
		t.Fatalf("usage %+v", resp.Usage)
	}
}

// TestStructuredCompletions checks response_format and structured_outputs
// on the completions API, n = 2, and that a forced tool call wins over
// response_format in chat.
func TestStructuredCompletions(t *testing.T) {
	e := tinyEngine(t)
	schema := structuredSchemas[1].schema
	for _, c := range []struct {
		name string
		req  dsv4.CompletionRequest
	}{
		{"response_format", dsv4.CompletionRequest{ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"p","schema":` + schema + `}}`)}},
		{"structured_outputs", dsv4.CompletionRequest{RequestSampling: dsv4.RequestSampling{StructuredOutputs: &dsv4.StructuredOutputs{JSON: json.RawMessage(schema)}}}},
		{"structured_outputs string", dsv4.CompletionRequest{RequestSampling: dsv4.RequestSampling{StructuredOutputs: &dsv4.StructuredOutputs{JSON: json.RawMessage(strconvQuote(schema))}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			req.Prompt = dsv4.Prompt{Texts: []string{"A person: "}}
			n, mx, seed, temp := 2, 40, int64(7), 1.0
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
				checkStructured(t, schema, texts[i], finish[i])
			}
		})
	}
	t.Run("tool_choice required wins", func(t *testing.T) {
		r := chatReq("What is the weather in Paris?", `{"type":"json_object"}`, 40)
		r.Tools = []dsv4.Tool{{Type: "function", Function: dsv4.FunctionDecl{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
		r.ToolChoice = &dsv4.ToolChoice{Mode: "required"}
		resp, err := e.Chat(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices[0].Message.ToolCalls) == 0 {
			t.Fatalf("no tool call: %+v", resp.Choices[0])
		}
	})
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestStructuredPrefixCache checks that prefix caching (prompts only) does
// not change constrained outputs: the same request twice on a caching
// engine, the second restoring the whole prompt, equals an uncached run.
func TestStructuredPrefixCache(t *testing.T) {
	cached, plain := tinyEngines(t)
	req := func() *dsv4.ChatRequest {
		r := chatReq("Describe a person as JSON.", `{"type":"json_schema","json_schema":{"name":"p","schema":`+structuredSchemas[2].schema+`}}`, 30)
		seed, temp := int64(3), 0.8
		r.Seed, r.Temperature = &seed, &temp
		return r
	}
	var outs []string
	for i, e := range []*dsv4.Engine{plain, cached, cached} {
		resp, err := e.Chat(context.Background(), req())
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 && (resp.Usage.PromptTokensDetails == nil || resp.Usage.PromptTokensDetails.CachedTokens == 0) {
			t.Fatalf("second cached run restored nothing: %+v", resp.Usage)
		}
		outs = append(outs, *resp.Choices[0].Message.Content)
	}
	if !slices.Equal(outs, []string{outs[0], outs[0], outs[0]}) {
		t.Fatalf("outputs differ: %q", outs)
	}
}

// BenchmarkStructuredDecode times generation on the embedded model with and
// without a constraint (32 tokens, greedy, one sequence): the difference per
// token is the cost of structured outputs per decode step (masks, mostly
// from the cache, and their application to the 129,280 logits), to set
// against the model's CPU decode step.
func BenchmarkStructuredDecode(b *testing.B) {
	m := tinyModel(b)
	e, err := dsv4.NewEngine(m, dsv4.EngineOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	prompt, err := e.ChatPrompt(chatReq("Describe a person as JSON.", `{"type":"json_object"}`, 32))
	if err != nil {
		b.Fatal(err)
	}
	person, err := dsv4.JSONSchemaConstraint([]byte(structuredSchemas[1].schema))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		con  *dsv4.OutputConstraint
	}{{"none", nil}, {"json_object", dsv4.JSONObjectConstraint()}, {"person_schema", person}} {
		b.Run(c.name, func(b *testing.B) {
			toks := 0
			for b.Loop() {
				it, err := e.Generate(context.Background(), prompt, dsv4.SamplingParams{MaxTokens: 32, MinTokens: 32, IgnoreEOS: true, Constraint: c.con})
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range it {
					if err != nil {
						b.Fatal(err)
					}
					toks++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(toks)/1e3, "us/token")
		})
	}
}

// TestStructuredPattern runs a json_schema with a string pattern (escaped
// characters allowed by it) and a date format on the embedded model,
// greedy and sampled: every complete output matches the pattern and the
// format, checked with Go's regexp on the decoded values.
func TestStructuredPattern(t *testing.T) {
	e := tinyEngine(t)
	schema := `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{2,4}[\\n\"é]?$"},"day":{"type":"string","format":"date"},"note":{"type":"string","pattern":"[a-z ]{0,6}"}},"required":["code","day","note"]}`
	code := regexp.MustCompile(`^[A-Z]{2}-[0-9]{2,4}[\n"é]?$`)
	day := regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$`)
	note := regexp.MustCompile(`^[a-z ]{0,6}$`)
	stops := 0
	for _, temp := range []float64{0, 1} {
		for seed := int64(1); seed <= 3; seed++ {
			if temp == 0 && seed > 1 {
				break
			}
			r := chatReq("Give a code and a date as JSON.", string(responseFormat(schema)), 160)
			r.Temperature, r.Seed = &temp, &seed
			r.N = new(int)
			*r.N = 2
			resp, err := e.Chat(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range resp.Choices {
				content := *c.Message.Content
				checkStructured(t, schema, content, c.FinishReason)
				if c.FinishReason != "stop" {
					continue
				}
				stops++
				var v struct{ Code, Day, Note string }
				if err := json.Unmarshal([]byte(content), &v); err != nil {
					t.Fatalf("%q: %v", content, err)
				}
				if !code.MatchString(v.Code) || !day.MatchString(v.Day) || !note.MatchString(v.Note) {
					t.Errorf("%q: a value does not match its pattern or format", content)
				}
			}
		}
	}
	if stops == 0 {
		t.Error("no output finished with a complete value")
	}
	t.Logf("%d outputs complete", stops)
}
