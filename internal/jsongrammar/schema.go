// Package jsongrammar is a byte-level JSON automaton for constrained
// decoding (OpenAI response_format json_object and json_schema, as vLLM
// serves them through xgrammar): a Grammar compiled from a JSON Schema
// subset, a State fed one byte at a time, and a Vocab that turns a State
// into the set of vocabulary tokens whose bytes the State accepts.
//
// Behaviour follows xgrammar's JSON Schema converter with vLLM's settings
// (any_whitespace true, strict_mode true):
//   - whitespace between tokens is any run of space, newline and tab
//     (no carriage return), at most MaxWhitespace bytes per run (a bound
//     xgrammar only applies with max_whitespace_cnt; it keeps a model from
//     looping on whitespace); none before or after the top-level value;
//   - an object's declared properties come in schema order, each optional
//     one may be skipped, every required one must appear; with properties
//     declared and additionalProperties absent or false no other key is
//     allowed (xgrammar's strict mode); an object schema without
//     properties allows any keys;
//   - enum and const values are written as their compact JSON text, keys in
//     the order the schema gives them;
//   - numbers have at most MaxIntDigits integer digits, MaxFracDigits
//     fraction digits and MaxExpDigits exponent digits (a bound xgrammar
//     does not have; it keeps generation from looping on digits); a number
//     with a range, at most MaxRangeFracDigits fraction digits and no
//     exponent, as xgrammar's range expression;
//   - anyOf and oneOf alternatives are followed together (a set of live
//     threads, at most MaxLive) until the output tells them apart; oneOf
//     is enforced as anyOf, as xgrammar does;
//   - a string's pattern or format is matched, in full, against its
//     decoded value (escapes decoded), by a rune automaton of
//     internal/regexgrammar (see Compile).
//
// The package imports only the standard library and internal/regexgrammar.
package jsongrammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Limits on schemas and on the automaton.
const (
	// MaxSchemaBytes bounds the JSON text of a schema.
	MaxSchemaBytes = 64 << 10
	// MaxSchemaDepth bounds the nesting of the schema document (objects and
	// arrays inside each other).
	MaxSchemaDepth = 32
	// MaxNodes bounds the compiled nodes of one schema.
	MaxNodes = 4096
	// MaxNesting bounds the nesting of objects and arrays in the output.
	MaxNesting = 32
	// MaxWhitespace bounds one run of whitespace bytes in the output.
	MaxWhitespace = 32
	// MaxIntDigits, MaxFracDigits and MaxExpDigits bound a number's parts.
	MaxIntDigits  = 19
	MaxFracDigits = 20
	MaxExpDigits  = 4
	// MaxRangeFracDigits bounds the fraction digits of a number with
	// minimum, maximum, exclusiveMinimum or exclusiveMaximum, which is
	// written without an exponent (xgrammar's range expression, precision
	// 6).
	MaxRangeFracDigits = 6
	// MaxLive bounds the alternatives of an anyOf (or oneOf) that one
	// byte can start (a schema with more is an *Error), and the live
	// alternatives a State follows at once: where nested anyOfs would
	// multiply past it, the later alternatives (in schema order) are
	// dropped, so that the work per byte stays bounded; what is output
	// still matches the schema.
	MaxLive = 128
)

// maxFirstLeaves bounds the entries of all the anyOf first-byte tables of
// one grammar (int32 each).
const maxFirstLeaves = 1 << 20

// Error is a schema the compiler refuses: unsupported (a keyword outside
// the supported subset, named by Keyword), invalid, or over a limit. Path
// is a JSON pointer to the offending schema.
type Error struct {
	Keyword string // the keyword at fault, "" when none applies
	Path    string // JSON pointer into the schema, "" for the root
	Msg     string
}

