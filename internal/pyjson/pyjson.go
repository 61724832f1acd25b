// Package pyjson holds the pieces of Python json.dumps-compatible output that
// more than one package needs. parse and template both reproduce
// json.dumps byte for byte and must not import each other, so the shared
// string quoting lives here.
package pyjson

import "unicode/utf8"

// Writer is what the quoting functions write to; *bytes.Buffer and
// *strings.Builder both satisfy it.
type Writer interface {
	WriteByte(c byte) error
	WriteString(s string) (int, error)
}

const hexDigits = "0123456789abcdef"

// WriteString writes s as a JSON string literal the way Python's json
// encoder does: only '"', '\\' and control characters below U+0020 are
// escaped, plus U+007F and all non-ASCII when ensureASCII (astral runes as
// UTF-16 surrogate pairs). Invalid UTF-8 bytes become U+FFFD.
func WriteString(w Writer, s string, ensureASCII bool) {
	w.WriteByte('"')
	WriteStringBody(w, s, ensureASCII)
	w.WriteByte('"')
}

// WriteStringBody is WriteString without the surrounding quotes.
func WriteStringBody(w Writer, s string, ensureASCII bool) {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!ensureASCII || c != 0x7f) {
				i++
				continue
			}
			w.WriteString(s[start:i])
			switch c {
			case '"':
				w.WriteString(`\"`)
			case '\\':
				w.WriteString(`\\`)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			case '\b':
				w.WriteString(`\b`)
			case '\f':
				w.WriteString(`\f`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[c>>4])
				w.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !ensureASCII {
			if r == utf8.RuneError && size == 1 {
				w.WriteString(s[start:i])
				w.WriteString("\ufffd")
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		w.WriteString(s[start:i])
		if r >= 0x10000 {
			r -= 0x10000
			writeU(w, 0xd800|(r>>10)&0x3ff)
			writeU(w, 0xdc00|r&0x3ff)
		} else {
			writeU(w, r)
		}
		i += size
		start = i
	}
	w.WriteString(s[start:])
}

// writeU writes x as a \uXXXX escape.
func writeU(w Writer, x rune) {
	w.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		w.WriteByte(hexDigits[(x>>uint(shift))&0xf])
	}
}
