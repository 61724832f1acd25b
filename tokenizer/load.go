package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// AddedToken is one entry of tokenizer.json's "added_tokens" table, with HF's meaning
// for each flag (tokenizers::AddedToken).
type AddedToken struct {
	ID         int32  // token id, as HF assigns it (see Load)
	Content    string // the literal text matched in input and produced by Decode
	Special    bool   // skipped by Decode when DecodeOptions.SkipSpecialTokens is set
	Normalized bool   // matched against normalized text (second pass) instead of raw text
	LStrip     bool   // the match absorbs white space on its left
	RStrip     bool   // the match absorbs white space on its right
	SingleWord bool   // matched only when not adjacent to word characters
}

// Tokenizer is a loaded byte-level BPE tokenizer. It is immutable after Load and safe
// for concurrent use by many goroutines.
type Tokenizer struct {
	// BPE model.
	byteID       [256]int32        // id of the one-byte symbol of each byte value
	merges       map[uint64]uint64 // left<<32|right -> rank<<32|result id
	uniqueMerges bool              // every result id is produced by exactly one pair
	ignoreMerges bool              // HF BPE ignore_merges: a whole word in vocab wins
	vocab        map[string]int32  // raw byte string -> id (base vocabulary)
	vocabJSON    map[string]int32  // model.vocab as in the file; only during Parse

	// Id tables, indexed by id, length VocabSize.
	tokenStr   []string // token as written in tokenizer.json (ByteLevel alphabet for base tokens)
	tokenBytes []string // bytes Decode produces for the id
	known      []bool   // id has a token
	special    []bool   // Decode skips it when SkipSpecialTokens is set

	added     []AddedToken
	addedByID map[int32]int    // index into added
	addedIDs  map[string]int32 // content -> id
	oddVocab  map[string]int32 // base tokens outside the ByteLevel alphabet -> id
	addedRaw  *trie            // non-normalized added tokens
	addedNorm *trie            // normalized added tokens

	steps []preStep // pre-tokenizer pipeline
	cache *wordCache

	bos, eos       int32 // -1 if absent
	addBOS, addEOS bool
	maxLen         int
}

type addedTokenJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type tokenizerJSON struct {
	AddedTokens  []addedTokenJSON `json:"added_tokens"`
	Normalizer   json.RawMessage  `json:"normalizer"`
	PreTokenizer json.RawMessage  `json:"pre_tokenizer"`
	Decoder      json.RawMessage  `json:"decoder"`
	Model        struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"` // parseVocab
		Merges                  json.RawMessage `json:"merges"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Dropout                 *float64        `json:"dropout"`
	} `json:"model"`
}

// Load reads a tokenizer from directory dir: tokenizer.json or tokenizer.json.gz
// (required) and tokenizer_config.json or tokenizer_config.json.gz (optional; it
// supplies bos_token, eos_token, add_bos_token, add_eos_token and model_max_length).
// Errors wrap ErrFormat, ErrUnsupported, ErrTooLarge or the fs error
// (errors.Is(err, fs.ErrNotExist) when tokenizer.json is missing).
func Load(dir string) (*Tokenizer, error) {
	tj, err := readMaybeGz(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := readMaybeGz(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return Parse(tj, cfg)
}

// LoadFile reads a tokenizer from a single tokenizer.json file (gzipped when its name
// ends in .gz), without tokenizer_config.json: no BOS/EOS is known then.
func LoadFile(path string) (*Tokenizer, error) {
	tj, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(tj, nil)
}

// readMaybeGz reads path, or path+".gz" when path does not exist.
func readMaybeGz(path string) ([]byte, error) {
	b, err := readFile(path)
	if err == nil || !os.IsNotExist(err) {
		return b, err
	}
	b, err2 := readFile(path + ".gz")
	if err2 != nil {
		if os.IsNotExist(err2) {
			return nil, err // report the plain name
		}
		return nil, err2
	}
	return b, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
		}
		defer zr.Close()
		r = zr
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s exceeds %d bytes", ErrTooLarge, path, MaxFileBytes)
	}
	return b, nil
}

// Parse builds a Tokenizer from the contents of tokenizer.json and, optionally (nil
// or empty to omit), tokenizer_config.json. Errors wrap ErrFormat, ErrUnsupported or
// ErrTooLarge. Added tokens get their ids as HF's loader assigns them: in file order,
// the id of an equal vocabulary token, else the next id from the vocabulary size on
// (the "id" field of the file is not consulted; for files written by HF the two agree).
func Parse(tokenizerJSONData, configJSON []byte) (*Tokenizer, error) {
	if len(tokenizerJSONData) > MaxFileBytes || len(configJSON) > MaxFileBytes {
		return nil, ErrTooLarge
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(tokenizerJSONData, &tj); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrFormat, err)
	}
	initClasses()
	t := &Tokenizer{bos: -1, eos: -1, cache: newWordCache(1 << 17)}
	if err := t.buildModel(&tj); err != nil {
		return nil, err
	}
	if err := checkNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	steps, err := parsePreTokenizer(tj.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if len(steps) > MaxPreTokenizerSteps {
		// Every step rescans the whole text: 20,000 Split steps made a 100 KB encode take
		// minutes with no way to cancel it. Real tokenizer.json files have a handful.
		return nil, fmt.Errorf("%w: %d pre-tokenizer steps (at most %d)", ErrUnsupported, len(steps), MaxPreTokenizerSteps)
	}
	t.steps = steps
	if err := checkDecoder(tj.Decoder); err != nil {
		return nil, err
	}
	if err := t.buildAdded(tj.AddedTokens, t.vocabJSON); err != nil {
		return nil, err
	}
	t.vocabJSON = nil
	if len(configJSON) > 0 {
		if err := t.parseConfig(configJSON); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Tokenizer) buildModel(tj *tokenizerJSON) error {
	m := &tj.Model
	if m.Type != "BPE" && !(m.Type == "" && m.Vocab != nil) {
		return fmt.Errorf("%w: model type %q (only BPE)", ErrUnsupported, m.Type)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" ||
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("%w: BPE continuing_subword_prefix/end_of_word_suffix", ErrUnsupported)
	}
	if m.Dropout != nil && *m.Dropout > 0 {
		return fmt.Errorf("%w: BPE dropout", ErrUnsupported)
	}
	vocab, err := parseVocab(m.Vocab)
	if err != nil {
		return fmt.Errorf("%w: model.vocab: %v", ErrFormat, err)
	}
	t.vocabJSON = vocab
	if len(vocab) == 0 {
		return fmt.Errorf("%w: empty BPE vocabulary", ErrFormat)
	}
	t.ignoreMerges = m.IgnoreMerges
	maxID := int32(-1)
	for tok, id := range vocab {
		if id < 0 {
			return fmt.Errorf("%w: negative id %d for %q", ErrFormat, id, tok)
		}
		maxID = max(maxID, id)
	}
	if maxID >= MaxVocabSize {
		return fmt.Errorf("%w: id %d too large", ErrTooLarge, maxID)
	}
	n := int(maxID) + 1
	t.tokenStr = make([]string, n)
	t.tokenBytes = make([]string, n)
	t.known = make([]bool, n)
	t.vocab = make(map[string]int32, len(vocab))
	for i := range t.byteID {
		t.byteID[i] = -1
	}
	for tok, id := range vocab {
		raw, ok := byteLevelDecode(tok)
		t.tokenStr[id] = tok
		t.known[id] = true
		if !ok {
			// Not in the ByteLevel alphabet: BPE can never produce it; Decode writes it raw
			// as HF's ByteLevel decoder does.
			t.tokenBytes[id] = tok
			if t.oddVocab == nil {
				t.oddVocab = map[string]int32{}
			}
			t.oddVocab[tok] = id
			continue
		}
		t.tokenBytes[id] = raw
		t.vocab[raw] = id
		if len(raw) == 1 {
			t.byteID[raw[0]] = id
		}
	}
	for b, id := range t.byteID {
		if id < 0 {
			return fmt.Errorf("%w: byte 0x%02x has no symbol in the vocabulary (not a byte-level BPE)", ErrUnsupported, b)
		}
	}
	// Merges: ["a b", ...] or [["a","b"], ...].
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return fmt.Errorf("%w: model.merges: %v", ErrFormat, err)
	}
	t.merges = make(map[uint64]uint64, len(pairs))
	produced := make([]uint8, n) // how many distinct pairs merge into each id
	t.uniqueMerges = true
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		c, okC := vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("%w: merge %d (%q %q): token not in vocabulary", ErrFormat, rank, p[0], p[1])
		}
		key := uint64(uint32(a))<<32 | uint64(uint32(b))
		if _, dup := t.merges[key]; !dup {
			if produced[c]++; produced[c] > 1 {
				t.uniqueMerges = false
			}
		}
		// Later duplicates overwrite earlier ones, as HF's map construction does.
		t.merges[key] = uint64(rank)<<32 | uint64(uint32(c))
	}
	return nil
}

func checkNormalizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("%w: normalizer: %v", ErrFormat, err)
	}
	if n.Type == "Sequence" {
		for _, sub := range n.Normalizers {
			if err := checkNormalizer(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: normalizer %q (only none or an empty Sequence)", ErrUnsupported, n.Type)
}

func checkDecoder(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("%w: no decoder (only ByteLevel)", ErrUnsupported)
	}
	var d struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%w: decoder: %v", ErrFormat, err)
	}
	switch d.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		if len(d.Decoders) == 1 {
			return checkDecoder(d.Decoders[0])
		}
	}
	return fmt.Errorf("%w: decoder %q (only ByteLevel)", ErrUnsupported, d.Type)
}

// buildAdded registers the added tokens as HF's deserializer does
// (AddedVocabulary::add_tokens in file order): a token whose content is already an
// added token or a vocabulary token takes that id, any other takes the next free id
// from the size of the base vocabulary on. The "id" field of the file is ignored, as
// HF ignores it (with a warning) when it disagrees.
func (t *Tokenizer) buildAdded(list []addedTokenJSON, vocab map[string]int32) error {
	t.addedByID = make(map[int32]int, len(list))
	byContent := make(map[string]int32, len(list))
	specialContent := map[string]bool{}
	nextID := int32(len(vocab))
	for _, a := range list {
		if a.Content == "" {
			continue // HF ignores empty added tokens
		}
		at := AddedToken{Content: a.Content, Special: a.Special, Normalized: a.Normalized,
			LStrip: a.LStrip, RStrip: a.RStrip, SingleWord: a.SingleWord}
		id, ok := byContent[a.Content]
		if ok {
			if prev := t.added[t.addedByID[id]]; prev == (AddedToken{ID: id, Content: at.Content, Special: at.Special,
				Normalized: at.Normalized, LStrip: at.LStrip, RStrip: at.RStrip, SingleWord: at.SingleWord}) {
				continue
			}
		} else if id, ok = vocab[a.Content]; !ok {
			id = nextID
			nextID++
		}
		if id >= MaxVocabSize {
			return fmt.Errorf("%w: added token %q id %d", ErrTooLarge, a.Content, id)
		}
		byContent[a.Content] = id
		t.addedIDs = byContent
		if a.Special {
			specialContent[a.Content] = true
		}
		if int(id) >= len(t.tokenStr) {
			n := int(id) + 1
			t.tokenStr = append(t.tokenStr, make([]string, n-len(t.tokenStr))...)
			t.tokenBytes = append(t.tokenBytes, make([]string, n-len(t.tokenBytes))...)
			t.known = append(t.known, make([]bool, n-len(t.known))...)
		}
		at.ID = id
		if i, ok := t.addedByID[id]; ok {
			t.added[i] = at
		} else {
			t.addedByID[id] = len(t.added)
			t.added = append(t.added, at)
		}
	}
	sort.Slice(t.added, func(i, j int) bool { return t.added[i].ID < t.added[j].ID })
	var raw, norm []trieEntry
	for i, a := range t.added {
		t.addedByID[a.ID] = i
		t.tokenStr[a.ID] = a.Content
		t.known[a.ID] = true
		// HF's ByteLevel decoder maps the token through the byte alphabet when every char
		// belongs to it, and writes its UTF-8 otherwise.
		if b, ok := byteLevelDecode(a.Content); ok {
			t.tokenBytes[a.ID] = b
		} else {
			t.tokenBytes[a.ID] = a.Content
		}
		e := trieEntry{key: a.Content, idx: int32(i)}
		if a.Normalized {
			norm = append(norm, e)
		} else {
			raw = append(raw, e)
		}
	}
	t.addedRaw = newTrie(raw)
	t.addedNorm = newTrie(norm)
	t.special = make([]bool, len(t.tokenStr))
	for id, s := range t.tokenStr {
		// HF decides "special" by the token string, whichever table the id came from.
		t.special[id] = t.known[id] && specialContent[s]
	}
	return nil
}

type configJSON struct {
	BOS            json.RawMessage `json:"bos_token"`
	EOS            json.RawMessage `json:"eos_token"`
	AddBOS         *bool           `json:"add_bos_token"`
	AddEOS         *bool           `json:"add_eos_token"`
	ModelMaxLength *float64        `json:"model_max_length"`
}

func (t *Tokenizer) parseConfig(data []byte) error {
	var c configJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%w: tokenizer_config.json: %v", ErrFormat, err)
	}
	var err error
	if t.bos, err = t.configToken("bos_token", c.BOS); err != nil {
		return err
	}
	if t.eos, err = t.configToken("eos_token", c.EOS); err != nil {
		return err
	}
	if c.AddBOS != nil {
		t.addBOS = *c.AddBOS
	}
	if c.AddEOS != nil {
		t.addEOS = *c.AddEOS
	}
	if c.ModelMaxLength != nil && *c.ModelMaxLength > 0 && *c.ModelMaxLength < 1<<40 {
		t.maxLen = int(*c.ModelMaxLength)
	}
	return nil
}

// configToken resolves a tokenizer_config.json token field, a string or an
// {"content": ...} object, to its id; -1 when absent or null.
func (t *Tokenizer) configToken(name string, raw json.RawMessage) (int32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return -1, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var obj struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return -1, fmt.Errorf("%w: tokenizer_config.json %s: %v", ErrFormat, name, err)
		}
		s = obj.Content
	}
	id, ok := t.TokenID(s)
	if !ok {
		return -1, fmt.Errorf("%w: tokenizer_config.json %s %q is not a token", ErrFormat, name, s)
	}
	return id, nil
}

// byteLevel maps each byte to the printable rune GPT-2's bytes_to_unicode gives it;
// byteLevelInv is its inverse (rune -> byte+1, 0 when the rune is not in the alphabet).
var (
	byteLevel    [256]rune
	byteLevelInv [324]uint16
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			byteLevel[b] = rune(b)
		} else {
			byteLevel[b] = rune(256 + n)
			n++
		}
	}
	for b, r := range byteLevel {
		byteLevelInv[r] = uint16(b + 1)
	}
}

// byteLevelDecode maps a string in the ByteLevel alphabet back to raw bytes; ok is
// false when some rune is outside the alphabet.
func byteLevelDecode(s string) (string, bool) {
	buf := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(byteLevelInv) || byteLevelInv[r] == 0 {
			return "", false
		}
		buf = append(buf, byte(byteLevelInv[r]-1))
	}
	return string(buf), true
}

// byteLevelEncode maps raw bytes to the ByteLevel alphabet (the vocabulary's spelling).
func byteLevelEncode(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteLevel[s[i]])
	}
	return sb.String()
}