// Error implements error.
func (e *Error) Error() string {
	at := e.Path
	if at == "" {
		at = "/"
	}
	if e.Keyword != "" {
		return fmt.Sprintf("schema at %s: %q: %s", at, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("schema at %s: %s", at, e.Msg)
}

type kind uint8

const (
	kObject kind = iota
	kArray
	kString
	kNumber
	kInteger
	kLiteral // enum, const, boolean, null: one of lits, byte for byte
	kAnyOf
	kRef // unresolved $ref while compiling
)

type prop struct {
	name []byte // the key's JSON string content, escaped, then the closing quote
	node int32
	req  bool
}

type node struct {
	kind kind
	// object
	props   []prop
	nextReq []int32 // nextReq[i]: the first required property at index >= i, -1 none; len(props)+1 entries
	addl    int32   // value node of additional keys (free object), -1 none
	// array
	items              int32
	minItems, maxItems int32 // maxItems -1: none
	// string
	minLen, maxLen int32    // maxLen -1: none
	re             *pattern // pattern or format (nil: none)
	// integer and number
	bounded bool  // minimum / maximum given: lo..hi holds
	lo, hi  int64 // inclusive range of a bounded integer; a bounded number's floors
	// loF, hiF: a bounded number's range is lo + loF/10^6 .. hi + hiF/10^6
	// (0 <= loF, hiF < 10^6: the numbers it allows have at most
	// MaxRangeFracDigits fraction digits)
	loF, hiF int32
	// literal
	lits [][]byte // sorted, distinct
	// anyOf
	alts []int32
	// firstAt and firstLeaf list the leaf alternatives (nodes other than
	// anyOf) that can start with byte b, in the order of the alternatives:
	// firstLeaf[firstAt[b]:firstAt[b+1]].
	firstAt   *[257]int32
	firstLeaf []int32
	ref       string
	// need is the fewest levels of objects and arrays a value of the node
	// nests (0 for a scalar; more than MaxNesting: no value fits), so that
	// the automaton never opens a value it could not close.
	need int32
}

// Grammar is a compiled schema. It is immutable and safe for concurrent
// use; each generation keeps its own State.
type Grammar struct {
	nodes []node
	root  int32
	size  int // Bytes
}

// Built-in nodes of every grammar.
const (
	nAnyObject int32 = iota
	nAnyArray
	nAnyString
	nAnyNumber
	nAnyLiteral
	nAny
	nBuiltin
)

func newGrammar() *Grammar {
	g := &Grammar{}
	g.nodes = append(g.nodes,
		node{kind: kObject, addl: nAny, nextReq: []int32{-1}},
		node{kind: kArray, items: nAny, maxItems: -1},
		node{kind: kString, maxLen: -1},
		node{kind: kNumber},
		node{kind: kLiteral, lits: [][]byte{[]byte("false"), []byte("null"), []byte("true")}},
		node{kind: kAnyOf, alts: []int32{nAnyObject, nAnyArray, nAnyString, nAnyNumber, nAnyLiteral}},
	)
	if err := g.finish(); err != nil {
		panic(err) // the built-in nodes are consistent
	}
	return g
}

// JSONObject is the grammar of response_format json_object: any JSON
// object (vLLM compiles the schema {"type": "object"} for it).
func JSONObject() *Grammar {
	g := newGrammar()
	g.root = nAnyObject
	return g
}

// value is a decoded JSON value that keeps the order of object keys.
type value struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*value
	str  string
}

func (v *value) get(k string) *value {
	for i, kk := range v.keys {
		if kk == k {
			return v.vals[i]
		}
	}
	return nil
}

func decode(d *json.Decoder, depth int) (*value, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxSchemaDepth {
			return nil, &Error{Msg: fmt.Sprintf("nested deeper than %d levels", MaxSchemaDepth)}
		}
		v := &value{kind: 'a'}
		if t == '{' {
			v.kind = 'o'
		}
		for d.More() {
			if v.kind == 'o' {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if slices.Contains(v.keys, k) {
					return nil, &Error{Msg: fmt.Sprintf("duplicate key %q", k)}
				}
				v.keys = append(v.keys, k)
			}
			e, err := decode(d, depth+1)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, e)
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		return v, nil
	case string:
		return &value{kind: 's', str: t}, nil
	case json.Number:
		return &value{kind: 'n', str: t.String()}, nil
	case bool:
		return &value{kind: 'b', str: strconv.FormatBool(t)}, nil
	case nil:
		return &value{kind: 'z', str: "null"}, nil
	}
	return nil, errors.New("unexpected JSON token")
}

// appendJSON appends v's compact JSON text (keys in order, strings escaped
// as encoding/json does, without HTML escaping).
func appendJSON(b []byte, v *value) []byte {
	switch v.kind {
	case 'o', 'a':
		open, end := byte('['), byte(']')
		if v.kind == 'o' {
			open, end = '{', '}'
		}
		b = append(b, open)
		for i, e := range v.vals {
			if i > 0 {
				b = append(b, ',')
			}
			if v.kind == 'o' {
				b = append(appendString(b, v.keys[i]), ':')
			}
			b = appendJSON(b, e)
		}
		return append(b, end)
	case 's':
		return appendString(b, v.str)
	}
	return append(b, v.str...)
}

func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// Keywords that describe a schema without constraining the output.
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$defs": true, "definitions": true,
}

type compiler struct {
	g       *Grammar
	doc     *value
	refs    map[string]int32
	res     map[string]*pattern // compiled patterns by their text
	reTotal int                 // states of the patterns compiled
	reWork  int                 // steps building them (RuneDFA.Work)
}

