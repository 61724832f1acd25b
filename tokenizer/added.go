package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// trie finds added tokens leftmost-longest, the semantics of the daachorse
// Aho-Corasick automaton (MatchKind::LeftmostLongest) that HF tokenizers uses.
type trie struct {
	nodes []trieNode
	first [256]bool // bytes that start some key
}

type trieNode struct {
	edges []trieEdge // sorted by byte
	idx   int32      // index into Tokenizer.added of the key ending here, or -1
}

type trieEdge struct {
	b    byte
	next int32
}

type trieEntry struct {
	key string
	idx int32
}

func newTrie(entries []trieEntry) *trie {
	if len(entries) == 0 {
		return nil
	}
	t := &trie{nodes: []trieNode{{idx: -1}}}
	for _, e := range entries {
		n := int32(0)
		for i := 0; i < len(e.key); i++ {
			b := e.key[i]
			edges := t.nodes[n].edges
			j := sort.Search(len(edges), func(k int) bool { return edges[k].b >= b })
			if j < len(edges) && edges[j].b == b {
				n = edges[j].next
				continue
			}
			t.nodes = append(t.nodes, trieNode{idx: -1})
			next := int32(len(t.nodes) - 1)
			edges = append(edges, trieEdge{})
			copy(edges[j+1:], edges[j:])
			edges[j] = trieEdge{b: b, next: next}
			t.nodes[n].edges = edges
			n = next
		}
		t.nodes[n].idx = e.idx
		t.first[e.key[0]] = true
	}
	return t
}

// longestAt returns the index and end of the longest key that starts at s[i:], or
// (-1, 0).
func (t *trie) longestAt(s string, i int) (idx int32, end int) {
	idx = -1
	n := int32(0)
	for j := i; j < len(s); j++ {
		edges := t.nodes[n].edges
		b := s[j]
		next := int32(-1)
		if len(edges) <= 8 {
			for _, e := range edges {
				if e.b == b {
					next = e.next
					break
				}
			}
		} else {
			k := sort.Search(len(edges), func(k int) bool { return edges[k].b >= b })
			if k < len(edges) && edges[k].b == b {
				next = edges[k].next
			}
		}
		if next < 0 {
			break
		}
		n = next
		if t.nodes[n].idx >= 0 {
			idx, end = t.nodes[n].idx, j+1
		}
	}
	return idx, end
}

// find returns the leftmost-longest match in s at or after from: its added-token
// index, start and end; idx is -1 when there is none.
func (t *trie) find(s string, from int) (idx int32, start, end int) {
	for i := from; i < len(s); i++ {
		if !t.first[s[i]] {
			continue
		}
		if idx, end := t.longestAt(s, i); idx >= 0 {
			return idx, i, end
		}
	}
	return -1, 0, 0
}

// SpecialMatching selects which added tokens Encode recognizes in the input text.
type SpecialMatching uint8

const (
	// MatchAll recognizes every added token, special or not (HF's default).
	MatchAll SpecialMatching = iota
	// MatchNonSpecial leaves special added tokens (BOS, EOS, placeholders, ...) unmatched
	// so that their literals are tokenized as ordinary text; non-special added tokens are
	// still recognized. This is HF's `encode_special_tokens = True`.
	MatchNonSpecial
	// MatchNone recognizes no added token: the whole text goes through the
	// pre-tokenizer and BPE (the safe choice for untrusted user text).
	MatchNone
)

// segment is a piece of the input: an added token (idx >= 0) or text (idx == -1).
type segment struct {
	start, end int
	idx        int32
}

// splitAdded appends the segments of s to dst: HF's extract_and_normalize with an
// identity normalizer, i.e. find_matches with the non-normalized tokens on the whole
// text, then with the normalized tokens on each remaining text piece. tmp is scratch
// space; both slices are returned for reuse.
func (t *Tokenizer) splitAdded(s string, mode SpecialMatching, tmp, dst []segment) ([]segment, []segment) {
	if mode == MatchNone || (t.addedRaw == nil && t.addedNorm == nil) {
		if len(s) > 0 {
			dst = append(dst, segment{0, len(s), -1})
		}
		return tmp, dst
	}
	if t.addedRaw == nil {
		return tmp, t.findMatches(s, 0, len(s), t.addedNorm, mode, dst)
	}
	if t.addedNorm == nil {
		return tmp, t.findMatches(s, 0, len(s), t.addedRaw, mode, dst)
	}
	tmp = t.findMatches(s, 0, len(s), t.addedRaw, mode, tmp[:0])
	for _, seg := range tmp {
		if seg.idx >= 0 {
			dst = append(dst, seg)
			continue
		}
		dst = t.findMatches(s, seg.start, seg.end, t.addedNorm, mode, dst)
	}
	return tmp, dst
}

// findMatches is HF's AddedVocabulary::find_matches on sentence s[lo:hi].
func (t *Tokenizer) findMatches(s string, lo, hi int, tr *trie, mode SpecialMatching, dst []segment) []segment {
	sentence := s[lo:hi]
	if len(sentence) == 0 {
		return dst // HF yields one empty piece, which pre-tokenization drops
	}
	startOffset := 0
	for from := 0; from < len(sentence); {
		idx, start, stop := tr.find(sentence, from)
		if idx < 0 {
			break
		}
		from = stop // the automaton resumes after the match, even a discarded one
		a := &t.added[idx]
		if mode == MatchNonSpecial && a.Special {
			continue
		}
		if a.SingleWord {
			startSpace := start == 0 || !endsWithWord(sentence[:start])
			stopSpace := stop == len(sentence) || !startsWithWord(sentence[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if a.LStrip {
			start = max(spaceLeftmostAtEnd(sentence[:start]), startOffset)
		}
		if a.RStrip {
			stop += spaceRightmostAtStart(sentence[stop:])
		}
		if startOffset < start {
			dst = append(dst, segment{lo + startOffset, lo + start, -1})
		}
		dst = append(dst, segment{lo + start, lo + stop, idx})
		startOffset = stop
	}
	if startOffset < len(sentence) {
		dst = append(dst, segment{lo + startOffset, hi, -1})
	}
	return dst
}

// isWordRune is Rust regex's Unicode \w: Alphabetic, M, Nd, Pc, Join_Control.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Nl, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

// spaceLeftmostAtEnd is the start of the trailing white space of s (len(s) if none).
func spaceLeftmostAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		i -= n
	}
	return i
}

// spaceRightmostAtStart is the length of the leading white space of s.
func spaceRightmostAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.Is(unicode.White_Space, r) {
			break
		}
		i += n
	}
	return i
}
