package dsv4

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func logitsOf(v ...float32) []float32 { return v }

func TestSamplerGreedy(t *testing.T) {
	s := newSampler(SamplingParams{}, nil, nil, 1)
	tok, _, _ := s.sample(logitsOf(0, 3, 3, 1))
	if tok != 1 {
		t.Fatalf("greedy tie: got %d, want lowest id 1", tok)
	}
}

func TestSamplerCuts(t *testing.T) {
	lg := logitsOf(5, 4, 3, 2, 1, 0, -1, -2)
	tests := []struct {
		name    string
		p       SamplingParams
		allowed map[int32]bool
	}{
		{"top_k=1", SamplingParams{Temperature: 1, TopK: 1}, map[int32]bool{0: true}},
		{"top_k=3", SamplingParams{Temperature: 1, TopK: 3}, map[int32]bool{0: true, 1: true, 2: true}},
		{"top_p small", SamplingParams{Temperature: 1, TopP: 0.1}, map[int32]bool{0: true}},
		// p(0)=0.634, p(1)=0.233: the nucleus for 0.8 is {0,1}
		{"top_p 0.8", SamplingParams{Temperature: 1, TopP: 0.8}, map[int32]bool{0: true, 1: true}},
		// min_p 0.3: tokens with p >= 0.3 p(0): e^-1 = 0.37 ok, e^-2 = 0.135 no
		{"min_p", SamplingParams{Temperature: 1, MinP: 0.3}, map[int32]bool{0: true, 1: true}},
		{"bias", SamplingParams{Temperature: 0, LogitBias: map[int32]float64{7: 100}}, map[int32]bool{7: true}},
		{"low temperature", SamplingParams{Temperature: 0.01}, map[int32]bool{0: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSampler(tt.p, nil, nil, 7)
			seen := map[int32]bool{}
			for range 400 {
				tok, _, _ := s.sample(lg)
				if !tt.allowed[tok] {
					t.Fatalf("sampled %d, allowed %v", tok, tt.allowed)
				}
				seen[tok] = true
			}
			if len(seen) != len(tt.allowed) {
				t.Errorf("saw %v, want all of %v", seen, tt.allowed)
			}
		})
	}
}

func TestSamplerDistribution(t *testing.T) {
	// Temperature 1 sampling frequencies match softmax within 4 sigma.
	lg := logitsOf(1, 0.5, 0, -1)
	s := newSampler(SamplingParams{Temperature: 1, Seed: ptr[int64](3)}, nil, nil, 0)
	const n = 20000
	counts := make([]int, len(lg))
	for range n {
		tok, _, _ := s.sample(lg)
		counts[tok]++
	}
	var z float64
	for _, v := range lg {
		z += math.Exp(float64(v))
	}
	for i, v := range lg {
		p := math.Exp(float64(v)) / z
		sigma := math.Sqrt(n * p * (1 - p))
		if d := math.Abs(float64(counts[i]) - n*p); d > 4*sigma {
			t.Errorf("token %d: %d samples, want %.0f ± %.0f", i, counts[i], n*p, 4*sigma)
		}
	}
}

