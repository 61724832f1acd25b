package dsv4_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/jsongrammar"
)

// TestStructuredScalarEnd generates top-level scalars on the embedded
// model with min_tokens and ignore_eos: once the value is complete and no
// token can extend it, the output ends (min_tokens) or goes on
// unconstrained after EOS (ignore_eos), and never holds a special token
// the mask fell back on (before the fix: BOS, id 0, up to max_tokens).
func TestStructuredScalarEnd(t *testing.T) {
	e := tinyEngine(t)
	prompt, err := e.ChatPrompt(&dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: "JSON please"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		schema string
		p      dsv4.SamplingParams
		finish string
	}{
		{`{"type":"integer","minimum":5,"maximum":5}`, dsv4.SamplingParams{MaxTokens: 40, MinTokens: 10}, "stop"},
		{`{"enum":[true,"x",null]}`, dsv4.SamplingParams{MaxTokens: 40, MinTokens: 10, Temperature: 1}, "stop"},
		{`{"type":"boolean"}`, dsv4.SamplingParams{MaxTokens: 40, IgnoreEOS: true}, "length"},
	} {
		con, err := dsv4.JSONSchemaConstraint([]byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		c.p.Constraint = con
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
		if finish != c.finish || len(ids) < 2 {
			t.Fatalf("%s: finish %q after %d tokens, want %q", c.schema, finish, len(ids), c.finish)
		}
		g, _ := jsongrammar.Compile([]byte(c.schema))
		st := g.Start()
		n := 0
		for ; n < len(ids) && !st.Accepting(); n++ {
			b, _ := e.Detokenize(ids[n : n+1])
			if !st.FeedBytes([]byte(b)) {
				t.Fatalf("%s: token %d (%d) refused", c.schema, n, ids[n])
			}
		}
		if all, _ := e.Detokenize(ids); strings.Contains(all, "begin▁of▁sentence") {
			t.Fatalf("%s: %q holds BOS", c.schema, all)
		}
		if n >= len(ids) || !isEOS(e, ids[n]) {
			t.Fatalf("%s: %v: the value (%d tokens) is not followed by EOS", c.schema, ids, n)
		}
		if c.finish == "stop" && n != len(ids)-1 {
			t.Fatalf("%s: %v: tokens after EOS", c.schema, ids)
		}
	}
}

// TestStructuredConcurrent runs many constrained chat requests at once on
// one engine, each with its own schema, n = 3 and sampling: every choice
// follows its schema (run with -race).
func TestStructuredConcurrent(t *testing.T) {
	e := tinyEngine(t)
	schemas := []string{
		"",
		structuredSchemas[1].schema,
		structuredSchemas[2].schema,
		structuredSchemas[3].schema,
		`{"type":"object","properties":{"a":{"type":"array","minItems":1,"items":{"$ref":"#"}},"b":{"type":"null"}}}`,
		`{"type":"object","properties":{"n":{"type":"integer","minimum":-3,"maximum":3},"s":{"type":"string","minLength":1,"maxLength":2}},"required":["n","s"]}`,
		`{"type":"object","properties":{"e":{"enum":["x","y",1,null]},"k":{"type":["string","null"]}},"required":["e","k"]}`,
		`{"type":"object","additionalProperties":{"type":"boolean"}}`,
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		schema := schemas[i%len(schemas)]
		wg.Go(func() {
			temp, seed, maxTok, n := 1.0, int64(i), 30, 3
			r := &dsv4.ChatRequest{
				Messages:       []dsv4.Message{{Role: "user", Content: fmt.Sprintf("Describe item %d as JSON.", i)}},
				ResponseFormat: responseFormat(schema),
			}
			r.Temperature, r.Seed, r.MaxTokens, r.N = &temp, &seed, &maxTok, &n
			resp, err := e.Chat(context.Background(), r)
			if err != nil {
				errs <- err
				return
			}
			g := jsongrammar.JSONObject()
			if schema != "" {
				g, _ = jsongrammar.Compile([]byte(schema))
			}
			for _, c := range resp.Choices {
				out := *c.Message.Content
				st := g.Start()
				switch {
				case !st.FeedBytes([]byte(out)):
					errs <- fmt.Errorf("%s: %q does not follow the schema", schema, out)
				case c.FinishReason == "stop" && (!st.Accepting() || !json.Valid([]byte(out))):
					errs <- fmt.Errorf("%s: %q: stop on an incomplete value", schema, out)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func isEOS(e *dsv4.Engine, id int32) bool {
	s, _ := e.Detokenize([]int32{id})
	return s == "<｜end▁of▁sentence｜>"
}

// TestStructuredMaxTokensOne cuts a constrained chat after one token: the
// first allowed token, finish_reason length.
func TestStructuredMaxTokensOne(t *testing.T) {
	e := tinyEngine(t)
	one := 1
	r := &dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: "JSON"}}, ResponseFormat: responseFormat(structuredSchemas[1].schema)}
	r.MaxTokens = &one
	resp, err := e.Chat(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.FinishReason != "length" || !strings.HasPrefix(*c.Message.Content, "{") {
		t.Fatalf("finish %q, content %q", c.FinishReason, *c.Message.Content)
	}
}
