package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/dsv4go/dsv4go/internal/pyjson"
)

// jkind is the kind of a decoded JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// jval is a JSON value that keeps object key order and number literals, so
// that re-serialization is deterministic and faithful (Go maps would reorder
// keys; float64 would reformat numbers).
type jval struct {
	kind jkind
	lit  string // number literal, "true"/"false", or the string value
	arr  []jval
	obj  []jkv
}

type jkv struct {
	key string
	val jval
}

// maxJSONDepth bounds nesting when decoding argument values.
const maxJSONDepth = 512

// decodeJSON parses one JSON value (surrounding blanks allowed). ok is false
// when s is not exactly one valid JSON value.
func decodeJSON(s string) (v jval, ok bool) {
	if !json.Valid([]byte(s)) {
		return jval{}, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jval{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return jval{}, false
	}
	return v, true
}

func decodeValue(dec *json.Decoder, depth int) (jval, error) {
	if depth > maxJSONDepth {
		return jval{}, fmt.Errorf("too deep")
	}
	t, err := dec.Token()
	if err != nil {
		return jval{}, err
	}
	switch x := t.(type) {
	case nil:
		return jval{kind: jNull}, nil
	case bool:
		if x {
			return jval{kind: jBool, lit: "true"}, nil
		}
		return jval{kind: jBool, lit: "false"}, nil
	case json.Number:
		return jval{kind: jNumber, lit: string(x)}, nil
	case string:
		return jval{kind: jString, lit: x}, nil
	case json.Delim:
		switch x {
		case '[':
			v := jval{kind: jArray}
			for dec.More() {
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return jval{}, err
				}
				v.arr = append(v.arr, e)
			}
			_, err := dec.Token()
			return v, err
		case '{':
			v := jval{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jval{}, err
				}
				k, _ := kt.(string)
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return jval{}, err
				}
				v.obj = append(v.obj, jkv{k, e})
			}
			_, err := dec.Token()
			return v, err
		}
	}
	return jval{}, fmt.Errorf("unexpected token %v", t)
}

// writePy appends v serialized the way Python's json.dumps(v,
// ensure_ascii=False) does with default separators (", " and ": "), which
// is how DeepSeek's reference encoder writes tool arguments. Number literals
// are kept as written.
func (v jval) writePy(b *bytes.Buffer) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool, jNumber:
		b.WriteString(v.lit)
	case jString:
		pyjson.WriteString(b, v.lit, false)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteString(", ")
			}
			e.writePy(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, kv := range v.obj {
			if i > 0 {
				b.WriteString(", ")
			}
			pyjson.WriteString(b, kv.key, false)
			b.WriteString(": ")
			kv.val.writePy(b)
		}
		b.WriteByte('}')
	}
}

func (v jval) py() string {
	var b bytes.Buffer
	v.writePy(&b)
	return b.String()
}

// typeSet is the set of JSON-schema types allowed for a property.
type typeSet uint8

const (
	tString typeSet = 1 << iota
	tInteger
	tNumber
	tBoolean
	tNull
	tObject
	tArray
)

func (t typeSet) has(x typeSet) bool { return t&x != 0 }

// toolSchema is the compiled part of a tool's parameters schema that
// coercion uses: the declared type set of each top-level property.
type toolSchema struct {
	props map[string]typeSet
}

func compileTools(decl []Tool) (map[string]*toolSchema, error) {
	if len(decl) == 0 {
		return nil, nil
	}
	out := make(map[string]*toolSchema, len(decl))
	for _, t := range decl {
		ts := &toolSchema{props: map[string]typeSet{}}
		if len(bytes.TrimSpace(t.Parameters)) > 0 {
			var sch struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(t.Parameters, &sch); err != nil {
				return nil, fmt.Errorf("%w: tool %q: %v", ErrBadToolsDecl, t.Name, err)
			}
			for k, p := range sch.Properties {
				ts.props[k] = schemaTypes(p, 0)
			}
		}
		out[t.Name] = ts
	}
	return out, nil
}

