package tokenizer

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small scanner for the two large members of tokenizer.json, model.vocab (an object
// of ~128k string -> int) and model.merges (an array of ~128k strings or string
// pairs). encoding/json builds them through reflection at about a third of the speed;
// the input has already been validated by encoding/json (json.RawMessage), so these
// functions only need to be correct on valid JSON and to fail cleanly otherwise.

var errJSONScan = errors.New("unexpected JSON")

type jscan struct {
	b []byte
	i int
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte (0 at the end).
func (s *jscan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jscan) expect(c byte) error {
	if s.peek() != c {
		return errJSONScan
	}
	s.i++
	return nil
}

// str reads a JSON string, decoding escapes as encoding/json does (invalid
// surrogates become U+FFFD).
func (s *jscan) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := s.b[start:s.i]
			s.i++
			if !utf8.Valid(v) {
				return "", errJSONScan
			}
			return string(v), nil
		}
		if c == '\\' {
			return s.strSlow(start)
		}
		s.i++
	}
	return "", errJSONScan
}

func (s *jscan) strSlow(start int) (string, error) {
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(buf) {
				return "", errJSONScan
			}
			return string(buf), nil
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", errJSONScan
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", errJSONScan
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if x, ok := s.hex4(); ok {
						r2 = x
					} else {
						s.i = save
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						buf = utf8.AppendRune(buf, dec)
						continue
					}
					s.i = save
				}
				r = utf8.RuneError
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", errJSONScan
		}
	}
	return "", errJSONScan
}

func (s *jscan) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// int reads a JSON integer that fits in int32.
func (s *jscan) int() (int32, error) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 32)
	if err != nil {
		return 0, errJSONScan
	}
	return int32(v), nil
}

// parseVocab parses model.vocab: {"token": id, ...}.
func parseVocab(raw []byte) (map[string]int32, error) {
	s := &jscan{b: raw}
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	m := make(map[string]int32, len(raw)/16)
	if s.peek() == '}' {
		return m, nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return nil, err
		}
		if err := s.expect(':'); err != nil {
			return nil, err
		}
		v, err := s.int()
		if err != nil {
			return nil, err
		}
		m[k] = v
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			return m, nil
		default:
			return nil, errJSONScan
		}
	}
}

// parseMerges parses model.merges: ["a b", ...] or [["a", "b"], ...].
func parseMerges(raw []byte) ([][2]string, error) {
	s := &jscan{b: raw}
	if err := s.expect('['); err != nil {
		return nil, err
	}
	var out [][2]string
	if s.peek() == ']' {
		return out, nil
	}
	for {
		var p [2]string
		switch s.peek() {
		case '"':
			v, err := s.str()
			if err != nil {
				return nil, err
			}
			a, b, ok := cutSpace(v)
			if !ok {
				return nil, errJSONScan
			}
			p = [2]string{a, b}
		case '[':
			s.i++
			var err error
			if p[0], err = s.str(); err != nil {
				return nil, err
			}
			if err := s.expect(','); err != nil {
				return nil, err
			}
			if p[1], err = s.str(); err != nil {
				return nil, err
			}
			if err := s.expect(']'); err != nil {
				return nil, err
			}
		default:
			return nil, errJSONScan
		}
		out = append(out, p)
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			return out, nil
		default:
			return nil, errJSONScan
		}
	}
}

// cutSpace splits a "left right" merge at its space; like HF, it rejects a string
// without exactly one space.
func cutSpace(v string) (string, string, bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			a, b := v[:i], v[i+1:]
			for j := 0; j < len(b); j++ {
				if b[j] == ' ' {
					return "", "", false
				}
			}
			return a, b, true
		}
	}
	return "", "", false
}