// Compile compiles a JSON Schema (the "schema" of response_format
// json_schema) into a Grammar. The supported subset:
//   - type: object, array, string, integer, number, boolean, null, or a
//     list of them; without type, the kind is inferred from properties /
//     items / enum / const, otherwise any JSON value; true and {} are any value;
//   - object: properties, required, additionalProperties false (or absent
//     with properties: strict), or true / a schema without properties;
//   - array: items (a schema), minItems, maxItems;
//   - string: minLength, maxLength (code points, an escape counts one);
//     pattern: the string's decoded value must match it in full (as
//     xgrammar, which ignores ^ and $; here a leading ^ and a trailing $
//     are allowed and change nothing, other anchors, \b, lookaround and
//     backreferences are an *Error naming "pattern": regexgrammar's syntax
//     and limits, and at most MaxPatternStates automaton states, the
//     schema's patterns MaxSchemaPatternStates together). The JSON text
//     is decoded as it is written: a character may be written escaped
//     (\n, \", \uXXXX, a surrogate pair) wherever the pattern accepts
//     the character, control characters, " and \ only escaped, lone
//     surrogates never. format: date, time, date-time, duration, email,
//     hostname, ipv4, ipv6, uuid, uri, uri-reference, uri-template,
//     json-pointer, relative-json-pointer are enforced as patterns with
//     xgrammar's expressions (see formats); any other format is an *Error
//     naming it where type is (or lists) "string", ignored elsewhere, and
//     pattern or format beside minLength / maxLength an *Error
//     naming the length, as vLLM refuses both before xgrammar (which
//     would drop the lengths). A pattern beside a format must hold too:
//     the automaton is the product of both (xgrammar would drop the
//     pattern; an empty product is an *Error naming "pattern"). pattern,
//     and a known format, without type imply type string;
//   - integer and number: minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum. A bounded number is written as xgrammar's range
//     expression writes it: no exponent, at most MaxRangeFracDigits
//     fraction digits, the bounds exact on that grid (minimum 0.1234567
//     allows 0.123457 and up); an empty range on it, or one beyond 64-bit
//     integer parts, is an *Error naming the keyword. A minus sign is
//     allowed only where the lower bound is negative (absent included),
//     "-0" then being 0;
//   - enum, const (any JSON values);
//   - anyOf and oneOf (oneOf enforced as anyOf, as xgrammar does: the
//     output matches at least one alternative, not necessarily exactly
//     one), any alternatives of this subset, whatever they start with:
//     objects with different or overlapping properties, strings with
//     different enums, arrays of different items... The State follows
//     every alternative that the bytes so far allow and drops those a
//     byte rules out. At most MaxLive alternatives may start with one
//     byte (more is an *Error), and where nested alternatives would
//     multiply past MaxLive live ones, the later ones are not followed;
//   - $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed).
//
// Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly) are ignored. Any other
// keyword gives an *Error naming it, as does a schema over MaxSchemaBytes,
// MaxSchemaDepth or MaxNodes, and one none of whose values nests within
// MaxNesting. Integer bounds are exact (not rounded through float64); a
// \u escape pair of surrogates counts as one character.
func Compile(schema []byte) (*Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, &Error{Msg: fmt.Sprintf("%d bytes, more than %d", len(schema), MaxSchemaBytes)}
	}
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	doc, err := decode(d, 0)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Msg: "not valid JSON: " + err.Error()}
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &Error{Msg: "not valid JSON: data after the schema"}
	}
	c := &compiler{g: newGrammar(), doc: doc, refs: map[string]int32{}, res: map[string]*pattern{}}
	root, err := c.compile(doc, "")
	if err != nil {
		return nil, err
	}
	c.g.root = root
	if err := c.resolve(); err != nil {
		return nil, err
	}
	if err := c.g.finish(); err != nil {
		return nil, err
	}
	if c.g.nodes[root].need > MaxNesting {
		return nil, &Error{Msg: fmt.Sprintf("no value of the schema nests within %d levels of objects and arrays (a recursion without a base case?)", MaxNesting)}
	}
	return c.g, nil
}

func (c *compiler) add(n node, path string) (int32, error) {
	if len(c.g.nodes) >= MaxNodes {
		return 0, &Error{Path: path, Msg: fmt.Sprintf("more than %d schema nodes", MaxNodes)}
	}
	c.g.nodes = append(c.g.nodes, n)
	return int32(len(c.g.nodes) - 1), nil
}

