package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Hand-written scanners for the Split regexes of the DeepSeek V3/V4 tokenizer. Each
// one reproduces, match for match, what a backtracking regex engine (regexp2 and
// Oniguruma alike) finds for its pattern; FuzzScanners and TestScannersEqualRegexp2
// hold them equal to regexp2 (on text whose characters have the same class in
// Unicode 15.0, Go's and regexp2's tables, and 16.0, Oniguruma's and these scanners').

const (
	// Patterns of the DeepSeek V3/V4 pre-tokenizer, exactly as in tokenizer.json.
	dsDigitsPattern = `\p{N}{1,3}`
	dsCJKPattern    = "[一-龥぀-ゟ゠-ヿ]+"
	dsMainPattern   = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

func scannerFor(pattern string) matcher {
	initClasses()
	switch pattern {
	case dsDigitsPattern:
		return runScanner{mask: clN, max: 3}
	case dsCJKPattern:
		return runScanner{mask: clCJK}
	case dsMainPattern:
		return mainScanner{}
	}
	return nil
}

// Character class bits.
const (
	clL          = 1 << iota // \p{L}
	clM                      // \p{M}
	clN                      // \p{N}
	clP                      // \p{P}
	clS                      // \p{S}
	clSpace                  // \s (unicode.IsSpace, as regexp2)
	clCJK                    // [一-龥぀-ゟ゠-ヿ]
	clPunctASCII             // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]
)

var (
	bmpClassOnce sync.Once
	bmpClass     []uint8 // class bits of every rune < 0x10000
)

// classRange is one run of unicode16.
type classRange struct {
	lo, hi rune
	bits   uint8
}

// class16 returns the L/M/N/P/S class bits of r in Unicode 16.0.
func class16(r rune) uint8 {
	if r < 0x80 {
		switch {
		case unicode.IsLetter(r):
			return clL
		case unicode.IsNumber(r):
			return clN
		case unicode.IsPunct(r):
			return clP
		case unicode.IsSymbol(r):
			return clS
		}
		return 0
	}
	lo, hi := 0, len(unicode16)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if unicode16[m].hi < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(unicode16) && unicode16[lo].lo <= r {
		return unicode16[lo].bits
	}
	return 0
}

// classOfSlow computes the class bits of r. L, M, N, P and S follow Unicode 16.0 (as
// Oniguruma in HF tokenizers); \s is unicode.IsSpace (White_Space, as regexp2 and
// Oniguruma).
func classOfSlow(r rune) uint8 {
	c := class16(r)
	if unicode.IsSpace(r) {
		c |= clSpace
	}
	if r >= 0x4E00 && r <= 0x9FA5 || r >= 0x3040 && r <= 0x309F || r >= 0x30A0 && r <= 0x30FF {
		c |= clCJK
	}
	if r < 0x80 && r > ' ' && r < 0x7F && !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
		c |= clPunctASCII
	}
	return c
}

// classGo15 is classOfSlow with Go's unicode tables (Unicode 15.0), the classes
// regexp2 sees; tests use it to find runes where the two versions disagree.
func classGo15(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= clL
	}
	if unicode.IsMark(r) {
		c |= clM
	}
	if unicode.IsNumber(r) {
		c |= clN
	}
	if unicode.IsPunct(r) {
		c |= clP
	}
	if unicode.IsSymbol(r) {
		c |= clS
	}
	return c | classOfSlow(r)&^(clL|clM|clN|clP|clS)
}

func initClasses() {
	bmpClassOnce.Do(func() {
		t := make([]uint8, 0x10000)
		for r := range t {
			t[r] = classOfSlow(rune(r))
		}
		bmpClass = t
	})
}

// next decodes the rune at s[i:] and returns its class bits and width. Invalid UTF-8
// decodes as U+FFFD (a symbol) of width 1, as in regexp2's []rune view of the string.
func next(s string, i int) (r rune, c uint8, w int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return rune(b), bmpClass[b], 1
	}
	r, w = utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 {
		return r, bmpClass[r], w
	}
	return r, classOfSlow(r), w
}

// runScanner matches runs of 1..max runes (max 0: unbounded) of a class:
// \p{N}{1,3} and [一-龥぀-ゟ゠-ヿ]+.
type runScanner struct {
	mask uint8
	max  int
}

func (m runScanner) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		_, c, w := next(s, i)
		if c&m.mask == 0 {
			i += w
			continue
		}
		start := i
		i += w
		for k := 1; (m.max == 0 || k < m.max) && i < len(s); k++ {
			_, c, w := next(s, i)
			if c&m.mask == 0 {
				break
			}
			i += w
		}
		dst = append(dst, start, i)
	}
	return dst
}

// mainScanner is the third DeepSeek Split regex, with alternatives
//
//	A  [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
//	B  [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//	C   ?[\p{P}\p{S}]+[\r\n]*
//	D  \s*[\r\n]+
//	E  \s+(?!\S)
//	F  \s+
//
// tried in this order at each position, leftmost position first.
type mainScanner struct{}

func (mainScanner) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		end, w := mainMatchAt(s, i)
		if end < 0 {
			i += w
			continue
		}
		dst = append(dst, i, end)
		i = end
	}
	return dst
}

func isLetterASCII(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// runOf returns the end of the run of runes with any of the class bits mask from i.
func runOf(s string, i int, mask uint8) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if bmpClass[b]&mask == 0 {
				return i
			}
			i++
			continue
		}
		_, c, w := next(s, i)
		if c&mask == 0 {
			return i
		}
		i += w
	}
	return i
}

// mainMatchAt returns the end of the match of mainScanner's regex starting at i, or
// -1 and the width of the rune at i when no alternative matches there.
func mainMatchAt(s string, i int) (end, width int) {
	r0, c0, w0 := next(s, i)
	// A
	if c0&clPunctASCII != 0 && i+1 < len(s) && isLetterASCII(s[i+1]) {
		j := i + 2
		for j < len(s) && isLetterASCII(s[j]) {
			j++
		}
		return j, w0
	}
	// B
	if r0 != '\r' && r0 != '\n' && c0&(clL|clP|clS) == 0 && i+w0 < len(s) {
		if _, c1, w1 := next(s, i+w0); c1&(clL|clM) != 0 {
			return runOf(s, i+w0+w1, clL|clM), w0
		}
	}
	if c0&(clL|clM) != 0 {
		return runOf(s, i+w0, clL|clM), w0
	}
	// C
	if r0 == ' ' && i+1 < len(s) {
		if _, c1, w1 := next(s, i+1); c1&(clP|clS) != 0 {
			return crlfRun(s, runOf(s, i+1+w1, clP|clS)), w0
		}
	}
	if c0&(clP|clS) != 0 {
		return crlfRun(s, runOf(s, i+w0, clP|clS)), w0
	}
	if c0&clSpace == 0 {
		return -1, w0
	}
	// D: the white-space run up to and including its last \r or \n.
	wend := runOf(s, i, clSpace)
	lastNL := -1
	lastStart := i // start of the last rune of the run
	for j := i; j < wend; {
		b := s[j]
		if b == '\r' || b == '\n' {
			lastNL = j
		}
		lastStart = j
		if b < utf8.RuneSelf {
			j++
		} else {
			_, w := utf8.DecodeRuneInString(s[j:])
			j += w
		}
	}
	if lastNL >= 0 {
		return lastNL + 1, w0
	}
	// E: all of the run at the end of s, else all but its last rune.
	if wend == len(s) {
		return wend, w0
	}
	if lastStart > i {
		return lastStart, w0
	}
	// F
	return wend, w0
}

func crlfRun(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}
