package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// matcher finds the non-empty matches of a pattern in a string.
type matcher interface {
	// appendMatches appends the [start, end) byte offsets of the successive
	// non-overlapping, non-empty matches in s to dst, flattened as start0, end0, ...
	appendMatches(s string, dst []int) []int
}

// Split behaviours (tokenizers::SplitDelimiterBehavior).
const (
	behRemoved = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

// preStep is one pre-tokenizer of the pipeline: a Split (m != nil) or the ByteLevel
// add_prefix_space step.
type preStep struct {
	m           matcher
	behavior    int
	invert      bool
	prefixSpace bool
}

// gpt2Pattern is the regex of the ByteLevel pre-tokenizer with use_regex = true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

type preTokJSON struct {
	Type           string            `json:"type"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        *patternJSON      `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

func parsePreTokenizer(raw json.RawMessage) ([]preStep, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var p preTokJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%w: pre_tokenizer: %v", ErrFormat, err)
	}
	switch p.Type {
	case "Sequence":
		var steps []preStep
		for _, sub := range p.Pretokenizers {
			s, err := parsePreTokenizer(sub)
			if err != nil {
				return nil, err
			}
			steps = append(steps, s...)
		}
		return steps, nil
	case "Split":
		if p.Pattern == nil {
			return nil, fmt.Errorf("%w: Split without pattern", ErrFormat)
		}
		var m matcher
		switch {
		case p.Pattern.Regex != nil:
			var err error
			if m, err = compileMatcher(*p.Pattern.Regex); err != nil {
				return nil, err
			}
		case p.Pattern.String != nil:
			if *p.Pattern.String == "" {
				return nil, fmt.Errorf("%w: Split with empty string pattern", ErrFormat)
			}
			m = literalMatcher(*p.Pattern.String)
		default:
			return nil, fmt.Errorf("%w: Split pattern", ErrFormat)
		}
		beh, ok := map[string]int{"Removed": behRemoved, "Isolated": behIsolated,
			"MergedWithPrevious": behMergedWithPrevious, "MergedWithNext": behMergedWithNext,
			"Contiguous": behContiguous}[p.Behavior]
		if !ok {
			return nil, fmt.Errorf("%w: Split behavior %q", ErrFormat, p.Behavior)
		}
		return []preStep{{m: m, behavior: beh, invert: p.Invert}}, nil
	case "ByteLevel":
		var steps []preStep
		if p.AddPrefixSpace {
			steps = append(steps, preStep{prefixSpace: true})
		}
		if p.UseRegex == nil || *p.UseRegex {
			m, err := compileMatcher(gpt2Pattern)
			if err != nil {
				return nil, err
			}
			steps = append(steps, preStep{m: m, behavior: behIsolated})
		}
		return steps, nil
	}
	return nil, fmt.Errorf("%w: pre_tokenizer %q (only Sequence, Split, ByteLevel)", ErrUnsupported, p.Type)
}

// compileMatcher returns the hand-written scanner for a known pattern, or a regexp2
// matcher for any other.
func compileMatcher(pattern string) (matcher, error) {
	if m := scannerFor(pattern); m != nil {
		return m, nil
	}
	return newRegexMatcher(pattern)
}

// RegexMatchTimeout bounds the time regexp2 may spend on one search of a Split
// pattern that has no hand-written scanner (any pattern of a tokenizer.json other
// than the DeepSeek / GPT-2 ones): it is set as the compiled pattern's
// regexp2.Regexp.MatchTimeout, and the successive searches over one pre-token stop
// once their total time exceeds it as well. A backtracking pattern such as `(a+)+$`
// would otherwise make Encode run for minutes on a short input. When it fires,
// EncodeErr and AppendEncodeErr return an error wrapping ErrRegexTimeout; Encode,
// which cannot fail, keeps the text not yet searched as one piece. 2 s is several
// orders of magnitude above the time of a real tokenizer pattern on a 10 MB input.
const RegexMatchTimeout = 2 * time.Second

// regexMatcher runs a pattern with regexp2, a backtracking engine whose syntax and
// semantics (lookaround, \p{..}, leftmost-first alternation) match Oniguruma's, the
// engine HF tokenizers uses, for the patterns found in tokenizer.json files.
type regexMatcher struct {
	re *regexp2.Regexp
}

func newRegexMatcher(pattern string) (*regexMatcher, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("%w: regex %q: %v", ErrFormat, pattern, err)
	}
	re.MatchTimeout = RegexMatchTimeout
	return &regexMatcher{re: re}, nil
}