func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (c *compiler) compile(v *value, path string) (int32, error) {
	switch v.kind {
	case 'b':
		if v.str == "true" {
			return nAny, nil
		}
		return 0, &Error{Path: path, Msg: "the schema false accepts nothing"}
	case 'o':
	default:
		return 0, &Error{Path: path, Msg: "a schema must be an object or a boolean"}
	}
	for _, k := range v.keys {
		switch k {
		case "type", "properties", "required", "additionalProperties", "items",
			"minItems", "maxItems", "minLength", "maxLength", "enum", "const",
			"anyOf", "oneOf", "$ref", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
			"pattern", "format":
		default:
			if !annotations[k] {
				return 0, &Error{Keyword: k, Path: path, Msg: "not supported (supported: type, properties, required, additionalProperties, items, minItems, maxItems, minLength, maxLength, pattern, format, minimum, maximum, exclusiveMinimum, exclusiveMaximum, enum, const, anyOf, oneOf, $ref)"}
			}
		}
	}
	if r := v.get("$ref"); r != nil {
		if len(v.keys) > 1 {
			for _, k := range v.keys {
				if k != "$ref" && !annotations[k] {
					return 0, &Error{Keyword: k, Path: path, Msg: "not supported beside $ref"}
				}
			}
		}
		if r.kind != 's' {
			return 0, &Error{Keyword: "$ref", Path: path, Msg: "must be a string"}
		}
		return c.ref(r.str, path)
	}
	if e, cst := v.get("enum"), v.get("const"); e != nil || cst != nil {
		var vals []*value
		if cst != nil {
			vals = []*value{cst}
		} else {
			if e.kind != 'a' || len(e.vals) == 0 {
				return 0, &Error{Keyword: "enum", Path: path, Msg: "must be a non-empty array"}
			}
			vals = e.vals
		}
		if e != nil && cst != nil {
			return 0, &Error{Keyword: "enum", Path: path, Msg: "not supported together with const"}
		}
		var lits [][]byte
		for _, x := range vals {
			lits = append(lits, appendJSON(nil, x))
		}
		return c.add(node{kind: kLiteral, lits: lits}, path)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		a := v.get(kw)
		if a == nil {
			continue
		}
		if a.kind != 'a' || len(a.vals) == 0 {
			return 0, &Error{Keyword: kw, Path: path, Msg: "must be a non-empty array"}
		}
		for _, k := range v.keys {
			if k != kw && !annotations[k] {
				return 0, &Error{Keyword: k, Path: path, Msg: "not supported beside " + kw}
			}
		}
		n := node{kind: kAnyOf}
		for i, alt := range a.vals {
			ai, err := c.compile(alt, fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return 0, err
			}
			n.alts = append(n.alts, ai)
		}
		return c.add(n, path)
	}
	var types []string
	if t := v.get("type"); t != nil {
		switch t.kind {
		case 's':
			types = []string{t.str}
		case 'a':
			for _, x := range t.vals {
				if x.kind != 's' {
					return 0, &Error{Keyword: "type", Path: path, Msg: "must be a string or an array of strings"}
				}
				if !slices.Contains(types, x.str) { // ["string","string"] is "string"
					types = append(types, x.str)
				}
			}
		default:
			return 0, &Error{Keyword: "type", Path: path, Msg: "must be a string or an array of strings"}
		}
		if len(types) == 0 {
			return 0, &Error{Keyword: "type", Path: path, Msg: "must not be empty"}
		}
	} else {
		switch {
		case v.get("properties") != nil || v.get("required") != nil || v.get("additionalProperties") != nil:
			types = []string{"object"}
		case v.get("items") != nil || v.get("minItems") != nil || v.get("maxItems") != nil:
			types = []string{"array"}
		case v.get("minLength") != nil || v.get("maxLength") != nil || v.get("pattern") != nil || knownFormat(v):
			types = []string{"string"}
		default:
			return nAny, nil
		}
	}
	if len(types) == 1 {
		return c.typed(v, types[0], path)
	}
	n := node{kind: kAnyOf}
	for _, t := range types {
		ti, err := c.typed(v, t, path)
		if err != nil {
			return 0, err
		}
		n.alts = append(n.alts, ti)
	}
	return c.add(n, path)
}

