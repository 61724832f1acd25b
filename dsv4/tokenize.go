package dsv4

import (
	"fmt"
	"strings"

	"github.com/dsv4go/dsv4go/tokenizer"
)

// Tokenize returns the ids that CompleteStream prefills for the text prompt
// text: the engine's tokenizer with special-token matching on and no BOS or
// EOS added (the chat path's ids come from ChatPrompt). The text may be
// empty. Errors: ErrNoChat on an Engine without a tokenizer,
// ErrContextLength for a text over the prompt byte limit.
func (e *Engine) Tokenize(text string) ([]int32, error) {
	if e == nil {
		return nil, errNilEngine
	}
	c := e.chat
	if c == nil {
		return nil, ErrNoChat
	}
	if c.maxPromptBytes > 0 && len(text) > c.maxPromptBytes {
		return nil, fmt.Errorf("%w: prompt of %d bytes", ErrContextLength, len(text))
	}
	ids, err := c.tok.Encode(text)
	if err != nil {
		return nil, err
	}
	if ids == nil {
		ids = []int32{}
	}
	return ids, nil
}

// Detokenize returns the text of ids as the engine's output would spell it:
// special tokens kept, invalid UTF-8 replaced by U+FFFD. An id that no
// token of the tokenizer has (negative, beyond the vocabulary, or a padding
// id of the model's vocabulary) is a *ParamError for "tokens". Errors also:
// ErrNoChat on an Engine without a tokenizer.
func (e *Engine) Detokenize(ids []int32) (string, error) {
	if e == nil {
		return "", errNilEngine
	}
	c := e.chat
	if c == nil {
		return "", ErrNoChat
	}
	tc, ok := c.tok.(tokenizerCodec)
	if !ok { // a stand-in tokenizer (tests): its streaming decoder
		var b strings.Builder
		dec := c.tok.NewDecoder()
		for i, id := range ids {
			if id < 0 || int(id) >= e.b.VocabSize() {
				return "", unknownTokenErr(i, id)
			}
			b.WriteString(dec.Add(id))
		}
		b.WriteString(dec.Flush())
		return b.String(), nil
	}
	for i, id := range ids {
		if _, ok := tc.t.Token(id); !ok {
			return "", unknownTokenErr(i, id)
		}
	}
	return tc.t.Decode(ids, tokenizer.DecodeOptions{})
}

func unknownTokenErr(i int, id int32) error {
	return paramErr("tokens", "tokens[%d]: token id %d is not in the vocabulary", i, id)
}

// TokenStrings returns the token strings of ids as transformers'
// convert_ids_to_tokens gives them (vLLM's /tokenize token_strs): a base
// token as tokenizer.json writes it, in the byte-level alphabet ("Ġhello"
// for " hello"), an added token its content ("<｜User｜>"). An id that no
// token has is a *ParamError for "tokens"; ErrNoChat on an Engine without
// a tokenizer.
func (e *Engine) TokenStrings(ids []int32) ([]string, error) {
	if e == nil {
		return nil, errNilEngine
	}
	c := e.chat
	if c == nil {
		return nil, ErrNoChat
	}
	out := make([]string, len(ids))
	tc, ok := c.tok.(tokenizerCodec)
	for i, id := range ids {
		switch {
		case ok:
			s, known := tc.t.Token(id)
			if !known {
				return nil, unknownTokenErr(i, id)
			}
			out[i] = s
		case id < 0 || int(id) >= e.b.VocabSize():
			return nil, unknownTokenErr(i, id)
		default: // a stand-in tokenizer (tests): its logprob spelling
			out[i] = c.tok.TokenString(id)
		}
	}
	return out, nil
}
