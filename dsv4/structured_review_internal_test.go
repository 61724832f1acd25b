package dsv4

import (
	"testing"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
)

// TestConstraintNothingAllowed checks the states where the vocabulary
// offers no token: a complete top-level scalar that no token extends (with
// min_tokens or ignore_eos, where EOS was held back or not a stop token:
// the mask allowed nothing and the sampler fell back on token 0), and a
// vocabulary that cannot even start the value. Only the model's EOS is then
// allowed; after it the constraint is over.
func TestConstraintNothingAllowed(t *testing.T) {
	const eos = 4
	toks := [][]byte{nil /* BOS, special */, []byte("true"), []byte("false"), []byte("x"), nil /* EOS */, []byte(" ")}
	cv := &constraintVocab{bytes: toks, v: jsongrammar.NewVocab(toks)}
	logits := []float32{0, 1, 2, 9, -1, 3}
	boolean, err := JSONSchemaConstraint([]byte(`{"type":"boolean"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		con    *OutputConstraint
		p      SamplingParams
		prefix []int32
		want   int32
		ended  bool // completed() after observing want
	}{
		{"bool", boolean, SamplingParams{}, nil, 2, false},
		{"bool_min_tokens", boolean, SamplingParams{MinTokens: 10}, []int32{1}, eos, true},
		{"bool_ignore_eos", boolean, SamplingParams{IgnoreEOS: true, Temperature: 1}, []int32{2}, eos, true},
		{"no_start", JSONObjectConstraint(), SamplingParams{MinTokens: 5, Temperature: 0.7}, nil, eos, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(20) {
				s := newSampler(c.p, nil, []int32{eos}, seed)
				s.con = newConstrained(c.con, cv, -1, []int32{eos})
				for _, tok := range c.prefix {
					s.observe(tok)
				}
				tok, _, _ := s.sample(logits)
				if tok != c.want {
					t.Fatalf("seed %d: token %d, want %d", seed, tok, c.want)
				}
				s.observe(tok)
				if got := s.con.completed(); got != c.ended {
					t.Fatalf("completed %v, want %v", got, c.ended)
				}
				if tok == eos && s.con.masking() {
					t.Fatal("still masking after EOS")
				}
			}
		})
	}
}