// schemaTypes collects "type" (string or array) and the types of anyOf /
// oneOf members; an enum without a type contributes the kinds of its values.
func schemaTypes(raw json.RawMessage, depth int) typeSet {
	if depth > 8 {
		return 0
	}
	var s struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
		Enum  []json.RawMessage `json:"enum"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return 0
	}
	var t typeSet
	var names []string
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		names = []string{one}
	} else {
		_ = json.Unmarshal(s.Type, &names)
	}
	for _, n := range names {
		switch n {
		case "string":
			t |= tString
		case "integer":
			t |= tInteger
		case "number":
			t |= tNumber
		case "boolean":
			t |= tBoolean
		case "null":
			t |= tNull
		case "object":
			t |= tObject
		case "array":
			t |= tArray
		}
	}
	for _, m := range append(s.AnyOf, s.OneOf...) {
		t |= schemaTypes(m, depth+1)
	}
	if t == 0 {
		for _, e := range s.Enum {
			if v, ok := decodeJSON(string(e)); ok {
				t |= kindType(v)
			}
		}
	}
	return t
}

func kindType(v jval) typeSet {
	switch v.kind {
	case jNull:
		return tNull
	case jBool:
		return tBoolean
	case jNumber:
		if isIntegerLit(v.lit) {
			return tInteger | tNumber
		}
		return tNumber
	case jString:
		return tString
	case jArray:
		return tArray
	case jObject:
		return tObject
	}
	return 0
}

var (
	intLit       = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	wholeFracLit = regexp.MustCompile(`^(-?(?:0|[1-9][0-9]*))\.0+$`)
)

func isIntegerLit(s string) bool { return intLit.MatchString(s) }

// fits reports whether v is acceptable for the declared type set.
func fits(v jval, t typeSet) bool {
	switch v.kind {
	case jNumber:
		if t.has(tNumber) {
			return true
		}
		return t.has(tInteger) && (isIntegerLit(v.lit) || wholeFracLit.MatchString(v.lit))
	default:
		return t&kindType(v) != 0
	}
}

// normalizeNumber turns a whole float literal ("5.0") into an integer one
// when the schema asks for integer or number.
func normalizeNumber(v jval, t typeSet) jval {
	if v.kind == jNumber && t&(tInteger|tNumber) != 0 {
		if m := wholeFracLit.FindStringSubmatch(v.lit); m != nil {
			v.lit = m[1]
		}
	}
	return v
}

// coerceRaw converts a raw string (string="true" value, or invalid JSON)
// to the declared types: it returns the JSON value and whether it changed
// kind. ok is false when no conversion fits and the schema forbids strings.
func coerceRaw(s string, t typeSet) (v jval, ok bool) {
	if t == 0 || t.has(tString) {
		return jval{kind: jString, lit: s}, true
	}
	trim := strings.TrimSpace(s)
	if d, good := decodeJSON(trim); good && fits(d, t) {
		return normalizeNumber(d, t), true
	}
	if t.has(tBoolean) {
		switch strings.ToLower(trim) {
		case "true":
			return jval{kind: jBool, lit: "true"}, true
		case "false":
			return jval{kind: jBool, lit: "false"}, true
		}
	}
	if t.has(tNull) && (trim == "" || strings.EqualFold(trim, "none")) {
		return jval{kind: jNull}, true
	}
	return jval{kind: jString, lit: s}, false
}

// coerceJSON adapts a decoded JSON value to the declared types: a value of
// the wrong kind becomes its raw text as a string when strings are allowed
// (a string="false" "null" where a string is declared stays "null").
func coerceJSON(v jval, raw string, t typeSet) (jval, bool) {
	if t == 0 {
		return v, true
	}
	if fits(v, t) {
		return normalizeNumber(v, t), true
	}
	if v.kind == jString {
		return coerceRaw(v.lit, t)
	}
	if t.has(tString) {
		return jval{kind: jString, lit: strings.TrimSpace(raw)}, true
	}
	return v, false
}
