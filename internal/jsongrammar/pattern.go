package jsongrammar

import (
	"fmt"
	"sync"

	"github.com/dsv4go/dsv4go/internal/regexgrammar"
)

// Limits on the patterns of a schema (string pattern and format).
const (
	// MaxPatternStates bounds the states of one pattern's automaton
	// (regexgrammar.RuneDFA: 512 bytes of ASCII transitions each, plus its
	// intervals beyond ASCII); a pattern with more is an *Error naming
	// "pattern".
	MaxPatternStates = 4096
	// MaxSchemaPatternStates bounds the states of all the distinct patterns
	// of one schema together.
	MaxSchemaPatternStates = 16384
	// MaxSchemaPatternWork bounds the steps spent building the automata of
	// all the distinct patterns of one schema together
	// (regexgrammar.RuneDFA.Work, about 50 ns each on a 2-core dev box):
	// each pattern alone stays under regexgrammar.MaxRuneDFAWork, but a
	// 60 KB schema of 366 distinct 10 ms patterns took 3.4 s to refuse.
	MaxSchemaPatternWork = 1 << 23
)

// formats are the regular expressions of the string formats xgrammar
// implements (its JSON Schema converter, JSONFormatToRegexPattern), in Go's
// syntax and, like every pattern here, over the string's decoded value:
// where xgrammar's email expression spells a quoted local part with the
// JSON escapes \" and \\, this one has the characters " and \ they stand
// for. Every expression is a full match. These are the formats vLLM lets
// through to xgrammar (STRING_SUPPORTED_FORMATS in its xgrammar backend);
// a schema whose type is or lists "string" with any other format is
// refused, as vLLM refuses it ("features not supported by xgrammar"); any
// other format elsewhere is ignored.
var formats = func() map[string]string {
	const (
		hex2    = `%[0-9A-Fa-f][0-9A-Fa-f]`
		atext   = "[\\w!#$%&'*+/=?^`{|}~-]"
		date    = `\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])`
		time    = `(?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)`
		h16     = `[0-9a-fA-F]{1,4}`
		v4byte  = `(?:25[0-5]|(?:2[0-4]|1?[0-9])?[0-9])`
		v4      = `(?:` + v4byte + `\.){3}` + v4byte
		pchar   = `(?:[\w.~!$&'()*+,;=:@-]|` + hex2 + `)`
		qfchar  = `(?:[\w.~!$&'()*+,;=:@/?-]|` + hex2 + `)*`
		query   = `(?:\?` + qfchar + `)?`
		frag    = `(?:#` + qfchar + `)?`
		abempty = `(?:/` + pchar + `*)*`
		userinf = `(?:[\w.~!$&'()*+,;=:-]|` + hex2 + `)*`
		host    = `(?:[\w.~!$&'()*+,;=-]|` + hex2 + `)*`
		auth    = `(?:` + userinf + `@)?` + host + `(?::\d*)?`
		varchar = `(?:\w|` + hex2 + `)`
		varspec = varchar + `(?:\.?` + varchar + `)*(?::[1-9]\d{0,3}|\*)?`
		ptrseg  = `(?:/(?:[\x00-\x2E\x30-\x7D\x7F-\x{10FFFF}]|~[01])*)*`
	)
	return map[string]string{
		"email": `(?:` + atext + `+(?:\.` + atext + `+)*|"(?:\\[\x20-\x7E]|[\x20\x21\x23-\x5B\x5D-\x7E])*")` +
			`@[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?(?:\.[A-Za-z0-9][-A-Za-z0-9]*[A-Za-z0-9])*`,
		"date":      date,
		"time":      time,
		"date-time": date + `T` + time,
		"duration": `P(?:(?:\d+D|\d+M(?:\d+D)?|\d+Y(?:\d+M(?:\d+D)?)?)(?:T(?:\d+S|\d+M(?:\d+S)?|\d+H(?:\d+M(?:\d+S)?)?))?` +
			`|T(?:\d+S|\d+M(?:\d+S)?|\d+H(?:\d+M(?:\d+S)?)?)|\d+W)`,
		"ipv4": v4,
		"ipv6": `(?:(?:` + h16 + `:){7}` + h16 + `|(?:` + h16 + `:){1,7}:|(?:` + h16 + `:){1,6}:` + h16 +
			`|(?:` + h16 + `:){1,5}(?::` + h16 + `){1,2}|(?:` + h16 + `:){1,4}(?::` + h16 + `){1,3}` +
			`|(?:` + h16 + `:){1,3}(?::` + h16 + `){1,4}|(?:` + h16 + `:){1,2}(?::` + h16 + `){1,5}` +
			`|` + h16 + `:(?::` + h16 + `){1,6}|:(?:(?::` + h16 + `){1,7}|:)` +
			`|::(?:ffff(?::0{1,4})?:)?` + v4 + `|(?:` + h16 + `:){1,4}:` + v4 + `)`,
		"hostname": `[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*`,
		"uuid":     `[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`,
		"uri": `[a-zA-Z][a-zA-Z+.-]*:(?://` + auth + abempty + `|/?(?:` + pchar + `+(?:/` + pchar + `*)*)?)` +
			query + frag,
		"uri-reference": `(?://` + auth + abempty + `|/(?:` + pchar + `+(?:/` + pchar + `*)*)?` +
			`|(?:[\w.~!$&'()*+,;=@-]|` + hex2 + `)+(?:/` + pchar + `*)*)?` + query + frag,
		"uri-template": `(?:[\x21\x23\x24\x26\x28-\x3B\x3D\x3F-\x5B\x5D\x5F\x61-\x7A\x7E]|` + hex2 +
			`|\{[+#./;?&=,!@|]?` + varspec + `(?:,` + varspec + `)*\})*`,
		"json-pointer":          ptrseg,
		"relative-json-pointer": `(?:0|[1-9][0-9]*)(?:#|` + ptrseg + `)`,
	}
}()