// appendMatches implements matcher; on a timeout it returns the matches found so
// far (the rest of s is then one gap).
func (m *regexMatcher) appendMatches(s string, dst []int) []int {
	dst, _ = m.appendMatchesErr(s, dst)
	return dst
}

// appendMatchesErr is appendMatches reporting a timeout (an error wrapping
// ErrRegexTimeout) after the matches found before it.
func (m *regexMatcher) appendMatchesErr(s string, dst []int) ([]int, error) {
	if s == "" {
		return dst, nil
	}
	start := time.Now()
	// regexp2 works on runes; invalid bytes become U+FFFD of width 1, as in
	// utf8.DecodeRuneInString, so rune indexes map back to byte offsets.
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(s))
	mt, err := m.re.FindRunesMatch(runes)
	for mt != nil && err == nil {
		if mt.Length > 0 {
			dst = append(dst, offs[mt.Index], offs[mt.Index+mt.Length])
		}
		if time.Since(start) > RegexMatchTimeout {
			err = errTimeoutTotal
			break
		}
		mt, err = m.re.FindNextMatch(mt)
	}
	if err != nil {
		// regexp2's message quotes the whole input: keep only the pattern.
		return dst, fmt.Errorf("%w: pattern %q on a pre-token of %d bytes (limit %v)",
			ErrRegexTimeout, m.re.String(), len(s), RegexMatchTimeout)
	}
	return dst, nil
}

var errTimeoutTotal = fmt.Errorf("total time over %v", RegexMatchTimeout)

type literalMatcher string

func (m literalMatcher) appendMatches(s string, dst []int) []int {
	for i := 0; ; {
		j := strings.Index(s[i:], string(m))
		if j < 0 {
			return dst
		}
		dst = append(dst, i+j, i+j+len(m))
		i += j + len(m)
	}
}

// pieces splits s by step's matches per its behavior and calls fn on each non-empty
// piece; buf is scratch space, returned for reuse.
// A regex timeout is stored in *errp (if nil) and the text after the last match
// found is treated as a gap.
func (st *preStep) pieces(s string, buf []int, errp *error, fn func(lo, hi int)) []int {
	if rm, ok := st.m.(*regexMatcher); ok {
		var err error
		buf, err = rm.appendMatchesErr(s, buf[:0])
		if err != nil && *errp == nil {
			*errp = err
		}
	} else {
		buf = st.m.appendMatches(s, buf[:0])
	}
	if st.behavior == behIsolated {
		// Both gaps and matches are pieces; invert changes nothing.
		prev := 0
		for k := 0; k+1 < len(buf); k += 2 {
			if buf[k] > prev {
				fn(prev, buf[k])
			}
			fn(buf[k], buf[k+1])
			prev = buf[k+1]
		}
		if prev < len(s) {
			fn(prev, len(s))
		}
		return buf
	}
	// General case: build (lo, hi, isMatch) segments covering s, then fold them as
	// tokenizers' NormalizedString::split does.
	type seg struct {
		lo, hi  int
		isMatch bool
	}
	var segs []seg
	prev := 0
	for k := 0; k+1 < len(buf); k += 2 {
		if buf[k] > prev {
			segs = append(segs, seg{prev, buf[k], st.invert})
		}
		segs = append(segs, seg{buf[k], buf[k+1], !st.invert})
		prev = buf[k+1]
	}
	if prev < len(s) {
		segs = append(segs, seg{prev, len(s), st.invert})
	}
	var out []seg // isMatch here means "remove"
	switch st.behavior {
	case behRemoved:
		out = segs
	case behContiguous:
		prevMatch := false
		for _, g := range segs {
			if g.isMatch == prevMatch && len(out) > 0 {
				out[len(out)-1].hi = g.hi
			} else {
				out = append(out, seg{g.lo, g.hi, false})
			}
			prevMatch = g.isMatch
		}
	case behMergedWithPrevious:
		prevMatch := false
		for _, g := range segs {
			if g.isMatch && !prevMatch && len(out) > 0 {
				out[len(out)-1].hi = g.hi
			} else {
				out = append(out, seg{g.lo, g.hi, false})
			}
			prevMatch = g.isMatch
		}
	case behMergedWithNext:
		prevMatch := false
		for i := len(segs) - 1; i >= 0; i-- {
			g := segs[i]
			if g.isMatch && !prevMatch && len(out) > 0 {
				out[len(out)-1].lo = g.lo
			} else {
				out = append(out, seg{g.lo, g.hi, false})
			}
			prevMatch = g.isMatch
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	for _, g := range out {
		if !g.isMatch && g.hi > g.lo {
			fn(g.lo, g.hi)
		}
	}
	return buf
}