func intKeyword(v *value, k, path string) (int32, bool, error) {
	x := v.get(k)
	if x == nil {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(x.str, 10, 32)
	if x.kind != 'n' || err != nil || n < 0 {
		return 0, false, &Error{Keyword: k, Path: path, Msg: "must be a non-negative integer"}
	}
	return int32(n), true, nil
}

// intBound returns the integer bound that range keyword k with number x
// gives, exactly: minimum ceil(x), exclusiveMinimum floor(x)+1, maximum
// floor(x), exclusiveMaximum ceil(x)-1; a magnitude over 2^64 is returned
// as ±2^65, one under 2^-64 as its sign's floor or ceiling. ok false: x is
// not a number (or its exponent is out of range).
func intBound(x *value, k string) (b *big.Int, ok bool) { return scaledBound(x, k, 0) }

// scaledBound is intBound of x·10^scale (scale 0 or MaxRangeFracDigits):
// the bound in units of 10^-scale, a magnitude over 2^(64+4·scale)
// returned as ±2^(65+4·scale).
func scaledBound(x *value, k string, scale int) (b *big.Int, ok bool) {
	if x.kind != 'n' {
		return nil, false
	}
	f, _, err := big.ParseFloat(x.str, 10, 64, big.ToNearestEven)
	if err != nil {
		return nil, false
	}
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	f.Mul(f, new(big.Float).SetInt(pow))
	floor, frac := new(big.Int), false // floor(x), x not an integer
	switch e := f.MantExp(nil); {
	case f.Sign() == 0:
	case e > 64+4*scale:
		floor.Lsh(big.NewInt(int64(f.Sign())), uint(65+4*scale))
	case e < -64:
		frac = true
		if f.Sign() < 0 {
			floor.SetInt64(-1)
		}
	default:
		// |x| within [2^-64, 2^64]: the written exponent is at most about
		// the schema's length, so the exact rational is cheap.
		r, ok := new(big.Rat).SetString(x.str)
		if !ok {
			return nil, false
		}
		r.Mul(r, new(big.Rat).SetInt(pow))
		var m big.Int
		floor.DivMod(r.Num(), r.Denom(), &m) // Euclidean: the floor, as Denom > 0
		frac = m.Sign() != 0
	}
	switch k {
	case "minimum":
		if frac {
			floor.Add(floor, big.NewInt(1))
		}
	case "exclusiveMinimum":
		floor.Add(floor, big.NewInt(1))
	case "exclusiveMaximum":
		if !frac {
			floor.Sub(floor, big.NewInt(1))
		}
	}
	return floor, true
}

// bounds reads a pair of length keywords: lo (0 when absent) and hi (-1
// when absent), hi >= lo.
func bounds(v *value, minKw, maxKw, path string) (lo, hi int32, err error) {
	if lo, _, err = intKeyword(v, minKw, path); err != nil {
		return 0, 0, err
	}
	hi, ok, err := intKeyword(v, maxKw, path)
	switch {
	case err != nil:
		return 0, 0, err
	case !ok:
		return lo, -1, nil
	case hi < lo:
		return 0, 0, &Error{Keyword: maxKw, Path: path, Msg: "is less than " + minKw}
	}
	return lo, hi, nil
}

// intRange reads minimum, maximum, exclusiveMinimum and exclusiveMaximum
// as the inclusive integer range they leave (within ±(2^63-1)).
func intRange(v *value, path string) (bounded bool, lo, hi int64, err error) {
	lo, hi = -math.MaxInt64, math.MaxInt64
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		x := v.get(k)
		if x == nil {
			continue
		}
		b, ok := intBound(x, k)
		if !ok {
			return false, 0, 0, &Error{Keyword: k, Path: path, Msg: "must be a number"}
		}
		bounded = true
		// The output's integers are int64: a lower bound below or an upper
		// one above that range leaves the range's, one beyond it on the
		// other side excludes every integer.
		lower := k == "minimum" || k == "exclusiveMinimum"
		var ib int64
		switch {
		case b.Cmp(big.NewInt(math.MaxInt64)) > 0:
			if lower {
				return false, 0, 0, &Error{Keyword: k, Path: path, Msg: "no integer within the bounds fits in 64 bits"}
			}
			ib = math.MaxInt64
		case b.Cmp(big.NewInt(-math.MaxInt64)) < 0:
			if !lower {
				return false, 0, 0, &Error{Keyword: k, Path: path, Msg: "no integer within the bounds fits in 64 bits"}
			}
			ib = -math.MaxInt64
		default:
			ib = b.Int64()
		}
		if lower {
			lo = max(lo, ib)
		} else {
			hi = min(hi, ib)
		}
	}
	if lo > hi {
		return false, 0, 0, &Error{Keyword: "minimum", Path: path, Msg: "no integer lies within the bounds"}
	}
	return bounded, lo, hi, nil
}

