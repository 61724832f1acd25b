package dsv4

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	mbits "math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
	"github.com/dsv4go/dsv4go/internal/regexgrammar"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// OutputConstraint restricts what a generation may output to the JSON
// values of a grammar (structured outputs, as vLLM serves response_format
// through xgrammar): before each token is sampled, every token whose bytes
// cannot continue a valid value gets a logit of -Inf, and the
// end-of-sequence tokens (the model's EOS and SamplingParams.StopTokenIDs)
// are allowed only once the value is complete. Temperature, top-p/k,
// min-p, penalties, logit bias and seeds then apply to the allowed tokens
// as usual; greedy decoding picks the best allowed token. Special and added
// tokens (chat markers, </think>, DSML) are never allowed inside the value.
//
// Logprobs are computed from the masked logits (log-softmax over the
// allowed tokens; a disallowed alternative reports -9999, vLLM's clamp),
// as vLLM V1 reports them by default: its model runner applies the grammar
// bitmask to the logits before the sampler computes its raw logprobs
// (logprobs_mode raw_logprobs).
//
// An output cut by max_tokens ends with finish_reason "length" and may be
// incomplete JSON, as in vLLM. Once a stop token ends the value, later
// tokens (with ignore_eos) are not constrained, as vLLM stops matching a
// terminated grammar.
//
// The same masking serves vLLM's structured_outputs choice and regex
// (ChoiceConstraint, RegexConstraint): the output is then text that
// matches the pattern in full, EOS allowed only on a complete match and
// generation ending (finish_reason "stop") once nothing can follow it.
//
// Build one with JSONObjectConstraint, JSONSchemaConstraint,
// ChoiceConstraint or RegexConstraint (each call compiles anew; an
// Engine's requests take theirs from its cache of compiled constraints,
// EngineOptions.ConstraintCacheBytes). It is immutable apart from its
// caches (masks by automaton state, and a regex's DFA states) and safe for
// concurrent use: the choices of one request, and the requests that
// repeat its schema, share it, and with it the masks of the states they
// reach.
type OutputConstraint struct {
	g  *jsongrammar.Grammar
	rg *regexgrammar.Grammar // choice and regex (g nil then)
	mu sync.Mutex
	m  map[*jsongrammar.Vocab]*jsongrammar.Masker
	rm map[*regexgrammar.Vocab]*regexgrammar.Masker
}

// JSONObjectConstraint returns the constraint of response_format
// {"type": "json_object"}: any JSON object (vLLM compiles the schema
// {"type": "object"} for it), whitespace between tokens as xgrammar
// allows it (runs of space, newline and tab, at most 32 bytes each), none
// before the opening brace or after the closing one.
func JSONObjectConstraint() *OutputConstraint {
	return &OutputConstraint{g: jsongrammar.JSONObject()}
}

// Limits on JSON schemas given to JSONSchemaConstraint.
const (
	MaxSchemaBytes = jsongrammar.MaxSchemaBytes // 64 KiB of schema text
	MaxSchemaDepth = jsongrammar.MaxSchemaDepth // 32 levels of nesting in the schema document
)

