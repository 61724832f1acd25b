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
	// Echo prepends the prompt to the output text. Logprobs then cover the
	// generated tokens only (no prompt-token entries, which vLLM gives from
	// prompt_logprobs); their text_offset values are positions in the
	// returned text, the echoed prompt included, in code points as vLLM
	// counts them (TextPos).
	Echo          bool           `json:"echo,omitempty"`
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
	return fmt.Errorf("prompt must be a string, an array of strings, or token ids")
}

// sampling converts the request's sampling fields (defaults: temperature
// 1, max_tokens 16).
func (r *CompletionRequest) sampling() (SamplingParams, error) {
	cr := ChatRequest{RequestSampling: r.RequestSampling}
	if r.MaxTokens == nil {
		cr.MaxTokens = new(int)
		*cr.MaxTokens = 16
	}
	if r.Logprobs != nil {
		if *r.Logprobs < 0 || *r.Logprobs > MaxTopLogprobs {
			return SamplingParams{}, paramErr("logprobs", "must be in [0, %d], got %d", MaxTopLogprobs, *r.Logprobs)
		}
		cr.Logprobs = true
		cr.TopLogprobs = r.Logprobs
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
	if req == nil {
		return nil, paramErr("request", "nil request")
	}
	c := e.chat
	if c == nil {
		return nil, ErrNoChat
	}
	p, err := req.sampling()
	if err != nil {
		return nil, err
	}
	if err := p.Validate(e.b.VocabSize()); err != nil {
		return nil, err
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, paramErr("suffix", "not supported")
	}
	run := &chatRun{e: e, p: p, n: 1, completion: true}
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

// CompletionLogprobs is the legacy completions logprobs object.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
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
	out := &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	for _, e := range entries {
		out.Tokens = append(out.Tokens, e.Token)
		out.TokenLogprobs = append(out.TokenLogprobs, e.Logprob)
		top := map[string]float32{}
		for _, t := range e.TopLogprobs {
			if _, dup := top[t.Token]; !dup {
				top[t.Token] = t.Logprob
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, pos.Offset())
		pos.Advance(e.Token)
	}
	return out
}