// numRange reads minimum, maximum, exclusiveMinimum and exclusiveMaximum
// on a number as the inclusive range they leave on the grid of
// 10^-MaxRangeFracDigits, as xgrammar's range expression (precision 6)
// rounds its bounds: lo + loF/10^6 .. hi + hiF/10^6, exactly (not through
// float64), integer parts within ±(2^63-1). A range with no number of at
// most 6 fraction digits, or one beyond 64-bit integer parts, is an
// *Error.
func numRange(v *value, path string) (bounded bool, lo int64, loF int32, hi int64, hiF int32, err error) {
	const units = 1_000_000 // 10^MaxRangeFracDigits
	// The output's numbers have 64-bit integer parts: magnitudes up to
	// (2^63-1).999999, in units of 10^-6.
	maxU := new(big.Int).Mul(big.NewInt(math.MaxInt64), big.NewInt(units))
	maxU.Add(maxU, big.NewInt(units-1))
	minU := new(big.Int).Neg(maxU)
	lo, loF, hi, hiF = math.MinInt64, 1, math.MaxInt64, units-1 // -maxU, maxU
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		x := v.get(k)
		if x == nil {
			continue
		}
		b, ok := scaledBound(x, k, MaxRangeFracDigits)
		if !ok {
			return false, 0, 0, 0, 0, &Error{Keyword: k, Path: path, Msg: "must be a number"}
		}
		bounded = true
		lower := k == "minimum" || k == "exclusiveMinimum"
		switch {
		case b.Cmp(maxU) > 0 && lower, b.Cmp(minU) < 0 && !lower:
			return false, 0, 0, 0, 0, &Error{Keyword: k, Path: path, Msg: "no number within the bounds has a 64-bit integer part"}
		case b.Cmp(maxU) > 0:
			b = maxU
		case b.Cmp(minU) < 0:
			b = minU
		}
		var ip, fp big.Int
		ip.DivMod(b, big.NewInt(units), &fp) // Euclidean: 0 <= fp < units
		i, f := ip.Int64(), int32(fp.Int64())
		if lower && (i > lo || i == lo && f > loF) {
			lo, loF = i, f
		}
		if !lower && (i < hi || i == hi && f < hiF) {
			hi, hiF = i, f
		}
	}
	if lo > hi || lo == hi && loF > hiF {
		return false, 0, 0, 0, 0, &Error{Keyword: "minimum", Path: path, Msg: fmt.Sprintf("no number of at most %d fraction digits lies within the bounds", MaxRangeFracDigits)}
	}
	return bounded, lo, loF, hi, hiF, nil
}

func (c *compiler) typed(v *value, t, path string) (int32, error) {
	switch t {
	case "object":
		n := node{kind: kObject, addl: -1}
		if req := v.get("required"); req != nil && req.kind != 'a' {
			return 0, &Error{Keyword: "required", Path: path, Msg: "must be an array of strings"}
		}
		required := map[string]bool{}
		if req := v.get("required"); req != nil {
			for _, r := range req.vals {
				if r.kind != 's' {
					return 0, &Error{Keyword: "required", Path: path, Msg: "must be an array of strings"}
				}
				required[r.str] = true
			}
		}
		props := v.get("properties")
		if props != nil && props.kind != 'o' {
			return 0, &Error{Keyword: "properties", Path: path, Msg: "must be an object"}
		}
		if props != nil {
			for i, k := range props.keys {
				pi, err := c.compile(props.vals[i], path+"/properties/"+escapePtr(k))
				if err != nil {
					return 0, err
				}
				name := appendString(nil, k)[1:] // the content and the closing quote
				n.props = append(n.props, prop{name: name, node: pi, req: required[k]})
				delete(required, k)
			}
		}
		for k := range required {
			return 0, &Error{Keyword: "required", Path: path, Msg: fmt.Sprintf("%q is not among the properties", k)}
		}
		ap := v.get("additionalProperties")
		switch {
		case ap == nil && len(n.props) == 0:
			n.addl = nAny
		case ap == nil || (ap.kind == 'b' && ap.str == "false"):
		case len(n.props) > 0:
			return 0, &Error{Keyword: "additionalProperties", Path: path, Msg: "only false is supported beside properties"}
		default:
			ai, err := c.compile(ap, path+"/additionalProperties")
			if err != nil {
				return 0, err
			}
			n.addl = ai
		}
		return c.add(n, path)
	case "array":
		n := node{kind: kArray, items: nAny, maxItems: -1}
		if it := v.get("items"); it != nil {
			ii, err := c.compile(it, path+"/items")
			if err != nil {
				return 0, err
			}
			n.items = ii
		}
		var err error
		if n.minItems, n.maxItems, err = bounds(v, "minItems", "maxItems", path); err != nil {
			return 0, err
		}
		return c.add(n, path)
	case "string":
		n := node{kind: kString}
		var err error
		if n.minLen, n.maxLen, err = bounds(v, "minLength", "maxLength", path); err != nil {
			return 0, err
		}
		if n.re, err = c.stringPattern(v, path); err != nil {
			return 0, err
		}
		if n.re != nil && (v.get("minLength") != nil || v.get("maxLength") != nil) {
			k := "minLength"
			if v.get(k) == nil {
				k = "maxLength"
			}
			return 0, &Error{Keyword: k, Path: path, Msg: "not supported together with pattern or format"}
		}
		return c.add(n, path)
	case "integer":
		n := node{kind: kInteger}
		var err error
		if n.bounded, n.lo, n.hi, err = intRange(v, path); err != nil {
			return 0, err
		}
		return c.add(n, path)
	case "number":
		n := node{kind: kNumber}
		var err error
		if n.bounded, n.lo, n.loF, n.hi, n.hiF, err = numRange(v, path); err != nil {
			return 0, err
		}
		if !n.bounded {
			return nAnyNumber, nil
		}
		return c.add(n, path)
	case "boolean":
		return c.add(node{kind: kLiteral, lits: [][]byte{[]byte("false"), []byte("true")}}, path)
	case "null":
		return c.add(node{kind: kLiteral, lits: [][]byte{[]byte("null")}}, path)
	}
	return 0, &Error{Keyword: "type", Path: path, Msg: fmt.Sprintf("unknown type %q", t)}
}

