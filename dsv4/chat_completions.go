package dsv4

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"unicode/utf8"
)

// MaxPromptBatch bounds the number of prompts of one completion request.
const MaxPromptBatch = 64

// CompletionRequest is an OpenAI (legacy) completions request: raw prompt
// text or token ids in, text out, no chat encoding and no parsing.
type CompletionRequest struct {
	Model string `json:"model,omitempty"`
	// Prompt: a string, an array of strings, an array of token ids, or an
	// array of arrays of token ids.
	Prompt Prompt `json:"prompt"`
	// RequestSampling: MaxTokens defaults to 16, as in the OpenAI API.
	RequestSampling
	// Logprobs (an integer here, 0..5 in OpenAI's API, up to 20 here)
	// returns that many alternatives per token.
	Logprobs *int `json:"logprobs,omitempty"`
	// BestOf is accepted only when it selects nothing: absent, 1, or equal
	// to n (the n completions are then all the candidates). Other values
	// are a 400 naming best_of: generating best_of candidates and keeping
	// the n of highest cumulative logprob is not implemented (vLLM's V1
	// engine refuses best_of > 1 likewise: "V1 does not support best_of").
	BestOf *int `json:"best_of,omitempty"`
	// Echo prepends the prompt to the output text. With Logprobs, the
	// logprobs then cover the prompt tokens too, first, as in OpenAI's
	// legacy API and vLLM (which computes them as prompt_logprobs, equal to
	// logprobs unless prompt_logprobs is set; the choice then carries
	// prompt_logprobs as well): the first prompt token has a null
	// token_logprobs and top_logprobs entry (nothing comes before it), each
	// later one its logprob and a top_logprobs object with the prompt token
	// and up to Logprobs alternatives (LegacyPromptLogprobs). text_offset
	// values are positions in the returned text, the echoed prompt
	// included, in code points as vLLM counts them (TextPos). On an engine
	// whose backend cannot give every position's logits (not an
	// AllLogitsBackend) echo's logprobs cover the generated tokens only.
	// With max_tokens 0 the choice is the prompt alone, as vLLM serves it:
	// one token is generated for its finish_reason and usage, and dropped.
	Echo bool `json:"echo,omitempty"`
	// ResponseFormat, as vLLM's completions extension: json_object or
	// json_schema constrain the generated text (not an echoed prompt) to
	// a JSON value (see OutputConstraint); text or absent: no constraint.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`

	Suffix        *string        `json:"suffix,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
}

// Prompt is a completion prompt: texts or token-id sequences.
type Prompt struct {
	Texts []string
	IDs   [][]int32
}

// UnmarshalJSON accepts the four OpenAI forms.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	*p = Prompt{}
	b = bytes.TrimSpace(b)
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		p.Texts = []string{s}
		return nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err == nil {
		p.Texts = ss
		return nil
	}
	var ids []int32
	if err := json.Unmarshal(b, &ids); err == nil {
		p.IDs = [][]int32{ids}
		return nil
	}
	var many [][]int32
	if err := json.Unmarshal(b, &many); err == nil {
		p.IDs = many
		return nil
	}
	return paramErr("prompt", "must be a string, an array of strings, an array of token ids or an array of arrays of token ids (not mixed)")
}

// echoOnly reports whether r asks for its prompt only: echo with
// max_tokens 0, which vLLM serves (CompletionRequest.to_sampling_params'
// echo_without_generation) by generating one token and returning the
// prompt, its logprobs and that token's finish_reason without the token;
// usage counts it.
func (r *CompletionRequest) echoOnly() bool {
	return r.Echo && r.MaxTokens != nil && *r.MaxTokens == 0
}

// sampling converts the request's sampling fields (defaults: temperature
// 1, max_tokens 16). Prompt logprobs are prompt_logprobs or, with echo and
// logprobs, logprobs (vLLM's CompletionRequest.to_sampling_params) when
// allLogits; a stream without echo has no place for them.
func (r *CompletionRequest) sampling(allLogits bool) (SamplingParams, error) {
	cr := ChatRequest{RequestSampling: r.RequestSampling}
	switch {
	case r.MaxTokens == nil:
		cr.MaxTokens = new(int)
		*cr.MaxTokens = 16
	case r.echoOnly():
		cr.MaxTokens = new(int)
		*cr.MaxTokens = 1 // generated and dropped (chatRun.echoOnly)
	}
	if r.Logprobs != nil {
		if *r.Logprobs < 0 || *r.Logprobs > MaxTopLogprobs {
			return SamplingParams{}, paramErr("logprobs", "must be in [0, %d], got %d", MaxTopLogprobs, *r.Logprobs)
		}
		cr.Logprobs = true
		cr.TopLogprobs = r.Logprobs
	}
	if err := checkPromptLogprobsStream(r.PromptLogprobs, r.Stream); err != nil {
		return SamplingParams{}, err
	}
	if err := checkStreamOptions(r.StreamOptions, r.Stream); err != nil {
		return SamplingParams{}, err
	}
	echoed := r.Echo && r.Logprobs != nil
	switch {
	case r.PromptLogprobs == nil && echoed && allLogits:
		cr.PromptLogprobs = r.Logprobs
	case r.Stream && !echoed:
		cr.PromptLogprobs = nil // 0 (the only value allowed): no place for them
	}
	return cr.Sampling()
}

// CompleteStream runs a completions request and returns an iterator over
// its chunks: Delta.Content carries text (with Echo, the prompt first),
// each choice ends with a chunk carrying its FinishReason ("stop" or
// "length"), and a last chunk (Index -1) carries the Usage. Choice i*n+j is
// the j-th completion of prompt i. Errors as ChatStream's.
func (e *Engine) CompleteStream(ctx context.Context, req *CompletionRequest) (iter.Seq2[*ChatChunk, error], error) {
	if e == nil {
		return nil, errNilEngine
	}
	if ctx == nil {
		return nil, errNilContext
	}
	if req == nil {
		return nil, paramErr("request", "nil request")
	}
	c := e.chat
	if c == nil {
		return nil, ErrNoChat
	}
	p, err := req.sampling(e.s.all != nil)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(e.b.VocabSize()); err != nil {
		return nil, err
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, paramErr("suffix", "not supported")
	}
	con, err := requestConstraint(e.cons, req.ResponseFormat, &req.RequestSampling)
	if err != nil {
		return nil, err
	}
	if con != nil && e.constraintVocab() != nil {
		p.Constraint = con
	}
	run := &chatRun{e: e, p: p, n: 1, completion: true, conAfter: -1, echoOnly: req.echoOnly()}
	if req.N != nil {
		if *req.N < 1 || *req.N > MaxChoices {
			return nil, paramErr("n", "must be in [1, %d], got %d", MaxChoices, *req.N)
		}
		run.n = *req.N
	}
	if b := req.BestOf; b != nil && *b != 1 && *b != run.n {
		return nil, paramErr("best_of", "only best_of = 1 or best_of = n (%d) is supported, got %d: candidate selection by cumulative logprob is not implemented", run.n, *b)
	}
	switch {
	case len(req.Prompt.Texts) > 0:
		for _, t := range req.Prompt.Texts {
			if t == "" {
				return nil, paramErr("prompt", "must not be empty")
			}
			if c.maxPromptBytes > 0 && len(t) > c.maxPromptBytes {
				return nil, fmt.Errorf("%w: prompt of %d bytes", ErrContextLength, len(t))
			}
			ids, err := c.tok.Encode(t)
			if err != nil {
				return nil, err
			}
			run.prompts = append(run.prompts, ids)
			run.echo = append(run.echo, t)
		}
	case len(req.Prompt.IDs) > 0:
		for _, ids := range req.Prompt.IDs {
			run.prompts = append(run.prompts, ids)
			if req.Echo {
				dec := c.tok.NewDecoder()
				var b bytes.Buffer
				for _, id := range ids {
					if id < 0 || int(id) >= e.b.VocabSize() {
						return nil, paramErr("prompt", "token id %d out of range", id)
					}
					b.WriteString(dec.Add(id))
				}
				b.WriteString(dec.Flush())
				run.echo = append(run.echo, b.String())
			}
		}
	default:
		return nil, paramErr("prompt", "must not be empty")
	}
	if len(run.prompts) > MaxPromptBatch {
		return nil, paramErr("prompt", "at most %d prompts, got %d", MaxPromptBatch, len(run.prompts))
	}
	if !req.Echo {
		run.echo = nil
	}
	return run.stream(ctx)
}

// CompletionLogprobs is the legacy completions logprobs object. An echoed
// prompt's first token has a nil TokenLogprobs and TopLogprobs entry (JSON
// null). Each TopLogprobs object holds the token itself and its
// alternatives, keyed by their text, as vLLM's
// _create_completion_logprobs builds it (a text shared by two tokens keeps
// the later one's logprob, as a Python dict does), in vLLM's key order
// (TopLogprobsObject); logprobs below -9999 (-Inf) are sent as -9999, as
// vLLM does.
type CompletionLogprobs struct {
	Tokens        []string            `json:"tokens"`
	TokenLogprobs []*float32          `json:"token_logprobs"`
	TopLogprobs   []TopLogprobsObject `json:"top_logprobs"`
	TextOffset    []int               `json:"text_offset"`
}

// TopLogprobsObject is one position's top_logprobs object in the legacy
// completions form: token texts and their logprobs, in the order vLLM
// writes the object's keys. vLLM builds it from its per-position logprobs
// dict, which holds the chosen (or, for an echoed prompt, the prompt)
// token first and then the alternatives by rank, and a Python dict keeps
// a key's first place when a later token has the same text (the later
// logprob wins). A Go map would be written with its keys sorted, so that
// a client reading the object in order (a Python dict) would not find the
// chosen token first. JSON: an object with the keys in this order; nil is
// null.
type TopLogprobsObject []TextLogprob

// TextLogprob is one key of a TopLogprobsObject: a token's text and its
// logprob (natural log).
type TextLogprob struct {
	Text    string
	Logprob float32
}

// Get returns the logprob of text and whether o holds it.
func (o TopLogprobsObject) Get(text string) (float32, bool) {
	for _, e := range o {
		if e.Text == text {
			return e.Logprob, true
		}
	}
	return 0, false
}

// set gives text the logprob lp: in its place when o holds it already (a
// Python dict's assignment), else as a new last key.
func (o *TopLogprobsObject) set(text string, lp float32) {
	for i := range *o {
		if (*o)[i].Text == text {
			(*o)[i].Logprob = lp
			return
		}
	}
	*o = append(*o, TextLogprob{Text: text, Logprob: lp})
}

// MarshalJSON writes the object with its keys in order (nil: null).
func (o TopLogprobsObject) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, e := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(e.Text)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Logprob)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads an object of numbers (or null), keeping its keys'
// order; a key seen twice keeps its first place and its last value.
func (o *TopLogprobsObject) UnmarshalJSON(b []byte) error {
	*o = nil
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("top_logprobs: want an object or null, got %s", jsonKind(b))
	}
	out := TopLogprobsObject{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return err
		}
		var v float32
		if err := d.Decode(&v); err != nil {
			return err
		}
		out.set(t.(string), v)
	}
	*o = out
	return nil
}

// Append adds o's entries after c's (o nil: nothing).
func (c *CompletionLogprobs) Append(o *CompletionLogprobs) {
	if o == nil {
		return
	}
	c.Tokens = append(c.Tokens, o.Tokens...)
	c.TokenLogprobs = append(c.TokenLogprobs, o.TokenLogprobs...)
	c.TopLogprobs = append(c.TopLogprobs, o.TopLogprobs...)
	c.TextOffset = append(c.TextOffset, o.TextOffset...)
}

func newCompletionLogprobs() *CompletionLogprobs {
	return &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TopLogprobs: []TopLogprobsObject{}, TextOffset: []int{}}
}

// add appends one token at pos (advanced past it): its logprob (nil: null)
// and its top_logprobs object (nil: null).
func (c *CompletionLogprobs) add(pos *TextPos, token string, lp *float32, top TopLogprobsObject) {
	if lp != nil {
		v := max(*lp, -9999)
		lp = &v
	}
	c.Tokens = append(c.Tokens, token)
	c.TokenLogprobs = append(c.TokenLogprobs, lp)
	c.TopLogprobs = append(c.TopLogprobs, top)
	c.TextOffset = append(c.TextOffset, pos.Offset())
	pos.Advance(token)
}

// TextPos is a position in a completion's returned text counted as vLLM
// counts text_offset: in characters of a Python str, i.e. Unicode code
// points, not bytes (vLLM's OpenAIServingCompletion adds len(token) and, when
// streaming, len(delta_text) of str values). Text is fed in pieces that may
// split a UTF-8 sequence (a byte-level token); the bytes of a character not
// yet complete are held until it is, so that a token continuing a character
// starts at that character, and an invalid byte counts as one U+FFFD, as the
// detokenizer renders it. The zero value is position 0.
type TextPos struct {
	n       int
	partial []byte // the start of a character not yet complete
}

// Offset returns the position: the code points of the complete text so far.
func (p *TextPos) Offset() int { return p.n }

// Advance moves the position past text.
func (p *TextPos) Advance(text string) {
	if len(p.partial) == 0 && utf8.ValidString(text) {
		p.n += utf8.RuneCountInString(text)
		return
	}
	b := append(p.partial, text...)
	for len(b) > 0 {
		if !utf8.FullRune(b) {
			break // the rest of the character is yet to come
		}
		_, size := utf8.DecodeRune(b) // an invalid byte: size 1, one U+FFFD
		p.n++
		b = b[size:]
	}
	p.partial = append(p.partial[:0:0], b...)
}

// LegacyLogprobs converts chat-style logprob entries to the completions
// form; offset is the text length in code points before the first entry
// (with echo, the echoed prompt's included), and each later entry's offset
// is the previous one's plus its token's length in code points, as vLLM's
// _create_completion_logprobs computes text_offset (len of a Python str).
// A stream whose tokens may split a UTF-8 character uses LegacyLogprobsAt.
func LegacyLogprobs(entries []LogprobEntry, offset int) *CompletionLogprobs {
	return LegacyLogprobsAt(entries, &TextPos{n: offset})
}

// LegacyLogprobsAt is LegacyLogprobs from the position pos, which it
// advances past the entries' tokens: a caller converting a stream chunk by
// chunk keeps one TextPos per choice (advanced past any text that has no
// logprobs, such as the echoed prompt).
func LegacyLogprobsAt(entries []LogprobEntry, pos *TextPos) *CompletionLogprobs {
	if pos == nil { // offsets from 0, as LegacyLogprobs(entries, 0)
		pos = &TextPos{}
	}
	out := newCompletionLogprobs()
	for _, e := range entries {
		top := TopLogprobsObject{{Text: e.Token, Logprob: max(e.Logprob, -9999)}}
		for _, t := range e.TopLogprobs {
			top.set(t.Token, max(t.Logprob, -9999))
		}
		out.add(pos, e.Token, &e.Logprob, top)
	}
	return out
}

// LegacyPromptLogprobs converts an echoed prompt's logprobs (ChatChunk's
// PromptTokens and PromptLogprobs) to the completions form from pos, which
// it advances: entry i is tokens[i] with, for i ≥ 1, the prompt token's
// logprob and a top_logprobs object holding at most the first k+1 tokens
// of positions[i] (the prompt token, then its alternatives by rank), as
// vLLM's _create_completion_logprobs keeps them for a request's logprobs
// k; the first token's entries are null. A nil pos starts at offset 0; a
// negative k keeps only the prompt token.
func LegacyPromptLogprobs(tokens []string, positions []PromptPosition, k int, pos *TextPos) *CompletionLogprobs {
	if pos == nil {
		pos = &TextPos{}
	}
	k = max(k, 0)
	out := newCompletionLogprobs()
	for i, tok := range tokens {
		var p PromptPosition
		if i < len(positions) {
			p = positions[i]
		}
		if len(p) == 0 {
			out.add(pos, tok, nil, nil)
			continue
		}
		top := TopLogprobsObject{}
		for _, e := range p[:min(len(p), k+1)] {
			top.set(e.DecodedToken, max(e.Logprob, -9999))
		}
		out.add(pos, tok, &p[0].Logprob, top)
	}
	return out
}
