package tokenizer

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// EncodeOptions controls Encode. The zero value is HF tokenizers'
// encode(text, add_special_tokens=False): every added token matched, no BOS or EOS.
type EncodeOptions struct {
	// AddBOS prepends the BOS id of tokenizer_config.json (no-op when it has none).
	// DeepSeek-V3's config sets add_bos_token (see Tokenizer.AddBOSDefault); V4's does not.
	AddBOS bool
	// AddEOS appends the EOS id of tokenizer_config.json (no-op when it has none).
	AddEOS bool
	// Special selects which added tokens are recognized in the text.
	Special SpecialMatching
}

// encState is per-call scratch space, pooled.
type encState struct {
	tmp, segs []segment
	bufs      [][]int
	bpe       bpeState
	err       error // first regex timeout of the call
}

var encPool = sync.Pool{New: func() any { return new(encState) }}

// Encode tokenizes text and returns its token ids. It equals HF tokenizers'
// Tokenizer.encode(text, add_special_tokens=False).ids for the zero EncodeOptions,
// and with `encode_special_tokens = True` for Special == MatchNonSpecial. Text that is
// not valid UTF-8 is accepted (see the package doc). Encode never fails; it runs in
// time O(n log n) in the length of the longest pre-token and O(n) otherwise, except
// for a tokenizer.json Split pattern without a hand-written scanner, which regexp2
// runs under RegexMatchTimeout: if that fires, Encode keeps the unsearched rest of
// the pre-token as one piece (use EncodeErr to get the error instead).
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+4), text, opts)
}

// AppendEncode is Encode appending to dst; with a dst of enough capacity it does not
// allocate once the words of text are in the BPE cache.
func (t *Tokenizer) AppendEncode(dst []int32, text string, opts EncodeOptions) []int32 {
	dst, _ = t.AppendEncodeErr(dst, text, opts)
	return dst
}