// ref returns the node of a $ref, compiling its target on first use (a
// placeholder first, so that recursive schemas terminate).
func (c *compiler) ref(r, path string) (int32, error) {
	if i, ok := c.refs[r]; ok {
		return i, nil
	}
	var target *value
	switch {
	case r == "#":
		target = c.doc
	case strings.HasPrefix(r, "#/$defs/"), strings.HasPrefix(r, "#/definitions/"):
		sec, name, _ := strings.Cut(r[2:], "/")
		name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		if defs := c.doc.get(sec); defs != nil && defs.kind == 'o' {
			target = defs.get(name)
		}
		if target == nil {
			return 0, &Error{Keyword: "$ref", Path: path, Msg: fmt.Sprintf("%q not found", r)}
		}
	default:
		return 0, &Error{Keyword: "$ref", Path: path, Msg: fmt.Sprintf("%q: only #, #/$defs/NAME and #/definitions/NAME are supported", r)}
	}
	ph, err := c.add(node{kind: kRef, ref: r}, path)
	if err != nil {
		return 0, err
	}
	c.refs[r] = ph
	t, err := c.compile(target, r[1:])
	if err != nil {
		return 0, err
	}
	c.g.nodes[ph] = node{kind: kAnyOf, alts: []int32{t}}
	return ph, nil
}

// resolve checks that no placeholder is left.
func (c *compiler) resolve() error {
	for _, n := range c.g.nodes {
		if n.kind == kRef {
			return &Error{Keyword: "$ref", Msg: fmt.Sprintf("%q could not be resolved", n.ref)}
		}
	}
	return nil
}

// finish sorts literals, computes the objects' required-property tables
// and the anyOf first-byte tables.
func (g *Grammar) finish() error {
	for i := range g.nodes {
		n := &g.nodes[i]
		switch n.kind {
		case kLiteral:
			slices.SortFunc(n.lits, bytes.Compare)
			n.lits = slices.CompactFunc(n.lits, bytes.Equal)
		case kObject:
			n.nextReq = make([]int32, len(n.props)+1)
			n.nextReq[len(n.props)] = -1
			for j := len(n.props) - 1; j >= 0; j-- {
				n.nextReq[j] = n.nextReq[j+1]
				if n.props[j].req {
					n.nextReq[j] = int32(j)
				}
			}
		}
	}
	state := make([]uint8, len(g.nodes)) // 0 new, 1 in progress, 2 done
	fb := &firstBuild{mark: make([]uint32, len(g.nodes))}
	for i := range g.nodes {
		if g.nodes[i].kind == kAnyOf {
			if err := g.firstOf(int32(i), state, fb); err != nil {
				return err
			}
		}
	}
	g.needs()
	g.size = g.bytes()
	return nil
}

// Bytes is an estimate of the memory g holds, in bytes: its nodes with
// their properties, literals and anyOf tables, and its patterns' automata
// (each counted once, the formats' shared ones included). A Grammar does
// not grow after Compile.
func (g *Grammar) Bytes() int { return g.size }

// bytes computes Bytes.
func (g *Grammar) bytes() int {
	n := int(unsafe.Sizeof(Grammar{})) + cap(g.nodes)*int(unsafe.Sizeof(node{}))
	seen := map[*pattern]bool{}
	for i := range g.nodes {
		nd := &g.nodes[i]
		n += cap(nd.props)*int(unsafe.Sizeof(prop{})) + 4*(cap(nd.nextReq)+cap(nd.alts)+cap(nd.firstLeaf)) + len(nd.ref)
		for _, p := range nd.props {
			n += cap(p.name)
		}
		for _, l := range nd.lits {
			n += 24 + cap(l)
		}
		if nd.firstAt != nil {
			n += int(unsafe.Sizeof(*nd.firstAt))
		}
		if p := nd.re; p != nil && !seen[p] {
			seen[p] = true
			n += p.d.Bytes() + 4*cap(p.room)
		}
	}
	return n
}

// needs computes every node's need: the least fixpoint of object = 1 +
// the largest need of its required properties, array = 1 + (the items'
// need when minItems > 0), anyOf = the least need of its alternatives,
// scalars 0; values over MaxNesting are kept at MaxNesting+1.
func (g *Grammar) needs() {
	const none = MaxNesting + 1
	for i := range g.nodes {
		g.nodes[i].need = none
	}
	for changed := true; changed; {
		changed = false
		for i := range g.nodes {
			n := &g.nodes[i]
			var v int32
			switch n.kind {
			case kObject:
				v = 1
				for _, p := range n.props {
					if p.req {
						v = max(v, 1+g.nodes[p.node].need)
					}
				}
			case kArray:
				v = 1
				if n.minItems > 0 {
					v = 1 + g.nodes[n.items].need
				}
			case kAnyOf:
				v = none
				for _, a := range n.alts {
					v = min(v, g.nodes[a].need)
				}
			}
			if v = min(v, none); v < n.need {
				n.need, changed = v, true
			}
		}
	}
}