func TestSamplerSeedReproducible(t *testing.T) {
	lg := make([]float32, 1000)
	for i := range lg {
		lg[i] = float32(math.Sin(float64(i)))
	}
	run := func(seed int64) []int32 {
		s := newSampler(SamplingParams{Temperature: 1, TopP: 0.9, Seed: &seed}, nil, nil, 99)
		var out []int32
		for range 50 {
			tok, _, _ := s.sample(lg)
			out = append(out, tok)
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	if !slicesEqual(a, b) {
		t.Fatal("same seed gave different tokens")
	}
	if slicesEqual(a, c) {
		t.Fatal("different seeds gave the same 50 tokens")
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSamplerPenalties(t *testing.T) {
	lg := logitsOf(2, 1.9, 0)
	// frequency penalty after token 0 twice: 2 - 2*0.1 = 1.8 < 1.9
	s := newSampler(SamplingParams{FrequencyPenalty: 0.1}, nil, nil, 0)
	s.observe(0)
	if tok, _, _ := s.sample(lg); tok != 0 {
		t.Fatalf("one occurrence: got %d", tok)
	}
	s.observe(0)
	if tok, _, _ := s.sample(lg); tok != 1 {
		t.Fatalf("frequency penalty: got %d, want 1", tok)
	}
	// presence penalty once
	s = newSampler(SamplingParams{PresencePenalty: 0.2}, nil, nil, 0)
	s.observe(0)
	if tok, _, _ := s.sample(lg); tok != 1 {
		t.Fatalf("presence penalty: got %d, want 1", tok)
	}
	// repetition penalty over the prompt: 2/1.1 = 1.82 < 1.9
	s = newSampler(SamplingParams{RepetitionPenalty: 1.1}, []int32{0}, nil, 0)
	if tok, _, _ := s.sample(lg); tok != 1 {
		t.Fatalf("repetition penalty: got %d, want 1", tok)
	}
	// negative logits are multiplied
	s = newSampler(SamplingParams{RepetitionPenalty: 2}, []int32{0}, nil, 0)
	if tok, _, _ := s.sample(logitsOf(-1, -1.5)); tok != 1 {
		t.Fatalf("repetition penalty on a negative logit: got %d, want 1", tok)
	}
}

func TestSamplerMinTokensMasksEOS(t *testing.T) {
	s := newSampler(SamplingParams{MinTokens: 2}, nil, []int32{0}, 0)
	lg := logitsOf(9, 1, 0)
	if tok, _, _ := s.sample(lg); tok != 1 {
		t.Fatalf("EOS before min_tokens: got %d", tok)
	}
	s.observe(1)
	s.observe(1)
	if tok, _, _ := s.sample(lg); tok != 0 {
		t.Fatalf("after min_tokens: got %d, want EOS", tok)
	}
}

func TestRawLogprobs(t *testing.T) {
	lg := logitsOf(1, 2, 3, 3)
	lp, top := rawLogprobs(lg, 0, 3)
	z := math.Log(math.Exp(1) + math.Exp(2) + 2*math.Exp(3))
	if math.Abs(float64(lp)-(1-z)) > 1e-6 {
		t.Fatalf("logprob %v, want %v", lp, 1-z)
	}
	want := []int32{2, 3, 1}
	for i, w := range want {
		if top[i].ID != w {
			t.Fatalf("top %v, want ids %v", top, want)
		}
	}
	if math.Abs(float64(top[0].Logprob)-(3-z)) > 1e-6 {
		t.Fatalf("top logprob %v", top[0].Logprob)
	}
}

func TestSamplingValidate(t *testing.T) {
	bad := []SamplingParams{
		{Temperature: -1},
		{Temperature: math.NaN()},
		{TopP: 1.5},
		{TopK: -2},
		{MinP: 2},
		{PresencePenalty: 3},
		{FrequencyPenalty: -3},
		{RepetitionPenalty: -1},
		{MaxTokens: -1},
		{TopLogprobs: 21},
		{Stop: []string{""}},
		{LogitBias: map[int32]float64{5: 101}},
		{LogitBias: map[int32]float64{500: 1}},
		{StopTokenIDs: []int32{-1}},
		{MinTokens: 5, MaxTokens: 2},
	}
	for i, p := range bad {
		err := p.Validate(300)
		var pe *ParamError
		if !errors.Is(err, ErrInvalidParams) || !errors.As(err, &pe) {
			t.Errorf("case %d %+v: got %v, want a ParamError", i, p, err)
		}
	}
	if err := (&SamplingParams{Temperature: 0.7, TopP: 0.9, TopK: 40}).Validate(300); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkSample(b *testing.B) {
	// LLM-like logits: Gaussian noise (std 2.5) plus a few strong
	// candidates, over DeepSeek-V4's vocabulary.
	rng := rand.New(rand.NewPCG(1, 1))
	lg := make([]float32, 129280)
	for i := range lg {
		lg[i] = float32(rng.NormFloat64() * 2.5)
	}
	for i := range 20 {
		lg[rng.IntN(len(lg))] = 14 - float32(i)/2
	}
	for _, c := range []struct {
		name string
		p    SamplingParams
	}{
		{"greedy", SamplingParams{}},
		{"temp1", SamplingParams{Temperature: 1}},
		{"top_p0.9", SamplingParams{Temperature: 0.8, TopP: 0.9}},
		{"top_k50", SamplingParams{Temperature: 0.8, TopK: 50}},
		{"penalties+logprobs5", SamplingParams{Temperature: 1, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1, Logprobs: true, TopLogprobs: 5}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newSampler(c.p, []int32{1, 2, 3}, nil, 1)
			for range b.N {
				tok, _, _ := s.sample(lg)
				s.observe(tok)
			}
		})
	}
}

// refDraw is a brute-force reference of draw for top_k / top_p: full sort.
func refDraw(s *sampler, x []float32) int32 {
	p := &s.p
	maxv := float32(math.Inf(-1))
	for _, v := range x {
		maxv = max(maxv, v)
	}
	type tp struct {
		id int32
		e  float64
	}
	var all []tp
	for i, v := range x {
		e := math.Exp(float64(v-maxv) * (1 / p.Temperature)) // as draw computes it
		if e < p.MinP {
			continue
		}
		all = append(all, tp{int32(i), e})
	}
	if (p.TopK <= 0 || p.TopK >= len(x)) && (p.TopP <= 0 || p.TopP >= 1) {
		// no cut: draw walks the vocabulary in id order
		var sum float64
		for _, a := range all {
			sum += a.e
		}
		r := s.rng.Float64() * sum
		for _, a := range all {
			if r -= a.e; r < 0 {
				return a.id
			}
		}
		return all[len(all)-1].id
	}
	slices.SortFunc(all, func(a, b tp) int {
		if c := cmp.Compare(b.e, a.e); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	if p.TopK > 0 && p.TopK < len(all) {
		all = all[:p.TopK]
	}
	if p.TopP > 0 && p.TopP < 1 {
		var t, cum float64
		for _, a := range all {
			t += a.e
		}
		for j, a := range all {
			cum += a.e
			if cum >= p.TopP*t {
				all = all[:j+1]
				break
			}
		}
	}
	var sum float64
	for _, a := range all {
		sum += a.e
	}
	r := s.rng.Float64() * sum
	for _, a := range all {
		if r -= a.e; r < 0 {
			return a.id
		}
	}
	return all[len(all)-1].id
}

// The bucketed top_k / top_p cut equals a full sort, draw for draw.
func TestSamplerMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for c := range 300 {
		n := 50 + rng.IntN(3000)
		x := make([]float32, n)
		scale := []float64{0.1, 1, 3, 10}[c%4]
		for i := range x {
			x[i] = float32(rng.NormFloat64() * scale)
			if c%5 == 0 {
				x[i] = float32(int(x[i])) // ties
			}
		}
		p := SamplingParams{Temperature: []float64{0.3, 0.7, 1, 1.5}[rng.IntN(4)], Seed: ptr(int64(c))}
		switch c % 3 {
		case 0:
			p.TopP = 0.05 + rng.Float64()*0.9
		case 1:
			p.TopK = 1 + rng.IntN(100)
		case 2:
			p.TopP, p.TopK, p.MinP = 0.5+rng.Float64()*0.45, 1+rng.IntN(500), rng.Float64()*0.1
		}
		a := newSampler(p, nil, nil, 0)
		b := newSampler(p, nil, nil, 0)
		for k := range 20 {
			if got, want := a.draw(x), refDraw(b, x); got != want {
				t.Fatalf("case %d draw %d (%+v): got %d, want %d", c, k, p, got, want)
			}
		}
	}
}
