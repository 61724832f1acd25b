package tokenizer

import (
	"errors"
	"fmt"
)

// ErrUnsupported is returned (wrapped) by Load and Parse when tokenizer.json uses a
// component this package does not implement (for example a WordPiece model, a
// Metaspace pre-tokenizer or a non-identity normalizer). Test with errors.Is.
var ErrUnsupported = errors.New("tokenizer: unsupported tokenizer.json component")

// ErrFormat is returned (wrapped) by Load and Parse when tokenizer.json or
// tokenizer_config.json is malformed: invalid JSON, a merge whose parts or result are
// not in the vocabulary, a missing byte symbol, a regex that does not compile.
var ErrFormat = errors.New("tokenizer: malformed tokenizer file")

// ErrRegexTimeout is returned (wrapped) by EncodeErr, AppendEncodeErr and
// EncodeBatch when a Split pattern of tokenizer.json run by regexp2 exceeds
// RegexMatchTimeout on a pre-token (catastrophic backtracking). Test with errors.Is.
var ErrRegexTimeout = errors.New("tokenizer: pre-tokenizer regex timed out")

// ErrTooLarge is returned (wrapped) by Load and Parse when a file exceeds
// MaxFileBytes.
var ErrTooLarge = errors.New("tokenizer: file too large")

// MaxFileBytes bounds the size of tokenizer.json (after gzip decompression) and of
// tokenizer_config.json that Load and Parse accept: 256 MiB.
const MaxFileBytes = 256 << 20

// MaxVocabSize bounds the ids Load and Parse accept (base and added tokens): 4,194,304,
// far above any real vocabulary (DeepSeek's has 129,280 ids), so that a malformed
// file cannot make the id tables exhaust memory.
const MaxVocabSize = 1 << 22

// UnknownIDError is returned by Decode and StreamDecoder.Add for an id that no token
// of the vocabulary (base or added) has. HF tokenizers silently drops such ids; this
// package reports them instead.
type UnknownIDError struct {
	ID int32 // the offending id
}

// Error implements error: "tokenizer: unknown token id N".
func (e *UnknownIDError) Error() string {
	return fmt.Sprintf("tokenizer: unknown token id %d", e.ID)
}

// MaxPreTokenizerSteps bounds the pre-tokenizer steps (Split and ByteLevel, after Sequences
// are flattened) a tokenizer.json may declare; more are refused with ErrUnsupported. Each step
// rescans the whole input, so the bound caps the cost of encoding per input byte.
const MaxPreTokenizerSteps = 64
