package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/dsv4go/dsv4go/internal/pyjson"
)

// This file holds an insertion-ordered JSON value model and a writer that
// reproduces Python's json.dumps byte for byte. Both DeepSeek's encoders and
// Hugging Face's tojson filter print JSON with json.dumps, so a Go renderer
// must keep object keys in input order, use Python's separators and float
// repr, and never HTML-escape.

// jsonObject is a JSON object whose keys keep their first-seen order, as a
// Python dict built by json.loads does (a repeated key keeps its first
// position and takes the last value).
type jsonObject struct {
	Keys   []string
	Values []any
}

// get returns the value stored under key.
func (o *jsonObject) get(key string) (any, bool) {
	for i, k := range o.Keys {
		if k == key {
			return o.Values[i], true
		}
	}
	return nil, false
}

// set stores v under key, keeping the key's first position.
func (o *jsonObject) set(key string, v any) {
	for i, k := range o.Keys {
		if k == key {
			o.Values[i] = v
			return
		}
	}
	o.Keys = append(o.Keys, key)
	o.Values = append(o.Values, v)
}

// pyInt is a JSON integer, kept exactly (Python ints are unbounded).
type pyInt struct{ text string }

// pyFloat is a JSON number with a fraction or exponent, held as float64
// like Python's float.
type pyFloat float64

// maxJSONDepth bounds nesting when decoding untrusted JSON.
const maxJSONDepth = 512

// decodeOrdered parses one JSON document into the ordered model:
// nil, bool, string, pyInt, pyFloat, []any, *jsonObject.
// It follows Python's json.loads: integers stay exact, other numbers
// become float64, objects keep key order. Trailing data is an error.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, fmt.Errorf("extra data after JSON value")
		}
		return nil, err
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &jsonObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj.set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %q", t)
	case json.Number:
		return parseNumber(string(t)), nil
	default:
		return t, nil // nil, bool, string
	}
}

// parseNumber converts JSON number text as Python's json.loads does.
func parseNumber(s string) any {
	if !strings.ContainsAny(s, ".eE") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			if s == "-0" {
				return pyInt{"0"}
			}
			return pyInt{s}
		}
		n, ok := new(big.Int).SetString(s, 10)
		if ok {
			return pyInt{n.String()}
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Out of range: ParseFloat returns ±Inf or ±0 with ErrRange, as
		// Python's float() does.
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return pyFloat(math.NaN())
		}
	}
	return pyFloat(f)
}

// dumpOptions mirrors the keyword arguments of Python's json.dumps that
// chat templates use.
type dumpOptions struct {
	EnsureASCII bool
	Indent      *string // nil: single line
	ItemSep     string  // default ", " (or "," with Indent)
	KeySep      string  // default ": "
	SortKeys    bool
	SepsSet     bool // ItemSep/KeySep given explicitly (may be "")
}

// pyDumps renders v as Python's json.dumps(v, ensure_ascii=False) does.
func pyDumps(v any) (string, error) {
	var b strings.Builder
	err := dumpTo(&b, v, &dumpOptions{}, 0, 0)
	return b.String(), err
}

func dumpWith(v any, o *dumpOptions) (string, error) {
	var b strings.Builder
	err := dumpTo(&b, v, o, 0, 0)
	return b.String(), err
}

// jsonValuer lets foreign value types (the Jinja engine's) present
// themselves to the writer in the ordered model.
type jsonValuer interface {
	toOrdered() (any, error)
}

func (o *dumpOptions) seps() (item, key string) {
	item, key = o.ItemSep, o.KeySep
	if o.SepsSet {
		return item, key
	}
	if item == "" {
		item = ", "
		if o.Indent != nil {
			item = ","
		}
	}
	if key == "" {
		key = ": "
	}
	return item, key
}