// leaves returns the leaf alternatives of anyOf node n that can start
// with byte c.
func (n *node) leaves(c byte) []int32 {
	return n.firstLeaf[n.firstAt[c]:n.firstAt[int(c)+1]]
}

// firstOf computes the first-byte table of anyOf node i from its
// alternatives' (each computed once: shared alternatives cost nothing
// more). The leaves of one byte are those of the alternatives in order,
// without repeats, less those another leaf of the byte accepts every value
// of: an integer beside number, an object, array or string beside the
// unconstrained one of its kind. More than MaxLive leaves for one byte, or
// more than maxFirstLeaves in the whole grammar, is an *Error.
func (g *Grammar) firstOf(i int32, state []uint8, fb *firstBuild) error {
	switch state[i] {
	case 1:
		return &Error{Keyword: "anyOf", Msg: "alternatives refer to themselves without consuming input"}
	case 2:
		return nil
	}
	state[i] = 1
	alts := g.nodes[i].alts
	var starts [][4]uint64 // the first bytes of each leaf alternative
	for _, a := range alts {
		var m [4]uint64
		if g.nodes[a].kind == kAnyOf {
			if err := g.firstOf(a, state, fb); err != nil {
				return err
			}
		} else {
			for _, b := range g.firstBytes(a) {
				m[b/64] |= 1 << (b % 64)
			}
		}
		starts = append(starts, m)
	}
	at := new([257]int32)
	var leaf []int32
	for b := range 256 {
		at[b] = int32(len(leaf))
		// The leaves of byte b in order, each once (fb.mark[x] == fb.stamp:
		// x is in already).
		fb.stamp++
		l := leaf[len(leaf):len(leaf)]
		add := func(x int32) {
			if fb.mark[x] != fb.stamp {
				fb.mark[x] = fb.stamp
				l = append(l, x)
			}
		}
		for k, a := range alts {
			if g.nodes[a].kind == kAnyOf {
				for _, x := range g.nodes[a].leaves(byte(b)) {
					add(x)
				}
			} else if starts[k][b/64]&(1<<(b%64)) != 0 {
				add(a)
			}
		}
		l = g.prune(l)
		if len(l) > MaxLive {
			return &Error{Keyword: "anyOf", Msg: fmt.Sprintf("%d alternatives can start with %q, more than %d", len(l), rune(b), MaxLive)}
		}
		leaf = append(leaf, l...)
	}
	at[256] = int32(len(leaf))
	if fb.total += len(leaf); fb.total > maxFirstLeaves {
		return &Error{Keyword: "anyOf", Msg: fmt.Sprintf("the alternatives' tables need more than %d entries", maxFirstLeaves)}
	}
	g.nodes[i].firstAt, g.nodes[i].firstLeaf = at, leaf
	state[i] = 2
	return nil
}

// firstBuild is the scratch of firstOf over one grammar.
type firstBuild struct {
	mark  []uint32 // by node: the stamp of the byte whose list holds it
	stamp uint32
	total int // entries of the tables so far
}

// prune drops from the leaves of one first byte those that another leaf
// of it covers (see firstOf).
func (g *Grammar) prune(l []int32) []int32 {
	has := func(k kind, builtin int32) bool {
		for _, x := range l {
			if g.nodes[x].kind == k && (builtin < 0 || x == builtin) {
				return true
			}
		}
		return false
	}
	number, obj, arr, str := has(kNumber, nAnyNumber), has(kObject, nAnyObject), has(kArray, nAnyArray), has(kString, nAnyString)
	out := l[:0:0]
	for _, x := range l {
		switch k := g.nodes[x].kind; {
		case k == kInteger && number,
			k == kObject && obj && x != nAnyObject,
			k == kArray && arr && x != nAnyArray,
			k == kString && str && x != nAnyString:
			continue
		}
		out = append(out, x)
	}
	return out
}

// firstBytes lists the bytes a value of leaf node i can start with.
func (g *Grammar) firstBytes(i int32) []byte {
	n := &g.nodes[i]
	switch n.kind {
	case kObject:
		return []byte{'{'}
	case kArray:
		return []byte{'['}
	case kString:
		return []byte{'"'}
	case kNumber, kInteger:
		return []byte("-0123456789")
	case kLiteral:
		var b []byte
		for _, l := range n.lits {
			if len(l) > 0 && !slices.Contains(b, l[0]) {
				b = append(b, l[0])
			}
		}
		return b
	}
	return nil
}