// JSONSchemaConstraint compiles the JSON Schema of response_format
// json_schema. The subset enforced: type (object, array, string, integer,
// number, boolean, null, or a list); properties in schema order (optional
// ones may be skipped, required ones must appear), required,
// additionalProperties false (with properties, absent means false, as
// xgrammar's strict mode) or, without properties, true or a schema;
// items, minItems, maxItems; minLength, maxLength; pattern (a full match
// of the string's decoded value, Go's regexp/syntax as for RegexConstraint:
// the output may write a character escaped wherever the pattern accepts
// it, and control characters, " and \ only escaped) and format (date,
// time, date-time, duration, email, hostname, ipv4, ipv6, uuid, uri,
// uri-reference, uri-template, json-pointer, relative-json-pointer, with
// xgrammar's expressions; as in vLLM, another format on a string, and
// pattern or format beside minLength / maxLength, are a *ParamError;
// pattern beside format must hold too, where xgrammar drops the pattern);
// minimum, maximum,
// exclusiveMinimum, exclusiveMaximum on integers and numbers (digits that
// cannot end inside the range are masked; a number with any of them is
// written, as xgrammar's range expression writes it, without an exponent
// and with at most 6 fraction digits, the bounds exact on that grid; a
// range holding no such number, or beyond 64-bit integer parts, is a
// *ParamError); enum and const (written
// as their compact JSON); anyOf and oneOf over any alternatives of the
// subset (objects with different or overlapping properties, strings with
// different enums...: every alternative the output so far allows is
// followed until a byte rules it out; oneOf is enforced as anyOf, as
// xgrammar does; at most 128 alternatives may start with the same
// character, jsongrammar.MaxLive, a *ParamError beyond, and past 128 live
// alternatives at once the later ones are not followed); $ref to #,
// #/$defs/NAME or #/definitions/NAME.
// Annotations (title, description, default, examples...) are ignored.
// Numbers have at most 19 integer, 20 fraction and 4 exponent digits,
// and output objects and arrays nest at most 32 deep. Any other keyword
// (allOf, prefixItems, multipleOf...) is a *ParamError
// (param response_format.json_schema.schema) naming it, as vLLM answers a
// schema its backend does not support with a 400; so is a schema of more
// than MaxSchemaBytes or nested deeper than MaxSchemaDepth, and one none
// of whose values fits in 32 levels of output nesting (a recursion
// without a base case). Where the output nests deeper, an optional
// property or branch that could not be closed within 32 levels is not
// offered.
func JSONSchemaConstraint(schema []byte) (*OutputConstraint, error) {
	return compileSchema(nil, schema, "response_format.json_schema.schema")
}

// compileSchema compiles schema, or takes it from cc; errors are
// *ParamErrors on param.
func compileSchema(cc *constraintCache, schema []byte, param string) (*OutputConstraint, error) {
	con, err := cc.schema(schema)
	if err != nil {
		return nil, &ParamError{Param: param, Msg: err.Error()}
	}
	return con, nil
}

// Limits on the choice and regex constraints (see ChoiceConstraint and
// RegexConstraint).
const (
	MaxRegexBytes  = regexgrammar.MaxPatternBytes // 16 KiB of pattern
	MaxChoiceList  = regexgrammar.MaxChoices      // 4096 choices
	MaxChoiceBytes = regexgrammar.MaxChoiceBytes  // 64 KiB of choices in all
)

// ChoiceConstraint returns the constraint of vLLM's structured_outputs
// choice (and the legacy guided_choice): the output is exactly one of
// choices, byte for byte (vLLM compiles them to the grammar of their
// alternation). Choices may repeat; an empty one lets the output be
// empty. Where one choice is a prefix of another, EOS is allowed after
// the shorter and the model decides. Errors (*ParamError, param
// structured_outputs.choice): no choices, a NUL character, more than
// MaxChoiceList choices or MaxChoiceBytes in all.
func ChoiceConstraint(choices []string) (*OutputConstraint, error) {
	return compileChoice(nil, choices, "structured_outputs.choice")
}

// compileChoice compiles choices, or takes them from cc; errors are
// *ParamErrors on param.
func compileChoice(cc *constraintCache, choices []string, param string) (*OutputConstraint, error) {
	con, err := cc.choice(choices)
	if err != nil {
		return nil, &ParamError{Param: param, Msg: err.Error()}
	}
	return con, nil
}

// RegexConstraint returns the constraint of vLLM's structured_outputs
// regex (and the legacy guided_regex): the output must match pattern in
// full. The syntax is Go's regexp/syntax with Perl flags (classes, \d \w
// \s, \pL, {m,n}, lazy quantifiers, groups, (?i), (?s)), the common
// ground of Python's re and xgrammar; a leading ^ and a trailing $ are
// allowed (full match either way). Errors (*ParamError, param
// structured_outputs.regex, as vLLM answers a regex xgrammar cannot
// compile with a 400): syntax Go does not parse (backreferences,
// lookaround), anchors or word boundaries anywhere else (^ and $ inside,
// (?m), \b), a NUL character, a pattern of more than MaxRegexBytes or a
// program of more than 100,000 instructions (internal/regexgrammar).
func RegexConstraint(pattern string) (*OutputConstraint, error) {
	return compileRegex(nil, pattern, "structured_outputs.regex")
}