// EncodeErr is Encode returning an error wrapping ErrRegexTimeout (and nil ids)
// when a regexp2-run Split pattern exceeds RegexMatchTimeout; it is the variant to
// use with a tokenizer.json from an untrusted source. With the DeepSeek patterns
// (hand-written scanners) it never fails.
func (t *Tokenizer) EncodeErr(text string, opts EncodeOptions) ([]int32, error) {
	ids, err := t.AppendEncodeErr(make([]int32, 0, len(text)/3+4), text, opts)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// AppendEncodeErr is AppendEncode also returning the first regex timeout (an
// error wrapping ErrRegexTimeout) met; dst then holds the ids Encode would give.
func (t *Tokenizer) AppendEncodeErr(dst []int32, text string, opts EncodeOptions) ([]int32, error) {
	if opts.AddBOS && t.bos >= 0 {
		dst = append(dst, t.bos)
	}
	st := encPool.Get().(*encState)
	st.err = nil
	if len(st.bufs) < len(t.steps) {
		st.bufs = make([][]int, len(t.steps))
	}
	st.tmp, st.segs = t.splitAdded(text, opts.Special, st.tmp[:0], st.segs[:0])
	for _, seg := range st.segs {
		if seg.idx >= 0 {
			dst = append(dst, t.added[seg.idx].ID)
			continue
		}
		dst = t.pretokenize(st, 0, text[seg.start:seg.end], dst)
	}
	err := st.err
	st.err = nil
	encPool.Put(st)
	if opts.AddEOS && t.eos >= 0 {
		dst = append(dst, t.eos)
	}
	return dst, err
}

// pretokenize runs pre-tokenizer steps[level:] on s and BPE on the resulting words.
func (t *Tokenizer) pretokenize(st *encState, level int, s string, dst []int32) []int32 {
	if level == len(t.steps) {
		return t.appendWord(&st.bpe, s, dst)
	}
	step := &t.steps[level]
	if step.prefixSpace {
		if len(s) == 0 || s[0] != ' ' {
			s = " " + s
		}
		return t.pretokenize(st, level+1, s, dst)
	}
	st.bufs[level] = step.pieces(s, st.bufs[level], &st.err, func(lo, hi int) {
		dst = t.pretokenize(st, level+1, s[lo:hi], dst)
	})
	return dst
}

// EncodeBatch encodes texts in parallel on up to GOMAXPROCS goroutines (an
// errgroup pulling indexes from a shared counter); out[i] is Encode(texts[i], opts).
// It stops early and returns ctx.Err() if ctx is cancelled, or the error of
// EncodeErr (ErrRegexTimeout) for the first text that fails.
func (t *Tokenizer) EncodeBatch(ctx context.Context, texts []string, opts EncodeOptions) ([][]int32, error) {
	out := make([][]int32, len(texts))
	g, ctx := errgroup.WithContext(ctx)
	var next atomic.Int64
	for w := min(runtime.GOMAXPROCS(0), len(texts)); w > 0; w-- {
		g.Go(func() error {
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				i := int(next.Add(1) - 1)
				if i >= len(texts) {
					return nil
				}
				ids, err := t.EncodeErr(texts[i], opts)
				if err != nil {
					return err
				}
				out[i] = ids
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// VocabSize is one more than the largest id of the vocabulary, base or added
// (DeepSeek-V3: 128815, V4: 129280).
func (t *Tokenizer) VocabSize() int { return len(t.tokenStr) }

// TokenID returns the id of a token given as written in tokenizer.json: an added
// token's content, or a base token in the ByteLevel alphabet (e.g. "Ġthe").
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	if id, ok := t.addedIDs[token]; ok {
		return id, true
	}
	if raw, ok := byteLevelDecode(token); ok {
		if id, ok := t.vocab[raw]; ok {
			return id, true
		}
	}
	id, ok := t.oddVocab[token]
	return id, ok
}

// Token returns the token of id as written in tokenizer.json (ByteLevel alphabet for
// base tokens, content for added ones); ok is false for an unknown id.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.tokenStr) || !t.known[id] {
		return "", false
	}
	return t.tokenStr[id], true
}

// TokenBytes returns the bytes Decode produces for id on its own (they may be an
// incomplete UTF-8 sequence); ok is false for an unknown id.
func (t *Tokenizer) TokenBytes(id int32) ([]byte, bool) {
	if id < 0 || int(id) >= len(t.tokenStr) || !t.known[id] {
		return nil, false
	}
	return []byte(t.tokenBytes[id]), true
}

// IsSpecial reports whether id is a special added token (skipped by Decode with
// SkipSpecialTokens). In the DeepSeek tokenizers BOS, EOS, pad and the placeholders
// are special; <｜User｜>, <｜Assistant｜>, <think>, ｜DSML｜ and the tool-call markers
// are not.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// AddedTokens returns a copy of the added-token table, sorted by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	return append([]AddedToken(nil), t.added...)
}

// BOS returns the id of tokenizer_config.json's bos_token; ok is false when none.
func (t *Tokenizer) BOS() (id int32, ok bool) { return t.bos, t.bos >= 0 }

// EOS returns the id of tokenizer_config.json's eos_token; ok is false when none.
func (t *Tokenizer) EOS() (id int32, ok bool) { return t.eos, t.eos >= 0 }

// AddBOSDefault is tokenizer_config.json's add_bos_token: whether transformers adds
// BOS when encoding with add_special_tokens=True (V3: true, V4: false).
func (t *Tokenizer) AddBOSDefault() bool { return t.addBOS }

// AddEOSDefault is tokenizer_config.json's add_eos_token.
func (t *Tokenizer) AddEOSDefault() bool { return t.addEOS }

// ModelMaxLength is tokenizer_config.json's model_max_length in tokens (0 if absent).
func (t *Tokenizer) ModelMaxLength() int { return t.maxLen }
