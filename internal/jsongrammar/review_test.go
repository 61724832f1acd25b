package jsongrammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// validate is an independent validator of the supported subset: it checks
// a decoded value (encoding/json with UseNumber) against a schema decoded
// the same way, resolving $ref from root.
func validate(root, s any, v any) error {
	switch s := s.(type) {
	case bool:
		if !s {
			return errors.New("schema false")
		}
		return nil
	case map[string]any:
		if r, ok := s["$ref"].(string); ok {
			t := root
			if r != "#" {
				parts := strings.Split(strings.TrimPrefix(r, "#/"), "/")
				t = root.(map[string]any)[parts[0]].(map[string]any)[strings.ReplaceAll(strings.ReplaceAll(parts[1], "~1", "/"), "~0", "~")]
			}
			return validate(root, t, v)
		}
		if c, ok := s["const"]; ok && !reflect.DeepEqual(c, v) {
			return fmt.Errorf("%v is not const %v", v, c)
		}
		if e, ok := s["enum"].([]any); ok {
			found := false
			for _, x := range e {
				found = found || reflect.DeepEqual(x, v)
			}
			if !found {
				return fmt.Errorf("%v not in enum", v)
			}
		}
		// oneOf is checked as anyOf, as the package (and xgrammar) enforce
		// it: at least one alternative, not exactly one.
		for _, kw := range []string{"anyOf", "oneOf"} {
			if alts, ok := s[kw].([]any); ok {
				n := 0
				for _, a := range alts {
					if validate(root, a, v) == nil {
						n++
						break // one is enough (and the cost stays linear)
					}
				}
				if n == 0 {
					return fmt.Errorf("%v matches no alternative of %s", v, kw)
				}
			}
		}
		if t, ok := s["type"]; ok {
			var ts []any
			if str, ok := t.(string); ok {
				ts = []any{str}
			} else {
				ts = t.([]any)
			}
			ok := false
			for _, t := range ts {
				ok = ok || typeOK(t.(string), v)
			}
			if !ok {
				return fmt.Errorf("%v is not of type %v", v, t)
			}
		}
		switch v := v.(type) {
		case map[string]any:
			props, _ := s["properties"].(map[string]any)
			for _, r := range asList(s["required"]) {
				if _, ok := v[r.(string)]; !ok {
					return fmt.Errorf("missing %q", r)
				}
			}
			for k, x := range v {
				ps, ok := props[k]
				if !ok {
					ap, has := s["additionalProperties"]
					switch {
					case has:
						ps = ap
					case len(props) > 0: // the package's rule: no properties, any keys
						return fmt.Errorf("extra key %q", k)
					default:
						ps = true
					}
				}
				if err := validate(root, ps, x); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
			}
		case []any:
			if it, ok := s["items"]; ok {
				for _, x := range v {
					if err := validate(root, it, x); err != nil {
						return err
					}
				}
			}
			if m, ok := num(s["minItems"]); ok && len(v) < int(m) {
				return fmt.Errorf("%d items < minItems", len(v))
			}
			if m, ok := num(s["maxItems"]); ok && len(v) > int(m) {
				return fmt.Errorf("%d items > maxItems", len(v))
			}
		case string:
			n := utf8.RuneCountInString(v)
			if m, ok := num(s["minLength"]); ok && n < int(m) {
				return fmt.Errorf("%q: %d chars < minLength", v, n)
			}
			if m, ok := num(s["maxLength"]); ok && n > int(m) {
				return fmt.Errorf("%q: %d chars > maxLength", v, n)
			}
			// pattern and the formats the package implements, checked on
			// the decoded value with Go's regexp (full match).
			if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(`^(?:`+p+`)$`).MatchString(v) {
				return fmt.Errorf("%q does not match pattern %q", v, p)
			}
			if f, ok := s["format"].(string); ok && formats[f] != "" && !regexp.MustCompile(`^(?:`+formats[f]+`)$`).MatchString(v) {
				return fmt.Errorf("%q is not a %s", v, f)
			}
		case json.Number:
			x, _ := new(big.Float).SetPrec(200).SetString(v.String())
			for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
				b, ok := s[kw].(json.Number)
				if !ok {
					continue
				}
				y, _ := new(big.Float).SetPrec(200).SetString(b.String())
				c := x.Cmp(y)
				if kw == "minimum" && c < 0 || kw == "maximum" && c > 0 || kw == "exclusiveMinimum" && c <= 0 || kw == "exclusiveMaximum" && c >= 0 {
					return fmt.Errorf("%v violates %s %v", v, kw, b)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("bad schema %T", s)
}

func asList(x any) []any { l, _ := x.([]any); return l }

func num(x any) (int64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func typeOK(t string, v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return t == "object"
	case []any:
		return t == "array"
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case json.Number:
		return t == "number" || t == "integer" && !strings.ContainsAny(v.String(), ".eE")
	}
	return false
}

func decodeNumber(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// checkValid checks that out, accepted as complete by g, is valid JSON
// and satisfies schema (JSONObject's when schema is "").
func checkValid(t *testing.T, schema, out string) {
	t.Helper()
	if !json.Valid([]byte(out)) {
		t.Fatalf("%s: %q accepted, not valid JSON", schema, out)
	}
	if schema == "" {
		schema = `{"type":"object"}`
	}
	s, err := decodeNumber([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	v, err := decodeNumber([]byte(out))
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if err := validate(s, s, v); err != nil {
		t.Fatalf("%s: %q accepted, violates the schema: %v", schema, out, err)
	}
}

type schemaCase struct {
	schema string
	yes    []string // accepted as complete, valid and within the schema
	no     []string // rejected or incomplete
}

func runSchemaCases(t *testing.T, cases []schemaCase) {
	t.Helper()
	for _, c := range cases {
		g, err := Compile([]byte(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.schema, err)
			continue
		}
		for _, y := range c.yes {
			if fed, end := accepts(g, y); !fed || !end {
				t.Errorf("%s: %.80q: fed %v complete %v, want accepted", c.schema, y, fed, end)
			} else {
				checkValid(t, c.schema, y)
			}
		}
		for _, n := range c.no {
			if _, end := accepts(g, n); end {
				t.Errorf("%s: %.80q accepted", c.schema, n)
			}
		}
	}
}

// walk drives g byte by byte at random: it dives (prefers opening objects,
// arrays and keys) for dive bytes, then heads for the end. Every state
// reached must accept a byte or be complete (no dead state); the output,
// when complete, must be valid and satisfy the schema.
func walk(t *testing.T, g *Grammar, schema string, rng *rand.Rand, dive int) (string, bool) {
	t.Helper()
	st := g.Start()
	var out []byte
	var ok []byte
	for step := 0; step < 4000; step++ {
		ok = ok[:0]
		for b := range 256 {
			c := st.Clone()
			if c.Feed(byte(b)) {
				ok = append(ok, byte(b))
			}
		}
		if len(ok) == 0 {
			if !st.Accepting() {
				t.Fatalf("%s: dead state after %q: no byte allowed, not complete", schema, out)
			}
			break
		}
		if st.Accepting() && (step > dive && rng.IntN(4) == 0) {
			break
		}
		pick := ok[rng.IntN(len(ok))]
		pref := `{["abcdefghijklmnopqrstuvwxyz:`
		if step > dive {
			pref = `}]"n0t-,`
			if step > dive+200 {
				pref = `}]"n0t`
			}
		}
		if rng.IntN(5) > 0 {
		pref:
			for _, p := range []byte(pref) {
				for _, b := range ok {
					if b == p && (p != ',' || rng.IntN(3) == 0) {
						pick = b
						break pref
					}
				}
			}
		}
		if !st.Feed(pick) {
			t.Fatalf("byte %q allowed by a clone, refused", pick)
		}
		out = append(out, pick)
	}
	if !st.Accepting() {
		return string(out), false
	}
	checkValid(t, schema, string(out))
	return string(out), true
}

// reviewSchemas are edge-case schemas that compile.
var reviewSchemas = []string{
	`{}`, `true`, `{"type":"object"}`, `{"type":["string","null","string"]}`,
	`{"type":["number","integer"]}`,
	`{"type":"array","maxItems":0}`, `{"type":"array","minItems":2,"maxItems":2,"items":{"type":"boolean"}}`,
	`{"type":"string","maxLength":0}`, `{"type":"string","minLength":3,"maxLength":3}`,
	`{"type":"integer","minimum":7,"maximum":7}`, `{"type":"integer","exclusiveMinimum":6,"exclusiveMaximum":8}`,
	`{"type":"integer","minimum":-9223372036854775807}`, `{"type":"integer","maximum":-9223372036854775807,"minimum":-1e31}`,
	`{"type":"integer","minimum":9223372036854775807}`, `{"type":"integer","minimum":9007199254740993,"maximum":9007199254740993}`, `{"type":"integer","minimum":-0.5,"maximum":0.5}`,
	`{"type":"integer","minimum":9000000000000000000}`, `{"type":"integer","maximum":-9000000000000000000}`,
	`{"type":"integer","maximum":9210000000000000000,"minimum":9200000000000000000}`,
	`{"type":"integer","minimum":-9210000000000000000,"maximum":-9200000000000000000}`,
	`{"type":"number","minimum":-0.5,"maximum":0.5}`, `{"type":"number","exclusiveMinimum":0.999999,"exclusiveMaximum":1.000001}`,
	`{"type":"number","minimum":1e-7}`, `{"type":"number","maximum":-123.4567891}`, `{"type":["number","integer"],"minimum":2.5,"maximum":7}`,
	`{"anyOf":[{"type":"number","minimum":10},{"type":"integer","maximum":-3},{"type":"number","maximum":1,"minimum":0}]}`,
	`{"type":"number","minimum":9223372036854775807.5}`, `{"type":"number","maximum":-9223372036854775807.999999}`,
	`{"const":"` + strings.Repeat("long ", 100) + `"}`,
	`{"const":{"a":[1,{"b":null}],"c":"\u00e9\u2028\"\\"}}`,
	`{"type":"object","properties":{"a\"b":{"type":"integer"},"é😀":{"type":"string"},"\u2028":{"type":"null"},"\u0001":{"type":"null"},"a/b~c":{"type":"boolean"}},"required":["é😀","\u2028"]}`,
	`{"type":"object","properties":{"a":{},"ab":{},"abc":{}},"required":["abc"]}`,
	`{"type":"object","properties":{"abc":{},"ab":{},"a":{}},"required":["a"]}`,
	`{"type":"object","properties":{"x":{"$ref":"#"}}}`,
	`{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#"},"minItems":1}]}`,
	`{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]}`,
	`{"$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}},"required":["b"]},"b":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/a"},"minItems":1},{"type":"integer"}]}},"$ref":"#/$defs/a"}`,
	// optional deep branches beside shallow ones: the automaton must not
	// open the deep branch where it cannot close it.
	`{"$defs":{"d":{"type":"object","properties":{"o":{"$ref":"#/$defs/deep"},"k":{"$ref":"#/$defs/d"}}},"deep":{"type":"array","minItems":1,"items":{"type":"array","minItems":1,"items":{"type":"array","minItems":1,"items":{"type":"object","properties":{"z":{"type":"null"}},"required":["z"]}}}}},"$ref":"#/$defs/d"}`,
	`{"type":"object","additionalProperties":{"type":"array","minItems":1,"items":{"$ref":"#"}}}`,
	`{"type":"array","items":{"type":"array","minItems":1,"items":{"$ref":"#"}}}`,
	`{"type":"object","properties":{"a":{"type":"array","minItems":1,"items":{"$ref":"#"}},"b":{"type":"null"}}}`,
	`{"enum":[0,-0,1e400,"\ud83d\ude00",[],{}]}`,
	`{"type":"string","minLength":2}`,
	`{"type":"string","maxLength":1}`,
	`{"type":"object","additionalProperties":false}`,
	`{"type":"object","properties":{},"required":[]}`,
	// pattern and format: escapes decoded before the pattern sees them.
	`{"type":"string","pattern":"^[a-z]{2,5}\\d?$"}`,
	`{"type":"string","pattern":"[\"\\\\/\n\t\u0001é😀]+x"}`,
	`{"type":"string","pattern":"\\pL[\\x{10000}-\\x{10FFFF}]\\PL*"}`,
	`{"type":"string","pattern":"(?s).{0,6}"}`,
	`{"type":"string","pattern":"[^a-z]+"}`,
	`{"type":"object","properties":{"d":{"type":"string","format":"date"},"t":{"format":"date-time"},"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uuid"}},"required":["d","t","e","u"]}`,
	`{"type":"array","items":{"anyOf":[{"type":"string","format":"ipv4"},{"type":"string","format":"ipv6"},{"type":"string","pattern":"[0-9]+"}]}}`,
	`{"type":["string","null"],"format":"duration"}`,
	`{"type":"string","format":"uri"}`, `{"type":"string","format":"hostname"}`, `{"type":"string","format":"time"}`,
	`{"type":"string","format":"uri-reference"}`, `{"type":"string","format":"uri-template"}`,
	`{"type":"string","format":"json-pointer"}`, `{"type":"string","format":"relative-json-pointer"}`,
	`{"format":"no-such-format"}`, `{"type":"integer","format":"date"}`,
	`{"type":"string","format":"date-time","pattern":".*T1[0-9]:.*Z"}`, `{"format":"ipv4","pattern":"10\\..*"}`,
}

// TestReviewWalks drives every edge-case schema at random: no dead state
// at any depth, every complete output valid and within the schema.
func TestReviewWalks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range reviewSchemas {
		g, err := Compile([]byte(s))
		if err != nil {
			t.Errorf("%.80s: %v", s, err)
			continue
		}
		complete := 0
		for i := range 8 {
			if _, ok := walk(t, g, s, rng, []int{0, 5, 40, 400}[i%4]); ok {
				complete++
			}
		}
		if complete == 0 {
			t.Errorf("%.80s: no walk completed", s)
		}
	}
}

// TestReviewCases are the regressions of a review: surrogate pairs count
// one character, integer bounds are exact past 2^53 and near ±2^63, a
// schema whose values all nest deeper than MaxNesting is refused, and the
// automaton never opens a value it cannot close within MaxNesting.
func TestReviewCases(t *testing.T) {
	deep := func(open, mid, end string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(end, n)
	}
	cases := []schemaCase{
		{`{"type":"string","minLength":2}`,
			[]string{`"\ud83d\ude00x"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\ud83d"`, `"\u00e9\u00e9"`, `"😀x"`},
			[]string{`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"😀"`}},
		{`{"type":"string","minLength":3}`, []string{`"\ud83d\ude00\ud83d\ude00\ud83d\ude00"`, `"\ud83d\n\ude00"`}, []string{`"\ud83d\ude00\ud83d\ude00"`}},
		{`{"type":"string","maxLength":2}`, []string{`"\ud83d\ude00"`, `"a\n"`}, []string{`"abc"`, `"\u0041\u0042\u0043"`}},
		{`{"type":"integer","minimum":9007199254740993,"maximum":9007199254740993}`, []string{`9007199254740993`}, []string{`9007199254740992`, `9007199254740994`}},
		{`{"type":"integer","minimum":9000000000000000000}`, []string{`9000000000000000000`, `9223372036854775807`}, []string{`8999999999999999999`, `9223372036854775808`}},
		{`{"type":"integer","maximum":9210000000000000000}`, []string{`9210000000000000000`, `-1`}, []string{`9210000000000000001`, `9220000000000000000`}},
		{`{"type":"integer","minimum":-9210000000000000000}`, []string{`-9210000000000000000`}, []string{`-9210000000000000001`, `-9220000000000000000`}},
		{`{"type":"integer","minimum":-9223372036854775807,"maximum":-9223372036854775807}`, []string{`-9223372036854775807`}, []string{`-9223372036854775806`, `-9223372036854775808`}},
		{`{"type":"integer","exclusiveMinimum":2.5e0,"exclusiveMaximum":4}`, []string{`3`}, []string{`2`, `4`}},
		{`{"type":"integer","minimum":1e-400}`, []string{`1`}, []string{`0`, `-0`}},
		{`{"type":"integer","maximum":-1e-400}`, []string{`-1`}, []string{`0`, `-0`}},
		{`{"type":"integer","maximum":1e400}`, []string{`9223372036854775807`}, []string{`9223372036854775808`}},
		{`{"type":["string","string","null"]}`, []string{`"a"`, `null`}, []string{`1`}},
		{`{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#"},"minItems":1}]}`,
			[]string{deep("[", "null", "]", MaxNesting)}, []string{deep("[", "null", "]", MaxNesting+1), deep("[", "", "]", 1)}},
		{`{"type":"object","properties":{"a":{"type":"array","minItems":1,"items":{"$ref":"#"}},"b":{"type":"null"}}}`,
			[]string{deep(`{"a":[`, `{"b":null}`, `]}`, MaxNesting/2-1), deep(`{"a":[`, `{}`, `]}`, MaxNesting/2-1)},
			[]string{deep(`{"a":[`, `{"a":[]}`, `]}`, MaxNesting/2-1), deep(`{"a":[`, `{"a":`, ``, MaxNesting/2-1) + `[`}},
		{`{"type":"object","additionalProperties":{"type":"array","minItems":1,"items":{"$ref":"#"}}}`,
			[]string{deep(`{"k":[`, `{}`, `]}`, MaxNesting/2-1)}, []string{deep(`{"k":[`, `{"`, ``, MaxNesting/2-1)}},
		{`{"enum":[0,-0,1e400,"\ud83d\ude00"]}`, []string{`0`, `-0`, `1e400`, `"😀"`}, []string{`"\ud83d\ude00"`, `1E400`}},
		{`{"type":"number"}`, []string{`-0`, `1e400`, `-0.0e-0`, `1E+9999`}, []string{`01`, `-01`, `+1`, `1e99999`, `0x1`, `NaN`, `.1`}},
		{`{"type":"string"}`, []string{`"\u0000\u001f\t"`, `"\/"`}, []string{"\"\x00\"", "\"\x1f\"", "\"\t\"", "\"\x7f\"x", `"\x"`, `"\u12"`, `"\U0041"`}},
	}
	runSchemaCases(t, cases)
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
		for i := range n {
			fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{"x":{"$ref":"#/$defs/d%d"}},"required":["x"]},`, i, i+1)
		}
		fmt.Fprintf(&b, `"d%d":{"type":"null"}}}`, n)
		return b.String()
	}
	for _, c := range []struct {
		schema string
		ok     bool
	}{
		{`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`, false},
		{`{"type":"array","items":{"$ref":"#"},"minItems":1}`, false},
		{`{"$defs":{"a":{"type":"array","minItems":1,"items":{"$ref":"#/$defs/b"}},"b":{"type":"object","properties":{"c":{"$ref":"#/$defs/a"}},"required":["c"]}},"$ref":"#/$defs/a"}`, false},
		{`{"$ref":"#"}`, false},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, false},
		{`{"type":"array","items":{"$ref":"#"}}`, true},
		{chain(MaxNesting), true},
		{chain(MaxNesting + 1), false},
		{`{"type":"integer","minimum":9223372036854775808}`, false},
		{`{"type":"integer","maximum":-9223372036854775808}`, false},
		{`{"type":"integer","minimum":1e99999999999}`, false},
		{`{"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":4}`, false},
		{`{"type":"integer","exclusiveMinimum":3.5,"exclusiveMaximum":4}`, false},
		{`{"type":"array","minItems":3,"maxItems":2}`, false},
		{`{"type":"array","minItems":-1}`, false},
		{`{"type":"object","properties":{"a":{}},"required":["a","b"]}`, false},
		{`{"type":"object","properties":{"a":{},"a":{}}}`, false},
		{`{"items":false}`, false},
		{`{"enum":[` + strings.Repeat(`"x",`, 10000) + `"y"]}`, true},
	} {
		g, err := Compile([]byte(c.schema))
		var e *Error
		if (err == nil) != c.ok || err != nil && !errors.As(err, &e) {
			t.Errorf("%.80s: %v, want ok %v", c.schema, err, c.ok)
		}
		if err == nil {
			if _, ok := walk(t, g, c.schema, rand.New(rand.NewPCG(3, 4)), 1000); !ok {
				t.Errorf("%.80s: the walk did not complete", c.schema)
			}
		}
	}
}

// TestPatternCases checks pattern and format strings: the pattern is a
// full match on the decoded value, escapes are allowed exactly where the
// character they stand for is, and control characters must be escaped.
func TestPatternCases(t *testing.T) {
	cases := []schemaCase{
		{`{"type":"string","pattern":"^\\d{3}-\\d{4}$"}`, []string{`"555-1234"`, `"\u0035\u00355-1234"`}, []string{`"555-123"`, `"x555-1234"`, `"555-12345"`, `""`}},
		{`{"type":"string","pattern":"ab"}`, []string{`"ab"`, `"\u0061b"`, `"\u0061\u0062"`}, []string{`"xab"`, `"abx"`, `"a\b"`, `"\ab"`}},
		{`{"pattern":"a.c"}`, []string{`"abc"`, `"a\"c"`, `"a\\c"`, `"a\/c"`, `"a/c"`, `"a\tc"`, `"a\u00e9c"`, `"aéc"`, `"a\ud83d\ude00c"`, `"a😀c"`}, []string{`"a\nc"`, "\"a\tc\"", `"a\ud83dc"`, `"a\ude00c"`, `"ac"`, `1`}},
		{`{"type":"string","pattern":"\"[\\\\\\\\]\n"}`, []string{`"\"\\\n"`, `"\u0022\u005c\u000A"`}, []string{`"\"\\"`, "\"\\\"\\\\\n\"", `"\"\\\\n"`}},
		{`{"type":"string","pattern":"[\\x{1F600}-\\x{1F64F}]+"}`, []string{`"😀"`, `"\ud83d\ude00😁"`, `"\uD83D\uDE4F"`}, []string{`"\ud83d"`, `"\ud83d\u0041"`, `"a"`, `""`}},
		{`{"type":"string","pattern":"[^\"]*"}`, []string{`""`, `"abc"`, `"a\nb"`}, []string{`"\""`, `"a\u0022"`}},
		{`{"type":"string","pattern":"é{2}"}`, []string{`"éé"`, `"\u00e9é"`, `"\u00E9\u00e9"`}, []string{`"é"`, `"e\u0301e\u0301"`}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-29"`, `"1999-12-31"`, `"2024-01-0\u0031"`}, []string{`"2024-13-01"`, `"2024-1-01"`, `"24-01-01"`, `"2024-01-32"`, `"2024-01-01T00:00:00Z"`}},
		{`{"type":"string","format":"date-time"}`, []string{`"2024-02-29T23:59:60.123+05:30"`, `"2024-02-29T00:00:00Z"`}, []string{`"2024-02-29T24:00:00Z"`, `"2024-02-29 00:00:00Z"`, `"2024-02-29T00:00:00"`}},
		{`{"type":"string","format":"time"}`, []string{`"12:34:56Z"`, `"23:59:59.5-01:00"`}, []string{`"12:34Z"`, `"12:34:56"`}},
		{`{"type":"string","format":"duration"}`, []string{`"P1Y2M3DT4H5M6S"`, `"PT1S"`, `"P3W"`}, []string{`"P"`, `"PT"`, `"P1S"`, `"1D"`}},
		{`{"type":"string","format":"email"}`, []string{`"a.b+c@example.com"`, `"\"q \\\\ x\"@ex.org"`}, []string{`"a@"`, `"@b.com"`, `"a..b@c.com"`, `"a@b.c"`}},
		{`{"type":"string","format":"ipv4"}`, []string{`"192.168.0.1"`, `"255.255.255.255"`}, []string{`"256.1.1.1"`, `"1.2.3"`}},
		{`{"type":"string","format":"ipv6"}`, []string{`"::1"`, `"2001:db8::ff00:42:8329"`, `"::ffff:192.0.2.1"`, `"1:2:3:4:5:6:7:8"`}, []string{`":::"`, `"1:2:3:4:5:6:7:8:9"`, `"g::1"`}},
		{`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
		{`{"type":"string","format":"hostname"}`, []string{`"example.com"`, `"a-b.c"`}, []string{`"-a.com"`, `"Example.com"`, `"a..b"`}},
		{`{"type":"string","format":"uri"}`, []string{`"https://user@example.com:8080/p/a%20th?q=1#frag"`, `"mailto:a@b.c"`, `"urn:isbn:0451450523"`}, []string{`"//example.com"`, `"http://exa mple.com"`, `"1http://x"`}},
		{`{"type":"string","format":"json-pointer"}`, []string{`""`, `"/a~1b/c~0d"`, `"/\n"`}, []string{`"a"`, `"/~2"`}},
		{`{"type":"string","format":"relative-json-pointer"}`, []string{`"0#"`, `"1/a"`}, []string{`"01"`, `"#"`}},
		{`{"format":"not-a-format","maxLength":2}`, []string{`"ab"`, `""`}, []string{`"abc"`}},
		{`{"type":"integer","pattern":"x","format":"date"}`, []string{`12`}, []string{`"x"`}},
		{`{"type":"string","format":"date","pattern":"^2024-.*"}`, []string{`"2024-02-29"`, `"\u0032024-01-01"`}, []string{`"2023-01-01"`, `"2024-13-01"`, `"2024-"`}},
		{`{"type":"string","format":"email","pattern":".*@example\\.com"}`, []string{`"a.b@example.com"`}, []string{`"a@example.org"`, `"@example.com"`}},
		{`{"anyOf":[{"type":"string","format":"date"},{"type":"string","pattern":"[a-z]+"},{"type":"string","maxLength":1}]}`, []string{`"2024-01-01"`, `"abc"`, `"1"`, `"\u0031"`}, []string{`"12"`, `"2024-01-0a"`, `"AB"`}},
	}
	runSchemaCases(t, cases)
	for _, c := range []struct{ schema, kw string }{
		{`{"type":"string","pattern":"(a"}`, "pattern"},
		{`{"type":"string","pattern":"(?=a)"}`, "pattern"},
		{`{"type":"string","pattern":"a\\b"}`, "pattern"},
		{`{"type":"string","pattern":"a^b"}`, "pattern"},
		{`{"type":"string","pattern":1}`, "pattern"},
		{`{"type":"string","format":1}`, "format"},
		{`{"type":"string","pattern":"[a-z]+","format":"date"}`, "pattern"},
		{`{"type":"string","format":"date","pattern":"^2024-"}`, "pattern"}, // a full match: no date is "2024-"
		{`{"type":"string","pattern":"(a|b)*a(a|b){14}","format":"uri"}`, "pattern"},
		{`{"type":"string","pattern":"[a-z]+","maxLength":3}`, "maxLength"},
		{`{"type":"string","format":"email","minLength":3}`, "minLength"},
		{`{"type":"string","pattern":"a","minLength":0}`, "minLength"},
		{`{"type":"string","format":"not-a-format"}`, "format"},
		{`{"type":["null","string"],"format":"iri"}`, "format"},
		{`{"type":"string","pattern":"(a|b)*a(a|b){14}"}`, "pattern"},
		{`{"type":"string","pattern":"` + strings.Repeat("x", 20000) + `"}`, "pattern"},
	} {
		_, err := Compile([]byte(c.schema))
		var e *Error
		if !errors.As(err, &e) || e.Keyword != c.kw {
			t.Errorf("%.80s: %v, want an *Error naming %q", c.schema, err, c.kw)
		}
	}
}

// TestSchemaPatternWork: distinct patterns each under
// regexgrammar.MaxRuneDFAWork but together over MaxSchemaPatternWork are
// a 400 naming "pattern", quickly (a 60 KB schema of them took 3.4 s).
func TestSchemaPatternWork(t *testing.T) {
	var props []string
	for i := range 60 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string","pattern":"(\\p{Lu}\\p{Ll}*){0,40}|x%d"}`, i, i))
	}
	start := time.Now()
	_, err := Compile([]byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`))
	var e *Error
	if !errors.As(err, &e) || e.Keyword != "pattern" || !strings.Contains(e.Msg, "steps") {
		t.Fatalf("err = %v, want a pattern *Error over the schema's steps", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("refusal took %v", d)
	}
	// One of them alone compiles.
	if _, err := Compile([]byte(`{"type":"object","properties":{` + props[0] + `}}`)); err != nil {
		t.Fatal(err)
	}
}
