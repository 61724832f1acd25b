package dsv4

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// SamplingParams selects the next token from a step's logits. The zero value
// is greedy decoding with no penalties and no limit other than the engine's
// context length. Semantics and the order of the transformations follow vLLM's
// sampler (vllm/v1/sample/sampler.py), which SGLang matches:
//
//  1. logit_bias is added; with fewer than MinTokens outputs, EOS and the stop
//     token ids are masked;
//  2. repetition penalty (CTRL, Keskar et al. 2019, section 4.1: a positive
//     logit is divided by the penalty, a negative one multiplied) over the
//     prompt and the output; frequency penalty (minus count × penalty) and
//     presence penalty (minus penalty once) over the output only, as in the
//     OpenAI API;
//  3. Temperature == 0: argmax (ties go to the lowest id). Otherwise the
//     logits are divided by the temperature, then min_p (drop tokens whose
//     probability is below MinP × the top probability), top_k and top_p
//     (the smallest set of most probable tokens whose mass reaches TopP) cut
//     the distribution, and a token is drawn from the renormalised rest.
//
// Logprobs are those of the model's raw distribution (log-softmax of the
// logits before any of the steps above), as vLLM reports by default; with
// a Constraint, of the logits after its mask (step 0 here, as in vLLM,
// whose model runner applies the grammar bitmask before the sampler).
type SamplingParams struct {
	// Temperature ≥ 0; 0 selects greedy decoding. OpenAI allows [0, 2].
	Temperature float64
	// TopP in (0, 1]; 0 or 1 disables it.
	TopP float64
	// TopK ≥ 0 keeps the K most probable tokens; 0 (or -1 on the wire)
	// disables it.
	TopK int
	// MinP in [0, 1]; 0 disables it.
	MinP float64
	// Seed makes sampling reproducible: the same seed, prompt and parameters
	// give the same tokens whatever else the engine is running. Nil draws a
	// random seed. Choice i of an n-choice request uses Seed+i.
	Seed *int64

	// PresencePenalty and FrequencyPenalty in [-2, 2] (OpenAI's range).
	PresencePenalty, FrequencyPenalty float64
	// RepetitionPenalty > 0; 1 (or 0, meaning unset) disables it. On the
	// wire (RequestSampling) an explicit repetition_penalty <= 0 is a 400,
	// as in vLLM.
	RepetitionPenalty float64
	// LogitBias maps token ids to a bias in [-100, 100] added to their logit.
	LogitBias map[int32]float64

	// MaxTokens bounds the number of generated tokens (OpenAI max_tokens /
	// max_completion_tokens; reasoning tokens count). 0 means "up to the
	// context length".
	MaxTokens int
	// MinTokens: EOS and StopTokenIDs cannot end the output before this many
	// tokens, and chat/completion stop strings are not looked for in them
	// (a match must end after them), as vLLM's min_tokens. Nothing else is
	// blocked: a model kept from its EOS may write "</think>" in a
	// non-thinking reply, and it stays in content, as with vLLM (the token
	// is not special in DeepSeek's tokenizer, so skip_special_tokens keeps
	// it, and the deepseek_v4 reasoning parser passes non-thinking output
	// through unchanged).
	MinTokens int
	// StopTokenIDs end the output when generated (in addition to the model's
	// EOS unless IgnoreEOS). By default the stop token is not part of the
	// text, special or not, as in vLLM's V1 engine
	// (vllm/v1/engine/detokenizer.py, BaseIncrementalDetokenizer.update: a
	// stop-terminated step's last token is not detokenized unless
	// include_stop_str_in_output) and SGLang (trim_matched_stop drops a
	// matched stop token unless no_stop_trim); with IncludeStopStrInOutput
	// it is. Its logprob is reported and it counts in completion_tokens.
	// vLLM's SamplingParams docstring ("the returned output will contain the
	// stop tokens unless the stop tokens are special tokens") describes the
	// removed V0 engine.
	StopTokenIDs []int32
	// IgnoreEOS keeps generating past the model's EOS token.
	IgnoreEOS bool
	// Stop strings end the output when they appear in the detokenized text;
	// the match is removed from the text (OpenAI semantics) unless
	// IncludeStopStrInOutput. At most 16.
	Stop []string
	// IncludeStopStrInOutput (vLLM's include_stop_str_in_output, default
	// false) keeps what ended the output in the text: a matched stop string
	// stays (the text is cut after it instead of before it, as vLLM's
	// StopChecker.check_stop_strings with include_in_output), and a stop
	// token (EOS or a StopTokenIDs id) is detokenized like any other token
	// unless it is a special token (vLLM's V1 detokenizer then decodes it,
	// and skip_special_tokens, on by default, drops a special one).
	// finish_reason stays "stop" and matched_stop the string or id.
	IncludeStopStrInOutput bool

	// Logprobs requests the log-probability of each generated token;
	// TopLogprobs (0..20) the most likely alternatives at each position.
	Logprobs    bool
	TopLogprobs int

	// Constraint, when not nil, restricts the output to the JSON values of
	// a grammar (structured outputs: see OutputConstraint); the chat and
	// completions layers set it from response_format. Generate refuses it
	// with a *ParamError (param response_format) on an engine without a
	// tokenizer.Tokenizer. Not carried in the JSON form of SamplingParams.
	Constraint *OutputConstraint `json:"-"`

	// PromptLogprobs (vLLM's prompt_logprobs), when not nil, asks for the
	// log-probability of every prompt token after the first given the
	// tokens before it, with its rank and the *PromptLogprobs (0..20,
	// MaxTopLogprobs) most likely tokens at its position: the first
	// generated Token carries them (Token.PromptLogprobs). They are those
	// of the raw distribution, as the generated tokens' Logprobs. Only
	// then does the engine compute the logits of every prompt position
	// (AllLogitsBackend); otherwise prefill computes the last position's
	// only. vLLM's -1 (the whole vocabulary) is refused.
	PromptLogprobs *int
}

