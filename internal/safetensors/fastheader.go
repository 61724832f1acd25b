package safetensors

import "unicode/utf8"

// parseHeaderFast decodes the common shape of a safetensors header without
// reflection: an object whose members are "__metadata__" (an object of plain
// strings) or tensors {"dtype": string, "shape": [ints], "data_offsets":
// [ints]} with plain-ASCII-or-UTF-8 strings without escapes, non-negative
// integers without leading zeros, no duplicate keys and no other fields.
// Anything else returns ok=false and ParseHeader falls back to encoding/json,
// which then also produces the error messages. The result is identical to
// the encoding/json decoding whenever ok is true (FuzzHeader checks this).
// A V4-Flash shard header (1,500 tensors) decodes about 4x faster this way.
func parseHeaderFast(b []byte) (map[string]*rawEntry, bool) {
	p := fastParser{b: b}
	p.ws()
	if !p.eat('{') {
		return nil, false
	}
	out := make(map[string]*rawEntry, len(b)/96)
	p.ws()
	if p.eat('}') {
		return out, p.end()
	}
	for {
		p.ws()
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		if _, dup := out[key]; dup {
			return nil, false
		}
		p.ws()
		if !p.eat(':') {
			return nil, false
		}
		p.ws()
		var e *rawEntry
		if key == "__metadata__" {
			e, ok = p.metadata()
		} else {
			e, ok = p.entry()
		}
		if !ok {
			return nil, false
		}
		out[key] = e
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return out, p.end()
		}
		return nil, false
	}
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end accepts only trailing white space.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// str reads a string without escapes or control characters, valid UTF-8.
func (p *fastParser) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// ints reads an array of non-negative integers of at most 18 digits.
func (p *fastParser) ints() ([]int64, bool) {
	if !p.eat('[') {
		return nil, false
	}
	out := []int64{}
	p.ws()
	if p.eat(']') {
		return out, true
	}
	for {
		p.ws()
		start := p.i
		var v int64
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			v = v*10 + int64(p.b[p.i]-'0')
			p.i++
		}
		n := p.i - start
		if n == 0 || n > 18 || (n > 1 && p.b[start] == '0') {
			return nil, false
		}
		out = append(out, v)
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat(']') {
			return out, true
		}
		return nil, false
	}
}

func (p *fastParser) entry() (*rawEntry, bool) {
	if !p.eat('{') {
		return nil, false
	}
	e := &rawEntry{}
	for first := true; ; first = false {
		p.ws()
		if first && p.eat('}') {
			return nil, false // {} lacks fields: let encoding/json report it
		}
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.eat(':') {
			return nil, false
		}
		p.ws()
		switch {
		case key == "dtype" && e.DType == nil:
			s, ok := p.str()
			if !ok {
				return nil, false
			}
			e.DType = &s
		case key == "shape" && e.Shape == nil:
			v, ok := p.ints()
			if !ok {
				return nil, false
			}
			e.Shape = &v
		case key == "data_offsets" && e.DataOffsets == nil:
			v, ok := p.ints()
			if !ok {
				return nil, false
			}
			e.DataOffsets = &v
		default:
			return nil, false
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
				return nil, false
			}
			return e, true
		}
		return nil, false
	}
}

// metadata checks an object of plain strings and keeps its raw bytes.
func (p *fastParser) metadata() (*rawEntry, bool) {
	start := p.i
	if !p.eat('{') {
		return nil, false
	}
	seen := map[string]bool{}
	p.ws()
	if !p.eat('}') {
		for {
			p.ws()
			k, ok := p.str()
			if !ok || seen[k] {
				return nil, false
			}
			seen[k] = true
			p.ws()
			if !p.eat(':') {
				return nil, false
			}
			p.ws()
			if _, ok := p.str(); !ok {
				return nil, false
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			if p.eat('}') {
				break
			}
			return nil, false
		}
	}
	return &rawEntry{raw: append([]byte(nil), p.b[start:p.i]...)}, true
}