// formatDFAs caches the automata of the formats, shared by all grammars.
var formatDFAs sync.Map // format name -> *pattern

// pattern is a compiled pattern or format: its automaton and, by state,
// the plain tokens (see plainToken) it allows without walking them: where
// every character a plain token can hold leads from the state to one same
// state, and so on from that one, room[s] is the number of such steps
// before every character is refused (-1: never refused, as in [^\n]*),
// and the plain tokens of at most room[s] characters are exactly those
// allowed; room[s] -2: the tokens must be walked.
type pattern struct {
	d    *regexgrammar.RuneDFA
	room []int32
}

// uniform returns the state every plain character leads to from s, if
// one.
func uniform(d *regexgrammar.RuneDFA, s int32) (int32, bool) {
	t := int32(-1)
	for i, iv := range [...][2]rune{{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}, {0x80, 0x10FFFF}} {
		u, ok := d.Uniform(s, iv[0], iv[1])
		if !ok || i > 0 && u != t {
			return 0, false
		}
		t = u
	}
	return t, true
}

// rooms computes pattern.room: a chain of uniform states that ends in -1
// gives its length, one that cycles -1, any other -2.
func rooms(d *regexgrammar.RuneDFA) []int32 {
	const unknown, busy = -3, -4
	room := make([]int32, d.States())
	for i := range room {
		room[i] = unknown
	}
	for s0 := range room {
		// Follow the chain from s0 to a known state, the dead state or a
		// cycle, then fill it in backwards.
		var chain []int32
		s := int32(s0)
		end := int32(0) // the room after the chain
		for {
			if room[s] >= -2 {
				end = room[s]
				break
			}
			if room[s] == busy { // a cycle of uniform states
				end = -1
				break
			}
			t, ok := uniform(d, s)
			if !ok {
				room[s] = -2
				end = -2
				break
			}
			if t < 0 { // every character refused
				room[s] = 0
				end = 0
				break
			}
			room[s] = busy
			chain = append(chain, s)
			s = t
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if end >= 0 {
				end++
			}
			room[chain[i]] = end
		}
	}
	return room
}