// Limits on sampling parameters, matching the OpenAI API's documented ranges.
const (
	MaxTopLogprobs = 20
	MaxStopStrings = 16
	maxStopLen     = 1024
	maxLogitBias   = 1024
)

// ErrInvalidParams is wrapped by every error about a request's parameters
// (sampling values out of range, malformed messages, unknown tools...).
// Servers map it to HTTP 400.
var ErrInvalidParams = errors.New("dsv4: invalid request parameter")

// ParamError names the offending parameter; it wraps ErrInvalidParams.
type ParamError struct {
	Param string // OpenAI field name, e.g. "top_p"
	Msg   string
}

// Error implements error.
func (e *ParamError) Error() string { return fmt.Sprintf("dsv4: invalid %s: %s", e.Param, e.Msg) }

// Unwrap returns ErrInvalidParams.
func (e *ParamError) Unwrap() error { return ErrInvalidParams }

func paramErr(param, format string, a ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks every field's range against a vocabulary of vocab tokens
// (vocab ≤ 0 skips the token-id checks). It returns a *ParamError.
func (p *SamplingParams) Validate(vocab int) error {
	bad := func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }
	switch {
	case bad(p.Temperature) || p.Temperature < 0 || p.Temperature > 100:
		return paramErr("temperature", "must be in [0, 100], got %v", p.Temperature)
	case bad(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return paramErr("top_p", "must be in (0, 1], got %v", p.TopP)
	case p.TopK < -1:
		return paramErr("top_k", "must be -1 (disabled) or ≥ 0, got %d", p.TopK)
	case bad(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return paramErr("min_p", "must be in [0, 1], got %v", p.MinP)
	case bad(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return paramErr("presence_penalty", "must be in [-2, 2], got %v", p.PresencePenalty)
	case bad(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return paramErr("frequency_penalty", "must be in [-2, 2], got %v", p.FrequencyPenalty)
	case bad(p.RepetitionPenalty) || p.RepetitionPenalty < 0 || p.RepetitionPenalty > 10:
		return paramErr("repetition_penalty", "must be in (0, 10], got %v", p.RepetitionPenalty)
	case p.MaxTokens < 0:
		return paramErr("max_tokens", "must be ≥ 0, got %d", p.MaxTokens)
	case p.MinTokens < 0 || (p.MaxTokens > 0 && p.MinTokens > p.MaxTokens):
		return paramErr("min_tokens", "must be in [0, max_tokens], got %d", p.MinTokens)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return paramErr("top_logprobs", "must be in [0, %d], got %d", MaxTopLogprobs, p.TopLogprobs)
	case p.PromptLogprobs != nil && (*p.PromptLogprobs < 0 || *p.PromptLogprobs > MaxTopLogprobs):
		return paramErr("prompt_logprobs", "must be in [0, %d] (-1, the whole vocabulary, is not supported), got %d", MaxTopLogprobs, *p.PromptLogprobs)
	case len(p.Stop) > MaxStopStrings:
		return paramErr("stop", "at most %d stop strings, got %d", MaxStopStrings, len(p.Stop))
	case len(p.LogitBias) > maxLogitBias:
		return paramErr("logit_bias", "at most %d entries, got %d", maxLogitBias, len(p.LogitBias))
	}
	for _, s := range p.Stop {
		if s == "" || len(s) > maxStopLen {
			return paramErr("stop", "stop strings must have 1..%d bytes", maxStopLen)
		}
	}
	for id, b := range p.LogitBias {
		if bad(b) || b < -100 || b > 100 {
			return paramErr("logit_bias", "bias for token %d must be in [-100, 100], got %v", id, b)
		}
		if err := checkTokenID("logit_bias", id, vocab); err != nil {
			return err
		}
	}
	for _, id := range p.StopTokenIDs {
		if err := checkTokenID("stop_token_ids", id, vocab); err != nil {
			return err
		}
	}
	return nil
}

// checkTokenID refuses a negative id, or with vocab > 0 (known) an id
// outside [0, vocab), as a ParamError naming param.
func checkTokenID(param string, id int32, vocab int) error {
	switch {
	case id < 0 && vocab <= 0:
		return paramErr(param, "token id %d is negative", id)
	case id < 0 || (vocab > 0 && int(id) >= vocab):
		return paramErr(param, "token id %d out of range [0, %d)", id, vocab)
	}
	return nil
}

// TokenLogprob is the log-probability (natural log, raw model distribution)
// of one token.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// sampler holds one sequence's sampling state: its RNG and the counts of
// tokens seen, for the penalties.
type sampler struct {
	p       SamplingParams
	rng     *rand.Rand
	eos     []int32        // model EOS ids (unless IgnoreEOS) + StopTokenIDs
	prompt  map[int32]bool // tokens of the prompt (repetition penalty)
	counts  map[int32]int  // output token counts
	nOut    int            // output tokens so far
	scratch []float32      // working copy of the logits
	idx     []int32        // candidate indices
	probs   []float64      // relative probabilities, [vocab]
	bkt     []int16        // their buckets, [vocab]
	con     *constrained   // structured output state (nil: none)
	masked  []float32      // logits with the constraint's mask, [vocab]
}

func newSampler(p SamplingParams, prompt []int32, eos []int32, seed uint64) *sampler {
	s := &sampler{p: p, counts: map[int32]int{}}
	if p.Seed != nil {
		seed = uint64(*p.Seed)
	}
	s.rng = rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	if !p.IgnoreEOS {
		s.eos = append(s.eos, eos...)
	}
	s.eos = append(s.eos, p.StopTokenIDs...)
	if p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1 {
		s.prompt = make(map[int32]bool, len(prompt))
		for _, t := range prompt {
			s.prompt[t] = true
		}
	}
	return s
}

// isStop reports whether tok ends the sequence (EOS unless ignored, or a stop
// token id).
func (s *sampler) isStop(tok int32) bool { return slices.Contains(s.eos, tok) }

// observe records an output token (sampled or forced) for the penalties.
func (s *sampler) observe(tok int32) {
	s.counts[tok]++
	s.nOut++
	s.con.observe(tok, s.isStop(tok))
}

// sample picks the next token from logits (not modified). It returns the
// token and, when logprobs are requested, its raw logprob and the top
// alternatives.
func (s *sampler) sample(logits []float32) (tok int32, lp float32, top []TokenLogprob) {
	n := len(logits)
	p := &s.p
	onlyStop := false
	if s.con.masking() {
		// The grammar's mask applies first, and logprobs are those of the
		// masked logits, as vLLM's model runner masks before its sampler.
		if cap(s.masked) < n {
			s.masked = make([]float32, n)
		}
		logits, onlyStop = s.con.mask(logits, s.masked[:n], s.eos)
		defer func() { clampLogprobs(&lp, top) }()
	}
	// min_tokens cannot hold back a stop when the value is complete: the
	// grammar allows nothing else.
	minTok := s.nOut < p.MinTokens && !onlyStop
	noPenalty := (p.RepetitionPenalty == 0 || p.RepetitionPenalty == 1) && p.FrequencyPenalty == 0 && p.PresencePenalty == 0
	plain := len(p.LogitBias) == 0 && !minTok &&
		(noPenalty || (len(s.prompt) == 0 && len(s.counts) == 0))
	if plain && p.Temperature == 0 { // greedy on the raw logits: no copy
		tok = argmax(logits)
		if p.Logprobs || p.TopLogprobs > 0 {
			lp, top = rawLogprobs(logits, tok, p.TopLogprobs)
		}
		return tok, lp, top
	}
	if cap(s.scratch) < n {
		s.scratch = make([]float32, n)
	}
	x := s.scratch[:n]
	copy(x, logits)
	for id, b := range p.LogitBias {
		if int(id) < n {
			x[id] += float32(b)
		}
	}
	if minTok {
		for _, id := range s.eos {
			if int(id) < n {
				x[id] = float32(math.Inf(-1))
			}
		}
	}
	if rp := float32(p.RepetitionPenalty); rp > 0 && rp != 1 {
		pen := func(id int32) {
			if int(id) < n {
				if x[id] > 0 {
					x[id] /= rp
				} else {
					x[id] *= rp
				}
			}
		}
		for id := range s.prompt {
			pen(id)
		}
		for id := range s.counts {
			if !s.prompt[id] {
				pen(id)
			}
		}
	}
	if p.FrequencyPenalty != 0 || p.PresencePenalty != 0 {
		for id, c := range s.counts {
			if int(id) < n {
				x[id] -= float32(p.FrequencyPenalty)*float32(c) + float32(p.PresencePenalty)
			}
		}
	}

	if p.Temperature == 0 {
		tok = argmax(x)
	} else {
		tok = s.draw(x)
	}
	if p.Logprobs || p.TopLogprobs > 0 {
		lp, top = rawLogprobs(logits, tok, p.TopLogprobs)
	}
	return tok, lp, top
}

// argmax returns the index of the largest value (the lowest index on
// ties; NaNs are never chosen unless every value is NaN or -Inf).
func argmax(x []float32) int32 {
	best, bv := 0, float32(math.Inf(-1))
	for i, v := range x {
		if v > bv {
			best, bv = i, v
		}
	}
	return int32(best)
}

// draw samples from softmax(x / T) after min_p, top_k and top_p.
//
// e[i] = exp((x[i]-max)/T) is each token's probability relative to the top
// one (1). To apply top_k / top_p without sorting the vocabulary, tokens
// are bucketed by -log2(e) in steps of 1/8 octave; the buckets are scanned
// from the top until they hold K tokens (top_k) or the mass TopP × total
// (top_p), and only the tokens of those buckets are sorted. Every token in
// a later bucket is less probable than every token in an earlier one, so
// the cut is exact.
func (s *sampler) draw(x []float32) int32 {
	p := &s.p
	inv := 1 / p.Temperature
	maxv := float32(math.Inf(-1))
	for _, v := range x {
		if v > maxv {
			maxv = v
		}
	}
	if math.IsInf(float64(maxv), -1) || maxv != maxv {
		return argmax(x)
	}
	n := len(x)
	if cap(s.probs) < n {
		s.probs = make([]float64, n)
	}
	e := s.probs[:n]
	var total float64
	for i, v := range x {
		w := math.Exp(float64(v-maxv) * inv)
		if w < p.MinP || w != w {
			w = 0
		}
		e[i] = w
		total += w
	}
	topK := p.TopK > 0 && p.TopK < n
	topP := p.TopP > 0 && p.TopP < 1
	if !topK && !topP {
		r := s.rng.Float64() * total
		last := int32(0)
		for i, w := range e {
			if w > 0 {
				last = int32(i)
				if r -= w; r < 0 {
					return int32(i)
				}
			}
		}
		return last
	}
	const nb = 1024
	var mass [nb]float64
	var count [nb]int
	// bucket ≈ -8·log2(w) from the float's exponent and top 3 mantissa
	// bits: monotone non-increasing in w.
	bucket := func(w float64) int {
		bits := math.Float64bits(w)
		b := (1023-int(bits>>52))*8 - int(bits>>49)&7
		return min(max(b, 0), nb-1)
	}
	if cap(s.bkt) < n {
		s.bkt = make([]int16, n)
	}
	bk := s.bkt[:n]
	for i, w := range e {
		if w > 0 {
			b := bucket(w)
			bk[i] = int16(b)
			mass[b] += w
			count[b]++
		}
	}
	stop := nb - 1
	var cm float64
	var cc int
	for b := range nb {
		cm += mass[b]
		cc += count[b]
		if (topK && cc >= p.TopK) || (!topK && cm >= p.TopP*total) {
			stop = b
			break
		}
	}
	s.idx = s.idx[:0]
	for i, w := range e {
		if w > 0 && int(bk[i]) <= stop {
			s.idx = append(s.idx, int32(i))
		}
	}
	slices.SortFunc(s.idx, func(a, b int32) int {
		if c := cmp.Compare(e[b], e[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	keep := len(s.idx)
	if topK && p.TopK < keep {
		keep = p.TopK
	}
	if topP {
		t := total // the mass top_p is a fraction of: all, or the top k
		if topK {
			t = 0
			for _, i := range s.idx[:keep] {
				t += e[i]
			}
		}
		var cum float64
		for j, i := range s.idx[:keep] {
			cum += e[i]
			if cum >= p.TopP*t {
				keep = j + 1
				break
			}
		}
	}
	var sum float64
	for _, i := range s.idx[:keep] {
		sum += e[i]
	}
	r := s.rng.Float64() * sum
	for _, i := range s.idx[:keep] {
		if r -= e[i]; r < 0 {
			return i
		}
	}
	return s.idx[keep-1]
}

// PromptLogprob is the model's distribution at one prompt position: the
// log-probability (natural log, raw distribution: log-softmax in float64 of
// the logits of the position before, as the generated tokens' logprobs)
// of the prompt token there, its rank, and the most likely tokens.
type PromptLogprob struct {
	ID      int32   // the prompt token
	Logprob float32 // its log-probability
	// Rank is the number of vocabulary tokens whose logit is at least the
	// prompt token's (1: the most likely; ties share the worse rank), as
	// vLLM ranks a token (batched_count_greater_than: logprobs >= it).
	Rank int
	// Top holds the SamplingParams.PromptLogprobs most likely tokens,
	// best first (ties by id); the prompt token may be among them.
	Top []TokenLogprob
}

// promptLogprob computes the PromptLogprob of token tok from the logits
// of the position before it, with the k most likely tokens.
func promptLogprob(logits []float32, tok int32, k int) *PromptLogprob {
	lp, top := rawLogprobs(logits, tok, k)
	rank := 0
	for _, v := range logits {
		if v >= logits[tok] {
			rank++
		}
	}
	return &PromptLogprob{ID: tok, Logprob: lp, Rank: rank, Top: top}
}

// rawLogprobs returns log_softmax(logits)[tok] and the k most likely tokens
// (descending; ties by id).
func rawLogprobs(logits []float32, tok int32, k int) (float32, []TokenLogprob) {
	maxv := math.Inf(-1)
	for _, v := range logits {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - maxv)
	}
	lse := maxv + math.Log(sum)
	lp := float32(float64(logits[tok]) - lse)
	if k <= 0 {
		return lp, nil
	}
	// Keep the k best in a small sorted slice (k ≤ 20).
	top := make([]TokenLogprob, 0, k+1)
	for i, v := range logits {
		if len(top) == k && v <= top[k-1].Logprob {
			continue
		}
		pos, _ := slices.BinarySearchFunc(top, v, func(e TokenLogprob, t float32) int {
			return cmp.Compare(t, e.Logprob) // descending
		})
		// equal values: insert after existing ones (lower id first)
		for pos < len(top) && top[pos].Logprob == v {
			pos++
		}
		top = slices.Insert(top, pos, TokenLogprob{ID: int32(i), Logprob: v})
		if len(top) > k {
			top = top[:k]
		}
	}
	for i := range top {
		top[i].Logprob = float32(float64(top[i].Logprob) - lse)
	}
	return lp, top
}
