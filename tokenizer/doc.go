// Package tokenizer implements Hugging Face byte-level BPE tokenizers
// (tokenizer.json of the GPT-2 family: a BPE model over the ByteLevel alphabet,
// ByteLevel / Split / Sequence pre-tokenizers and a ByteLevel decoder), with HF's
// added-token semantics, and the bos/eos/add_bos_token settings of
// tokenizer_config.json. It is built and tested for the DeepSeek-V3 and DeepSeek-V4
// vocabularies (128,000 BPE tokens plus 818 respectively 1,283 added tokens); its
// output equals HF `tokenizers` (the Rust library, through Python) id for id on the
// golden corpus in testdata/ (tools/gen_tokenizer_goldens.py regenerates it).
//
// Token ids are int32 everywhere.
//
// Pipeline of Encode, each step mirroring the HF step named in brackets:
//
//  1. added tokens are cut out of the raw text, leftmost-longest, non-normalized
//     tokens first and then normalized ones in the remaining gaps
//     [AddedVocabulary.extract_and_normalize]; the lstrip, rstrip and single_word flags
//     are honoured; special added tokens can be left unmatched (EncodeOptions.Special);
//  2. the pieces between added tokens are pre-tokenized by the Split regexes in
//     sequence [pre_tokenizers::Split, Sequence]. The regexes are run by
//     github.com/dlclark/regexp2 (a backtracking engine with lookahead and \p{..}
//     classes, which Go's regexp lacks); the DeepSeek patterns have hand-written
//     scanners, held equal to regexp2 by FuzzScanners, that are an order of
//     magnitude faster;
//  3. each pre-token is split into bytes and merged by BPE, lowest merge rank first
//     and leftmost on ties [models::bpe::Word::merge_all]; results are kept in a
//     bounded lock-free cache.
//
// Decode maps ids back to bytes through the ByteLevel alphabet and replaces invalid
// UTF-8 by U+FFFD per maximal subpart, as Rust's String::from_utf8_lossy does
// [decoders::ByteLevel]. StreamDecoder does the same incrementally and never emits a
// partial UTF-8 sequence.
//
// Input text that is not valid UTF-8 is accepted: its stray bytes are classified like
// U+FFFD by the pre-tokenizer and encoded as their own bytes, so the token bytes of
// Encode(s) (TokenBytes) always concatenate back to s, and Decode(Encode(s)) == s for
// every valid UTF-8 s (Decode replaces the invalid bytes, as HF does).
//
// Unicode classes (\p{L}, \p{N}, ...) follow Unicode 16.0, the tables of the Oniguruma
// engine inside HF tokenizers (unicode16_table.go), not Go's 15.0 tables.
//
// Not implemented (Load returns ErrUnsupported): normalizers other than none or an
// empty Sequence, non-BPE models, BPE dropout and subword prefixes/suffixes,
// pre-tokenizers other than Sequence, Split and ByteLevel, decoders other than
// ByteLevel. The post_processor, truncation and padding sections are ignored: BOS and
// EOS come from tokenizer_config.json through EncodeOptions. Decode is HF tokenizers'
// decode; transformers' optional clean_up_tokenization_spaces pass (false in the
// DeepSeek configs) is not applied.
//
// Dependencies: regexp2 (see step 2) and golang.org/x/sync/errgroup (EncodeBatch).
package tokenizer