// compileRegex compiles pattern, or takes it from cc; errors are
// *ParamErrors on param.
func compileRegex(cc *constraintCache, pattern, param string) (*OutputConstraint, error) {
	con, err := cc.regex(pattern)
	if err != nil {
		return nil, &ParamError{Param: param, Msg: err.Error()}
	}
	return con, nil
}

// cursor returns a generation's position at the start of c, masked over v.
func (c *OutputConstraint) cursor(v *constraintVocab) grammarCursor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rg != nil {
		rv := v.regexVocab()
		if c.rm == nil {
			c.rm = map[*regexgrammar.Vocab]*regexgrammar.Masker{}
		}
		m := c.rm[rv]
		if m == nil {
			m = regexgrammar.NewMasker(rv)
			c.rm[rv] = m
		}
		return &regexCursor{m: m, st: c.rg.Start()}
	}
	if c.m == nil {
		c.m = map[*jsongrammar.Vocab]*jsongrammar.Masker{}
	}
	m := c.m[v.v]
	if m == nil {
		m = jsongrammar.NewMasker(v.v)
		c.m[v.v] = m
	}
	return &jsonCursor{m: m, st: c.g.Start()}
}

// grammarCursor is one generation's position in its constraint's
// automaton (JSON or regex) with the masker of its vocabulary.
type grammarCursor interface {
	// allowed returns the bitset of the tokens that can follow (shared:
	// not to be modified).
	allowed() []uint64
	feed(b []byte) bool
	accepting() bool
	done() bool
}

type jsonCursor struct {
	m   *jsongrammar.Masker
	st  *jsongrammar.State
	key []byte
}

func (j *jsonCursor) allowed() []uint64 {
	bits, key := j.m.Allowed(j.st, j.key)
	j.key = key
	return bits
}
func (j *jsonCursor) feed(b []byte) bool { return j.st.FeedBytes(b) }
func (j *jsonCursor) accepting() bool    { return j.st.Accepting() }
func (j *jsonCursor) done() bool         { return j.st.Done() }

type regexCursor struct {
	m  *regexgrammar.Masker
	st *regexgrammar.State
}

func (r *regexCursor) allowed() []uint64  { return r.m.Allowed(r.st) }
func (r *regexCursor) feed(b []byte) bool { return r.st.FeedBytes(b) }
func (r *regexCursor) accepting() bool    { return r.st.Accepting() }
func (r *regexCursor) done() bool         { return r.st.Done() }

// constraintVocab is an engine's vocabulary prepared for constrained
// decoding: the bytes of each token id (nil for special and added tokens)
// and their tries (the regex one built on first use).
type constraintVocab struct {
	bytes  [][]byte
	v      *jsongrammar.Vocab
	rvOnce sync.Once
	rv     *regexgrammar.Vocab
}

// regexVocab returns the vocabulary's trie for regex masking.
func (v *constraintVocab) regexVocab() *regexgrammar.Vocab {
	v.rvOnce.Do(func() { v.rv = regexgrammar.NewVocab(v.bytes) })
	return v.rv
}

// newConstraintVocab prepares tok's vocabulary, padded to vocab ids.
func newConstraintVocab(tok *tokenizer.Tokenizer, vocab int) *constraintVocab {
	added := map[int32]bool{}
	for _, a := range tok.AddedTokens() {
		added[a.ID] = true
	}
	bs := make([][]byte, vocab)
	for id := range bs {
		if b, ok := tok.TokenBytes(int32(id)); ok && !added[int32(id)] {
			bs[id] = b
		}
	}
	return &constraintVocab{bytes: bs, v: jsongrammar.NewVocab(bs)}
}

// constraintVocab returns the engine's prepared vocabulary, built on first
// use (about 0.1 s for DeepSeek's), or nil when the engine has no
// tokenizer.Tokenizer.
func (e *Engine) constraintVocab() *constraintVocab {
	e.vocabOnce.Do(func() {
		if e.chat == nil {
			return
		}
		tc, ok := e.chat.tok.(tokenizerCodec)
		if !ok {
			return
		}
		e.vocab = newConstraintVocab(tc.t, e.b.VocabSize())
	})
	return e.vocab
}

