package tokenizer

import (
	"unicode/utf8"
)

// DecodeOptions controls Decode and StreamDecoder.
type DecodeOptions struct {
	// SkipSpecialTokens drops special added tokens (IsSpecial) from the output, as
	// HF's decode(ids, skip_special_tokens=True). Non-special added tokens such as
	// DeepSeek's <think> or ｜DSML｜ are kept either way.
	SkipSpecialTokens bool
}

// Decode returns the text of ids: the bytes of the tokens concatenated, with every
// maximal invalid UTF-8 subpart replaced by U+FFFD (Rust's String::from_utf8_lossy,
// as HF's ByteLevel decoder does). It equals HF tokenizers' decode(ids,
// skip_special_tokens) except that an id without a token is an *UnknownIDError here
// (HF drops it silently).
func (t *Tokenizer) Decode(ids []int32, opts DecodeOptions) (string, error) {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.tokenBytes) || !t.known[id] {
			return "", &UnknownIDError{ID: id}
		}
		if opts.SkipSpecialTokens && t.special[id] {
			continue
		}
		buf = append(buf, t.tokenBytes[id]...)
	}
	if utf8.Valid(buf) {
		return string(buf), nil
	}
	out, _ := appendLossy(make([]byte, 0, len(buf)+8), buf, true)
	return string(out), nil
}

// utf8Prefix examines the sequence starting at b[0] (len(b) > 0). size is the length
// the lead byte announces (0 when b[0] cannot start a sequence); valid is how many
// bytes of b, from b[0], are consistent with a well-formed sequence (<= size).
func utf8Prefix(b []byte) (size, valid int) {
	c := b[0]
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c < 0x80:
		return 1, 1
	case c < 0xC2:
		return 0, 0
	case c < 0xE0:
		size = 2
	case c < 0xF0:
		size = 3
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
	case c < 0xF5:
		size = 4
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
	default:
		return 0, 0
	}
	valid = 1
	for valid < size && valid < len(b) {
		x := b[valid]
		if valid == 1 && (x < lo || x > hi) || valid > 1 && (x < 0x80 || x > 0xBF) {
			break
		}
		valid++
	}
	return size, valid
}

const replacement = "\uFFFD"

// appendLossy appends b to dst with each maximal invalid subpart replaced by U+FFFD.
// When final is false, an incomplete but so far well-formed sequence at the end of b
// is not consumed: rest is its length (the caller keeps those bytes).
func appendLossy(dst, b []byte, final bool) (out []byte, rest int) {
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		size, valid := utf8Prefix(b[i:])
		switch {
		case size == 0:
			dst = append(dst, replacement...)
			i++
		case valid == size:
			dst = append(dst, b[i:i+size]...)
			i += size
		case i+valid == len(b) && !final:
			return dst, len(b) - i
		default:
			dst = append(dst, replacement...)
			i += valid
		}
	}
	return dst, 0
}

// StreamDecoder detokenizes incrementally, for streaming generation: Add returns
// only text that is final, never a partial UTF-8 sequence, and the concatenation of
// all Add results and Flush equals Decode of all the ids. Not safe for concurrent
// use; create one per sequence.
type StreamDecoder struct {
	t       *Tokenizer
	opts    DecodeOptions
	pending []byte // bytes of an incomplete UTF-8 sequence awaiting continuation
	scratch []byte
}

// NewStreamDecoder returns a StreamDecoder with the given options.
func (t *Tokenizer) NewStreamDecoder(opts DecodeOptions) *StreamDecoder {
	return &StreamDecoder{t: t, opts: opts}
}

// Add consumes one id and returns the text that became final ("" while a
// multi-byte character is incomplete). An unknown id returns an *UnknownIDError and
// leaves the decoder unchanged.
func (d *StreamDecoder) Add(id int32) (string, error) {
	t := d.t
	if id < 0 || int(id) >= len(t.tokenBytes) || !t.known[id] {
		return "", &UnknownIDError{ID: id}
	}
	if d.opts.SkipSpecialTokens && t.special[id] {
		return "", nil
	}
	tb := t.tokenBytes[id]
	if len(d.pending) == 0 && isCompleteUTF8(tb) {
		return tb, nil
	}
	d.pending = append(d.pending, tb...)
	out, rest := appendLossy(d.scratch[:0], d.pending, false)
	s := string(out)
	d.scratch = out
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-rest:]...)
	return s, nil
}

// isCompleteUTF8 reports whether s is valid UTF-8 that does not end inside a
// sequence (so nothing needs to be held back).
func isCompleteUTF8(s string) bool {
	return utf8.ValidString(s)
}

// Flush ends the stream: it returns the held-back bytes of an incomplete sequence
// as U+FFFD (as a full Decode would) and resets the decoder for reuse.
func (d *StreamDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	out, _ := appendLossy(d.scratch[:0], d.pending, true)
	d.pending = d.pending[:0]
	return string(out)
}

// Pending reports how many bytes are held back awaiting the rest of a character.
func (d *StreamDecoder) Pending() int { return len(d.pending) }