// typedString reports whether schema v's type is, or lists, "string"
// (vLLM refuses an unknown format only there).
func typedString(v *value) bool {
	t := v.get("type")
	if t == nil {
		return false
	}
	if t.kind == 's' {
		return t.str == "string"
	}
	for _, x := range t.vals {
		if x.kind == 's' && x.str == "string" {
			return true
		}
	}
	return false
}

// knownFormat reports whether schema v has a format this package
// implements.
func knownFormat(v *value) bool {
	f := v.get("format")
	if f == nil || f.kind != 's' {
		return false
	}
	_, ok := formats[f.str]
	return ok
}

// stringPattern returns the automaton of a string schema's pattern or
// format, or of both (their intersection: the value must match both),
// nil when it has neither. Errors: a pattern or format that is not a
// string, a format not in formats on a schema typed "string" (keyword
// "format", naming it), a pattern regexgrammar refuses (its message,
// keyword "pattern"), one that no value of the format matches, one over
// MaxPatternStates or the schema's over MaxSchemaPatternStates.
func (c *compiler) stringPattern(v *value, path string) (*pattern, error) {
	p, f := v.get("pattern"), v.get("format")
	if p != nil && p.kind != 's' {
		return nil, &Error{Keyword: "pattern", Path: path, Msg: "must be a string"}
	}
	if f != nil && f.kind != 's' {
		return nil, &Error{Keyword: "format", Path: path, Msg: "must be a string"}
	}
	if f != nil && !knownFormat(v) && typedString(v) {
		return nil, &Error{Keyword: "format", Path: path, Msg: fmt.Sprintf("%q is not supported (supported: date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid, uri, uri-reference, uri-template, json-pointer, relative-json-pointer)", f.str)}
	}
	var fp *pattern
	if knownFormat(v) {
		if d, ok := formatDFAs.Load(f.str); ok {
			fp = d.(*pattern)
		} else {
			d, err := compilePattern(formats[f.str])
			if err != nil {
				return nil, &Error{Keyword: "format", Path: path, Msg: fmt.Sprintf("%q: %v", f.str, err)}
			}
			formatDFAs.Store(f.str, d)
			fp = d
		}
	}
	if p == nil {
		return fp, nil
	}
	key := p.str
	if fp != nil {
		key = f.str + "\x00" + p.str // a pattern never holds NUL
	}
	if d, ok := c.res[key]; ok {
		return d, nil
	}
	d, err := compilePattern(p.str)
	if err != nil {
		return nil, &Error{Keyword: "pattern", Path: path, Msg: err.Error()}
	}
	if c.reWork += d.d.Work(); c.reWork > MaxSchemaPatternWork {
		return nil, &Error{Keyword: "pattern", Path: path, Msg: fmt.Sprintf("the schema's patterns take more than %d steps to compile", MaxSchemaPatternWork)}
	}
	if fp != nil {
		// Both hold: the product of the two automata (xgrammar would
		// enforce the format alone).
		x, err := regexgrammar.Intersect(fp.d, d.d, MaxPatternStates)
		if err != nil {
			return nil, &Error{Keyword: "pattern", Path: path, Msg: fmt.Sprintf("with format %q: %v", f.str, err)}
		}
		d = &pattern{d: x, room: rooms(x)}
	}
	if c.reTotal += d.d.States(); c.reTotal > MaxSchemaPatternStates {
		return nil, &Error{Keyword: "pattern", Path: path, Msg: fmt.Sprintf("the schema's patterns need more than %d automaton states", MaxSchemaPatternStates)}
	}
	c.res[key] = d
	return d, nil
}

// compilePattern compiles a pattern (full match, regexgrammar's syntax and
// errors) to its rune automaton.
func compilePattern(text string) (*pattern, error) {
	g, err := regexgrammar.Compile(text)
	if err != nil {
		return nil, err
	}
	d, err := g.RuneDFA(MaxPatternStates)
	if err != nil {
		return nil, fmt.Errorf("too complex: %w", err)
	}
	return &pattern{d: d, room: rooms(d)}, nil
}