// constrained is one generation's position in its OutputConstraint.
type constrained struct {
	vocab  *constraintVocab
	st     grammarCursor
	after  int32 // the token that activates the constraint (</think>), -1: active from the start
	active bool
	done   bool // a stop token ended the value, or a token was refused: no more masking
	dead   bool // the last mask allowed no token and the value is incomplete
	eos    []int32
}

func newConstrained(c *OutputConstraint, v *constraintVocab, after int32, eos []int32) *constrained {
	return &constrained{vocab: v, st: c.cursor(v), after: after, active: after < 0, eos: eos}
}

// masking reports whether the next token is constrained.
func (c *constrained) masking() bool { return c != nil && c.active && !c.done }

// mask writes logits with the disallowed tokens at -Inf into dst and
// returns it, and whether only stop tokens are allowed: the value is
// complete and nothing can follow (a closed object, or a top-level scalar
// no token can extend), or no token can continue it (a vocabulary without
// the bytes it needs: the output then ends there, incomplete, rather than
// on a token outside the grammar). stops are the sampler's stop ids (EOS
// unless ignored, and stop_token_ids); when only stop tokens are allowed
// and there are none, the model's EOS ids are.
func (c *constrained) mask(logits, dst []float32, stops []int32) ([]float32, bool) {
	bits := c.st.allowed()
	dst = dst[:len(logits)]
	copy(dst, logits)
	ninf := float32(math.Inf(-1))
	none := true // no token of the vocabulary is allowed
	for w := 0; w*64 < len(dst); w++ {
		off := uint64(0) // the disallowed ids of this word
		if w < len(bits) {
			off = ^bits[w]
		} else {
			off = ^uint64(0)
		}
		if on := ^off; on != 0 && (w*64+64 <= len(dst) || on&(1<<(len(dst)-w*64)-1) != 0) {
			none = false
		}
		if base := w * 64; off == ^uint64(0) && base+64 <= len(dst) {
			run := dst[base : base+64]
			for i := range run {
				run[i] = ninf
			}
			continue
		}
		for off != 0 {
			i := w*64 + mbits.TrailingZeros64(off)
			if i >= len(dst) {
				break
			}
			dst[i] = ninf
			off &= off - 1
		}
	}
	onlyStop := c.st.done() || none
	c.dead = none && !c.st.accepting()
	if c.st.accepting() || none {
		if len(stops) == 0 && onlyStop {
			stops = c.eos
		}
		for _, id := range stops {
			if int(id) < len(dst) {
				dst[id] = logits[id]
			}
		}
	}
	return dst, onlyStop
}

// completed reports whether a stop token ended a complete value, or an
// incomplete one that no token could continue.
func (c *constrained) completed() bool {
	return c != nil && c.done && (c.st.accepting() || c.dead)
}

// observe advances the constraint past an output token (sampled or
// forced); stop tells whether tok is one of the sampler's stop tokens. The
// model's EOS ends the constraint even when ignored (ignore_eos): the
// mask allows it only where the value may end.
func (c *constrained) observe(tok int32, stop bool) {
	if c == nil || c.done {
		return
	}
	if !c.active {
		c.active = tok == c.after
		return
	}
	if stop || slices.Contains(c.eos, tok) || tok < 0 || int(tok) >= len(c.vocab.bytes) || !c.st.feed(c.vocab.bytes[tok]) {
		c.done = true
	}
}

// clampLogprobs replaces -Inf logprobs (tokens the constraint excluded)
// by -9999, as vLLM's chat serving clamps them (JSON has no -Infinity).
func clampLogprobs(lp *float32, top []TokenLogprob) {
	if math.IsInf(float64(*lp), -1) {
		*lp = -9999
	}
	for i := range top {
		if math.IsInf(float64(top[i].Logprob), -1) {
			top[i].Logprob = -9999
		}
	}
}

