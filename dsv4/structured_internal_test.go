package dsv4

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// TestSamplerConstraint checks the mask inside the sampler on a small
// vocabulary: greedy picks the best allowed token, sampling never draws a
// disallowed one, logprobs are those of the masked logits (clamped at
// -9999), EOS is allowed only on a complete value, and min_tokens does not
// hold back EOS when nothing else is allowed.
func TestSamplerConstraint(t *testing.T) {
	toks := [][]byte{[]byte("{"), []byte("}"), []byte(`"a"`), []byte(":"), []byte("1"), []byte("x"), nil /* EOS */, []byte(" ")}
	const eos = 6
	cv := &constraintVocab{bytes: toks, v: jsongrammar.NewVocab(toks)}
	logits := []float32{1, 2, 3, 4, 5, 9, 8, 0}
	cases := []struct {
		name   string
		p      SamplingParams
		prefix []int32 // tokens already output
		allow  []int32
	}{
		{"start", SamplingParams{Logprobs: true, TopLogprobs: 3}, nil, []int32{0}},
		{"open", SamplingParams{Temperature: 1}, []int32{0}, []int32{1, 2, 7}},
		{"key", SamplingParams{}, []int32{0, 2}, []int32{3, 7}},
		{"value", SamplingParams{Temperature: 0.5, TopK: 2}, []int32{0, 2, 3}, []int32{0, 2, 4, 7}},
		{"complete", SamplingParams{MinTokens: 10}, []int32{0, 1}, []int32{eos}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(50) {
				s := newSampler(c.p, nil, []int32{eos}, seed)
				s.con = newConstrained(JSONObjectConstraint(), cv, -1, []int32{eos})
				for _, tok := range c.prefix {
					s.observe(tok)
				}
				tok, lp, top := s.sample(logits)
				allowed := false
				best := int32(-1)
				for _, a := range c.allow {
					allowed = allowed || a == tok
					if best < 0 || logits[a] > logits[best] {
						best = a
					}
				}
				if !allowed {
					t.Fatalf("seed %d: token %d, allowed %v", seed, tok, c.allow)
				}
				if c.p.Temperature == 0 && tok != best {
					t.Fatalf("greedy token %d, want %d", tok, best)
				}
				if c.p.Logprobs {
					var sum float64
					for _, a := range c.allow {
						sum += math.Exp(float64(logits[a]))
					}
					want := float32(float64(logits[tok]) - math.Log(sum))
					if math.Abs(float64(lp-want)) > 1e-5 {
						t.Fatalf("logprob %v, want %v", lp, want)
					}
					if len(top) != 3 || top[0].ID != tok || top[1].Logprob != -9999 {
						t.Fatalf("top logprobs %+v", top)
					}
				}
			}
		})
	}
}

// TestConstraintNeedsTokenizer checks that Generate refuses a constraint
// on an engine without a tokenizer.Tokenizer.
func TestConstraintNeedsTokenizer(t *testing.T) {
	e := newFakeEngine(&fakeBackend{}, EngineOptions{})
	defer closeEngine(t, e)
	_, err := e.Generate(context.Background(), []int32{1, 2}, SamplingParams{Constraint: JSONObjectConstraint()})
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "response_format" {
		t.Fatalf("got %v, want a ParamError on response_format", err)
	}
}

// BenchmarkConstraintMask times one sampling step's mask on DeepSeek-V4's
// vocabulary (129,280 ids), from the cache: after '{' (a handful of tokens
// allowed) and inside a string (most allowed).
func BenchmarkConstraintMask(b *testing.B) {
	tok, err := tokenizer.Load("../tokenizer/testdata/deepseek-v4")
	if err != nil {
		b.Fatal(err)
	}
	cv := newConstraintVocab(tok, tok.VocabSize())
	logits := make([]float32, tok.VocabSize())
	for i := range logits {
		logits[i] = float32(i%97) / 10
	}
	dst := make([]float32, len(logits))
	for _, c := range []struct{ name, prefix string }{{"object_start", "{"}, {"string_body", `{"a": "xy`}} {
		con := newConstrained(JSONObjectConstraint(), cv, -1, []int32{1})
		if !con.st.feed([]byte(c.prefix)) {
			b.Fatal(c.prefix)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				con.mask(logits, dst, []int32{1})
			}
		})
	}
}