func dumpTo(b *strings.Builder, v any, o *dumpOptions, level, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("%w: value nested deeper than %d", ErrUnserializable, maxJSONDepth)
	}
	if b.Len() > maxJSONBytes {
		return fmt.Errorf("%w: JSON text longer than %d bytes", ErrLimit, maxJSONBytes)
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		pyjson.WriteString(b, t, o.EnsureASCII)
	case pyInt:
		b.WriteString(t.text)
	case pyFloat:
		b.WriteString(pyFloatJSON(float64(t)))
	case float64:
		b.WriteString(pyFloatJSON(t))
	case float32:
		b.WriteString(pyFloatJSON(float64(t)))
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(t), 10))
	case []any:
		return dumpList(b, len(t), func(i int) any { return t[i] }, o, level, depth)
	case []string:
		return dumpList(b, len(t), func(i int) any { return t[i] }, o, level, depth)
	case *jsonObject:
		keys, vals := t.Keys, t.Values
		if o.SortKeys {
			idx := make([]int, len(keys))
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, c int) bool { return keys[idx[a]] < keys[idx[c]] })
			k2 := make([]string, len(keys))
			v2 := make([]any, len(keys))
			for i, j := range idx {
				k2[i], v2[i] = keys[j], vals[j]
			}
			keys, vals = k2, v2
		}
		return dumpObject(b, keys, vals, o, level, depth)
	case map[string]any:
		keys := sortedKeys(t)
		vals := make([]any, len(keys))
		for i, k := range keys {
			vals[i] = t[k]
		}
		return dumpObject(b, keys, vals, o, level, depth)
	case jsonValuer:
		ov, err := t.toOrdered()
		if err != nil {
			return err
		}
		return dumpTo(b, ov, o, level, depth+1)
	default:
		return fmt.Errorf("%w: object of type %T is not JSON serializable", ErrUnserializable, v)
	}
	return nil
}

func writeNewline(b *strings.Builder, o *dumpOptions, level int) {
	b.WriteByte('\n')
	for range level {
		b.WriteString(*o.Indent)
	}
}

func dumpList(b *strings.Builder, n int, at func(int) any, o *dumpOptions, level, depth int) error {
	if n == 0 {
		b.WriteString("[]")
		return nil
	}
	itemSep, _ := o.seps()
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteString(itemSep)
		}
		if o.Indent != nil {
			writeNewline(b, o, level+1)
		}
		if err := dumpTo(b, at(i), o, level+1, depth+1); err != nil {
			return err
		}
	}
	if o.Indent != nil {
		writeNewline(b, o, level)
	}
	b.WriteByte(']')
	return nil
}

func dumpObject(b *strings.Builder, keys []string, vals []any, o *dumpOptions, level, depth int) error {
	if len(keys) == 0 {
		b.WriteString("{}")
		return nil
	}
	itemSep, keySep := o.seps()
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(itemSep)
		}
		if o.Indent != nil {
			writeNewline(b, o, level+1)
		}
		pyjson.WriteString(b, k, o.EnsureASCII)
		b.WriteString(keySep)
		if err := dumpTo(b, vals[i], o, level+1, depth+1); err != nil {
			return err
		}
	}
	if o.Indent != nil {
		writeNewline(b, o, level)
	}
	b.WriteByte('}')
	return nil
}

// pyFloatJSON prints f as json.dumps does: float.__repr__, with
// NaN/Infinity/-Infinity for the non-finite values.
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

// pyFloatRepr prints a finite float as Python's repr does: the shortest
// round-tripping digits, positional notation for exponents in [-4, 16),
// otherwise d.ddde±XX.
func pyFloatRepr(f float64) string {
	if math.IsNaN(f) {
		return "nan"
	}
	if math.IsInf(f, 1) {
		return "inf"
	}
	if math.IsInf(f, -1) {
		return "-inf"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // e.g. -1.2345e+06
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign = "-"
		exp = -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return mant + "e" + sign + es
}

// sortedKeys returns m's keys in sorted order (a Go map has no insertion
// order to keep).
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