// responseFormatConstraint returns the constraint a response_format asks
// for: nil for absent, null or text; the json_object grammar; or the
// compiled schema of json_schema (its schema absent: json_object, as the
// prompt encoder then shows {"type": "object"}). structural_tag is a
// *ParamError: vLLM enforces it through xgrammar's structural tags, which
// this engine does not implement, and accepting it unenforced would hand
// clients unchecked output. param names the field ("response_format").
// Constraints come from cc (nil: compiled anew).
func responseFormatConstraint(cc *constraintCache, raw json.RawMessage, param string) (*OutputConstraint, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if t[0] != '{' || json.Unmarshal(t, &rf) != nil {
		return nil, paramErr(param, "must be an object")
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return cc.jsonObject(), nil
	case "json_schema":
		if rf.JSONSchema == nil {
			return nil, paramErr(param+".json_schema", "required when type is json_schema")
		}
		s := bytes.TrimSpace(rf.JSONSchema.Schema)
		if len(s) == 0 || bytes.Equal(s, []byte("null")) {
			return cc.jsonObject(), nil
		}
		return compileSchema(cc, s, param+".json_schema.schema")
	case "structural_tag":
		return nil, paramErr(param+".type", "structural_tag is not supported (it would not be enforced); use json_schema or json_object")
	}
	return nil, paramErr(param+".type", "must be text, json_object or json_schema, got %q", rf.Type)
}

// errNoConstraintVocab: an OutputConstraint on an engine without a
// tokenizer.Tokenizer (token bytes are needed to mask).
var errNoConstraintVocab = errors.New("structured outputs need the engine's tokenizer (token bytes); this engine has none")

// requestConstraint returns the constraint of a request's response_format,
// structured_outputs and legacy guided_choice / guided_regex (nil: none).
// As vLLM, one kind of constraint per request: two kinds in
// structured_outputs, or structured_outputs with response_format, are a
// *ParamError (param structured_outputs). The legacy fields are read, as
// vLLM read them before it dropped them, only when structured_outputs is
// absent, and then as its choice and regex (both set: the same error).
// Constraints come from cc (nil: compiled anew).
func requestConstraint(cc *constraintCache, rf json.RawMessage, rs *RequestSampling) (*OutputConstraint, error) {
	c, err := responseFormatConstraint(cc, rf, "response_format")
	if err != nil {
		return c, err
	}
	so, prefix := rs.StructuredOutputs, "structured_outputs."
	if so == nil && (rs.GuidedChoice != nil || rs.GuidedRegex != nil) {
		so, prefix = &StructuredOutputs{Choice: rs.GuidedChoice, Regex: rs.GuidedRegex}, "guided_"
	}
	if so == nil {
		return c, nil
	}
	var sc *OutputConstraint
	var kinds []string
	if j := bytes.TrimSpace(so.JSON); len(j) > 0 && !bytes.Equal(j, []byte("null")) {
		kinds = append(kinds, "json")
		if j[0] == '"' { // vLLM accepts the schema as a JSON string too
			var s string
			if err := json.Unmarshal(j, &s); err != nil {
				return nil, paramErr("structured_outputs.json", "must be a JSON Schema or a string holding one")
			}
			j = []byte(s)
		}
		if sc, err = compileSchema(cc, j, "structured_outputs.json"); err != nil {
			return nil, err
		}
	}
	if so.JSONObject != nil && *so.JSONObject {
		kinds = append(kinds, "json_object")
		sc = cc.jsonObject()
	}
	if so.Regex != nil {
		kinds = append(kinds, "regex")
		if sc, err = compileRegex(cc, *so.Regex, prefix+"regex"); err != nil {
			return nil, err
		}
	}
	if so.Choice != nil {
		kinds = append(kinds, "choice")
		if sc, err = compileChoice(cc, so.Choice, prefix+"choice"); err != nil {
			return nil, err
		}
	}
	for _, x := range []struct {
		name string
		set  bool
	}{{"grammar", so.Grammar != nil}, {"structural_tag", so.StructuralTag != nil}} {
		if x.set {
			return nil, paramErr("structured_outputs."+x.name, "not supported (json, json_object, regex and choice are)")
		}
	}
	if c != nil {
		kinds = append(kinds, "response_format")
	}
	if len(kinds) > 1 {
		param := "structured_outputs"
		if prefix == "guided_" {
			param = "guided_choice"
		}
		return nil, paramErr(param, "only one kind of structured outputs constraint is allowed, got %s", strings.Join(kinds, ", "))
	}
	if sc != nil {
		return sc, nil
	}
	return c, nil
}
