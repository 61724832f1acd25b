package tokenizer

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var (
	loadOnce  sync.Once
	tokV3     *Tokenizer
	tokV4     *Tokenizer
	loadErr   error
	corpusRec []corpusRecord
)

type corpusRecord struct {
	Text string  `json:"text"`
	V3   []int32 `json:"v3"`
	V4   []int32 `json:"v4"`
	V3ES []int32 `json:"v3_es"`
	V4ES []int32 `json:"v4_es"`
}

// testTokenizers loads the committed DeepSeek V3 and V4 tokenizers and the golden
// corpus once per test binary.
func testTokenizers(tb testing.TB) (v3, v4 *Tokenizer) {
	tb.Helper()
	loadOnce.Do(func() {
		if tokV3, loadErr = Load(filepath.Join("testdata", "deepseek-v3")); loadErr != nil {
			return
		}
		if tokV4, loadErr = Load(filepath.Join("testdata", "deepseek-v4")); loadErr != nil {
			return
		}
		loadErr = readJSONLines(filepath.Join("testdata", "corpus.jsonl.gz"), func(dec *json.Decoder) error {
			var r corpusRecord
			if err := dec.Decode(&r); err != nil {
				return err
			}
			corpusRec = append(corpusRec, r)
			return nil
		})
	})
	if loadErr != nil {
		tb.Fatal(loadErr)
	}
	return tokV3, tokV4
}

func readJSONLines(path string, fn func(*json.Decoder) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(zr))
	for dec.More() {
		if err := fn(dec); err != nil {
			return err
		}
	}
	return nil
}

func TestLoadFacts(t *testing.T) {
	v3, v4 := testTokenizers(t)
	tests := []struct {
		name    string
		tok     *Tokenizer
		size    int
		added   int
		addBOS  bool
		special map[string]int32
	}{
		{"v3", v3, 128815, 818, true, map[string]int32{
			"<｜begin▁of▁sentence｜>": 0, "<｜end▁of▁sentence｜>": 1, "<｜User｜>": 128803, "<|EOT|>": 128805,
			"<｜tool▁sep｜>": 128814, "<｜place▁holder▁no▁799｜>": 128799}},
		{"v4", v4, 129280, 1283, false, map[string]int32{
			"<think>": 128821, "</think>": 128822, "｜DSML｜": 128825, "<｜latest_reminder｜>": 128828,
			"<dsml:": 128840, "<|place_holder_mm_span_0021|>": 128847, "<｜image｜>": 129279}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tok.VocabSize(); got != tc.size {
				t.Errorf("VocabSize = %d, want %d", got, tc.size)
			}
			if got := len(tc.tok.AddedTokens()); got != tc.added {
				t.Errorf("added tokens = %d, want %d", got, tc.added)
			}
			if tc.tok.AddBOSDefault() != tc.addBOS {
				t.Errorf("AddBOSDefault = %v", tc.tok.AddBOSDefault())
			}
			if id, ok := tc.tok.BOS(); !ok || id != 0 {
				t.Errorf("BOS = %d %v", id, ok)
			}
			if id, ok := tc.tok.EOS(); !ok || id != 1 {
				t.Errorf("EOS = %d %v", id, ok)
			}
			for s, want := range tc.special {
				if id, ok := tc.tok.TokenID(s); !ok || id != want {
					t.Errorf("TokenID(%q) = %d, %v; want %d", s, id, ok, want)
				}
				if got := tc.tok.Encode(s, EncodeOptions{}); !cmp.Equal(got, []int32{want}) {
					t.Errorf("Encode(%q) = %v, want [%d]", s, got, want)
				}
			}
			if id, ok := tc.tok.TokenID("Ġthe"); !ok || id != 270 {
				t.Errorf("TokenID(Ġthe) = %d %v", id, ok)
			}
			if s, ok := tc.tok.Token(270); !ok || s != "Ġthe" {
				t.Errorf("Token(270) = %q", s)
			}
			if !tc.tok.IsSpecial(0) || tc.tok.IsSpecial(128803) {
				t.Error("IsSpecial: BOS must be special, <｜User｜> must not")
			}
		})
	}
}

// Test vectors TV1..TV4 of shared/docs/test-data.md section 1.4.
func TestVectors(t *testing.T) {
	v3, v4 := testTokenizers(t)
	tv1 := "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
	tv1IDs := []int32{19923, 3, 223, 5464, 5008, 1175, 19, 940, 223, 19, 438, 223, 20, 6113, 257,
		76589, 131, 100, 76032, 1628, 76589, 131, 108, 76589, 131, 98}
	tv2 := "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>"
	tv2IDs := []int32{128803, 30594, 128804, 128821, 36101, 128822, 7624, 1}
	tests := []struct {
		name string
		tok  *Tokenizer
		text string
		opts EncodeOptions
		want []int32
	}{
		{"TV1/v3", v3, tv1, EncodeOptions{}, tv1IDs},
		{"TV1/v4", v4, tv1, EncodeOptions{}, tv1IDs},
		{"TV1/v3+bos", v3, tv1, EncodeOptions{AddBOS: true}, append([]int32{0}, tv1IDs...)},
		{"TV2/v4", v4, tv2, EncodeOptions{}, tv2IDs},
		{"TV2/v4+eos", v4, "答案", EncodeOptions{AddEOS: true}, []int32{7624, 1}},
		{"TV4/v3", v3, "...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", EncodeOptions{}, nil},
		{"DSML/v3", v3, "｜DSML｜", EncodeOptions{}, []int32{28217, 10525, 7398, 28217}},
		{"nospecial/v4", v4, "<｜end▁of▁sentence｜>", EncodeOptions{Special: MatchNonSpecial}, nil},
		{"none/v4", v4, "<think>", EncodeOptions{Special: MatchNone}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tok.Encode(tc.text, tc.opts)
			switch tc.name {
			case "TV4/v3":
				if n := len(got); n < 2 || got[n-2] != 128809 || got[n-1] != 128807 {
					t.Fatalf("Encode = %v, want it to end with 128809, 128807", got)
				}
			case "nospecial/v4":
				if len(got) < 2 {
					t.Fatalf("Encode = %v: special token matched", got)
				}
			case "none/v4":
				if len(got) < 2 {
					t.Fatalf("Encode = %v: added token matched", got)
				}
			default:
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("Encode mismatch (-want +got):\n%s", diff)
				}
			}
			text, err := tc.tok.Decode(got, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.text
			if tc.opts.AddBOS {
				want = "<｜begin▁of▁sentence｜>" + want
			}
			if tc.opts.AddEOS {
				want += "<｜end▁of▁sentence｜>"
			}
			if text != want {
				t.Fatalf("Decode = %q, want %q", text, want)
			}
		})
	}
	if s, _ := v4.Decode(tv2IDs, DecodeOptions{SkipSpecialTokens: true}); s != "<｜User｜>你好<｜Assistant｜><think>推理</think>答案" {
		t.Errorf("Decode skip special = %q", s)
	}
	if s, _ := v3.Decode(v3.Encode("hello world", EncodeOptions{}), DecodeOptions{}); s != "hello world" {
		t.Errorf("TV3: %q", s)
	}
}

// TestCorpusEqualsHF compares every id sequence of the golden corpus, generated by HF
// tokenizers (tools/gen_tokenizer_goldens.py), for both vocabularies and both
// added-token modes, and checks that decoding restores the text.
func TestCorpusEqualsHF(t *testing.T) {
	v3, v4 := testTokenizers(t)
	if len(corpusRec) < 5000 {
		t.Fatalf("corpus has %d strings, want >= 5000", len(corpusRec))
	}
	fails := 0
	check := func(name string, tok *Tokenizer, text string, opts EncodeOptions, want []int32) {
		got := tok.Encode(text, opts)
		if !cmp.Equal(got, want) {
			fails++
			if fails <= 10 {
				t.Errorf("%s: Encode(%q)\n got %v\nwant %v", name, text, got, want)
			}
		}
		dec, err := tok.Decode(got, DecodeOptions{})
		if err != nil || dec != text {
			fails++
			if fails <= 10 {
				t.Errorf("%s: Decode(Encode(%q)) = %q, %v", name, text, dec, err)
			}
		}
	}
	for _, r := range corpusRec {
		check("v3", v3, r.Text, EncodeOptions{}, r.V3)
		check("v4", v4, r.Text, EncodeOptions{}, r.V4)
		es3, es4 := r.V3ES, r.V4ES
		if es3 == nil {
			es3 = r.V3
		}
		if es4 == nil {
			es4 = r.V4
		}
		check("v3/encode_special_tokens", v3, r.Text, EncodeOptions{Special: MatchNonSpecial}, es3)
		check("v4/encode_special_tokens", v4, r.Text, EncodeOptions{Special: MatchNonSpecial}, es4)
	}
	if fails > 0 {
		t.Fatalf("%d mismatches over %d strings", fails, len(corpusRec))
	}
}

type decodeRecord struct {
	Tok      string  `json:"tok"`
	IDs      []int32 `json:"ids"`
	Text     string  `json:"text"`
	TextSkip string  `json:"text_skip"`
}

// TestDecodeEqualsHF compares Decode and StreamDecoder with HF decode on random id
// sequences (mostly lone bytes, so partial UTF-8 sequences abound).
func TestDecodeEqualsHF(t *testing.T) {
	v3, v4 := testTokenizers(t)
	var recs []decodeRecord
	err := readJSONLines(filepath.Join("testdata", "decode.jsonl.gz"), func(dec *json.Decoder) error {
		var r decodeRecord
		err := dec.Decode(&r)
		recs = append(recs, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		tok := v3
		if r.Tok == "v4" {
			tok = v4
		}
		for _, skip := range []bool{false, true} {
			want := r.Text
			if skip {
				want = r.TextSkip
			}
			opts := DecodeOptions{SkipSpecialTokens: skip}
			got, err := tok.Decode(r.IDs, opts)
			if err != nil || got != want {
				t.Fatalf("case %d (%s, skip=%v): Decode(%v) = %q, %v; want %q", i, r.Tok, skip, r.IDs, got, err, want)
			}
			if s := streamDecode(t, tok, r.IDs, opts); s != want {
				t.Fatalf("case %d (%s, skip=%v): stream = %q, want %q", i, r.Tok, skip, s, want)
			}
		}
	}
}

// streamDecode decodes ids one at a time, checking that no chunk is broken UTF-8.
func streamDecode(tb testing.TB, tok *Tokenizer, ids []int32, opts DecodeOptions) string {
	tb.Helper()
	d := tok.NewStreamDecoder(opts)
	var sb strings.Builder
	for _, id := range ids {
		s, err := d.Add(id)
		if err != nil {
			tb.Fatal(err)
		}
		if !utf8.ValidString(s) {
			tb.Fatalf("stream chunk %q is not valid UTF-8", s)
		}
		sb.WriteString(s)
	}
	s := d.Flush()
	if !utf8.ValidString(s) {
		tb.Fatalf("flush %q is not valid UTF-8", s)
	}
	sb.WriteString(s)
	return sb.String()
}

func TestStreamRandomIDs(t *testing.T) {
	_, v4 := testTokenizers(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 2000; n++ {
		ids := make([]int32, rng.IntN(30))
		for i := range ids {
			if rng.IntN(3) == 0 {
				ids[i] = int32(rng.IntN(v4.VocabSize()))
			} else {
				ids[i] = int32(3 + rng.IntN(256)) // single bytes
			}
		}
		for _, skip := range []bool{false, true} {
			opts := DecodeOptions{SkipSpecialTokens: skip}
			want, err := v4.Decode(ids, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := streamDecode(t, v4, ids, opts); got != want {
				t.Fatalf("ids %v: stream %q != decode %q", ids, got, want)
			}
		}
	}
}

func TestUnknownID(t *testing.T) {
	v3, _ := testTokenizers(t)
	for _, id := range []int32{-1, 128815, 1 << 30} {
		_, err := v3.Decode([]int32{5, id}, DecodeOptions{})
		var ue *UnknownIDError
		if !errors.As(err, &ue) || ue.ID != id {
			t.Errorf("Decode(%d): err = %v", id, err)
		}
		d := v3.NewStreamDecoder(DecodeOptions{})
		if _, err := d.Add(id); !errors.As(err, &ue) {
			t.Errorf("Add(%d): err = %v", id, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	byteVocab := byteVocabJSON()
	if _, err := Parse([]byte(`{"model":{"type":"BPE","vocab":`+byteVocab+`,"merges":[]},"decoder":{"type":"ByteLevel"}}`), nil); err != nil {
		t.Fatalf("minimal byte-level tokenizer: %v", err)
	}
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	tests := []struct {
		name string
		json string
		want error
	}{
		{"bad json", `{`, ErrFormat},
		{"wordpiece", `{"model":{"type":"WordPiece","vocab":{"a":0}}}`, ErrUnsupported},
		{"no bytes", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"ByteLevel"}}`, ErrUnsupported},
		{"metaspace", `{"pre_tokenizer":{"type":"Metaspace"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, ErrUnsupported},
		{"huge id", `{"model":{"type":"BPE","vocab":{"a":99999999},"merges":[]}}`, ErrTooLarge},
		{"bad merge", `{"model":{"type":"BPE","vocab":` + byteVocab + `,"merges":["a"]},"decoder":{"type":"ByteLevel"}}`, ErrFormat},
		{"merge not in vocab", `{"model":{"type":"BPE","vocab":` + byteVocab + `,"merges":["a b"]},"decoder":{"type":"ByteLevel"}}`, ErrFormat},
		{"bad vocab", `{"model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}}`, ErrFormat},
		{"too many pre-tokenizer steps", `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"Split","pattern":{"String":" "},"behavior":"Isolated","invert":false},`, MaxPreTokenizerSteps+1), ",") +
			`]},"model":{"type":"BPE","vocab":` + byteVocab + `,"merges":[]},"decoder":{"type":"ByteLevel"}}`, ErrUnsupported},
	}
	for _, tc := range tests {
		if _, err := Parse([]byte(tc.json), nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestEncodeBatch(t *testing.T) {
	_, v4 := testTokenizers(t)
	texts := make([]string, 0, 500)
	for _, r := range corpusRec[:500] {
		texts = append(texts, r.Text)
	}
	got, err := v4.EncodeBatch(context.Background(), texts, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range corpusRec[:500] {
		if !cmp.Equal(got[i], r.V4) {
			t.Fatalf("batch[%d] = %v, want %v", i, got[i], r.V4)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := v4.EncodeBatch(ctx, texts, EncodeOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

// TestBPEHeapEqualsScan checks that the small-word BPE path equals HF's heap
// algorithm on the corpus words and on random byte strings.
func TestBPEHeapEqualsScan(t *testing.T) {
	v3, _ := testTokenizers(t)
	var st bpeState
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{}
	for _, r := range corpusRec {
		words = append(words, strings.Fields(r.Text)...)
	}
	for i := 0; i < 3000; i++ {
		b := make([]byte, 2+rng.IntN(40))
		for j := range b {
			b[j] = "ab e\n \t中文é"[rng.IntN(14)]
		}
		words = append(words, string(b))
	}
	for _, w := range words {
		if len(w) < 2 || len(w) > 48 {
			continue
		}
		a := v3.bpe(&st, w, nil)
		b := v3.bpeHeap(&st, w, nil)
		if !cmp.Equal(a, b) {
			t.Fatalf("%q: scan %v, heap %v", w, a, b)
		}
	}
}

func TestInvalidUTF8RoundTrip(t *testing.T) {
	_, v4 := testTokenizers(t)
	for _, s := range []string{"\xff", "a\xc3", "\xe4\xb8", "x\x80y", "中\xe4\xb8文", "\xf0\x9f\x98 ok"} {
		ids := v4.Encode(s, EncodeOptions{})
		var b []byte
		for _, id := range ids {
			tb, _ := v4.TokenBytes(id)
			b = append(b, tb...)
		}
		if string(b) != s {
			t.Errorf("token bytes of Encode(%q) = %q", s, b)
		}
	}
}

func ExampleTokenizer_Encode() {
	tok, err := Load("testdata/deepseek-v4")
	if err != nil {
		panic(err)
	}
	ids := tok.Encode("<｜User｜>你好<｜Assistant｜><think>", EncodeOptions{})
	fmt.Println(ids)
	text, _ := tok.Decode(ids, DecodeOptions{})
	fmt.Println(text)
	// Output:
	// [128803 30594 128804 128821]
	// <｜User｜>你好<｜Assistant｜><think>
}

func ExampleStreamDecoder() {
	tok, err := Load("testdata/deepseek-v4")
	if err != nil {
		panic(err)
	}
	d := tok.NewStreamDecoder(DecodeOptions{})
	// "é" split into its two bytes (ids 3+0xC3-'!'... looked up by TokenID).
	b1, _ := tok.TokenID("Ã")
	b2, _ := tok.TokenID("©")
	for _, id := range []int32{b1, b2} {
		s, _ := d.Add(id)
		fmt.Printf("%q ", s)
	}
	fmt.Printf("%q\n", d.Flush())
	// Output: "" "é" ""
}

// TestAddedTokenFlagsEqualHF checks lstrip, rstrip, single_word, normalized and HF's
// id assignment on added tokens appended to the V3 tokenizer (testdata/flags.jsonl.gz,
// generated with HF tokenizers).
func TestAddedTokenFlagsEqualHF(t *testing.T) {
	type flagRecord struct {
		Added []json.RawMessage `json:"added"`
		Text  string            `json:"text"`
		IDs   []int32           `json:"ids"`
		IDsES []int32           `json:"ids_es"`
	}
	var recs []flagRecord
	if err := readJSONLines(filepath.Join("testdata", "flags.jsonl.gz"), func(dec *json.Decoder) error {
		var r flagRecord
		err := dec.Decode(&r)
		recs = append(recs, r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := readFile(filepath.Join("testdata", "deepseek-v3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var added []json.RawMessage
	if err := json.Unmarshal(doc["added_tokens"], &added); err != nil {
		t.Fatal(err)
	}
	doc["added_tokens"], _ = json.Marshal(append(added, recs[0].Added...))
	raw, _ = json.Marshal(doc)
	tok, err := Parse(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := tok.TokenID("hello"); id != 33310 {
		t.Errorf("added token already in the vocabulary: id %d, want its vocabulary id 33310", id)
	}
	for _, r := range recs[1:] {
		if got := tok.Encode(r.Text, EncodeOptions{}); !cmp.Equal(got, r.IDs) {
			t.Errorf("Encode(%q) = %v, want %v", r.Text, got, r.IDs)
		}
		if got := tok.Encode(r.Text, EncodeOptions{Special: MatchNonSpecial}); !cmp.Equal(got, r.IDsES) {
			t.Errorf("Encode(%q, MatchNonSpecial) = %v, want %v", r.Text, got, r.IDsES)
		}
	}
}

// TestPreTokenizersEqualHF swaps other pre-tokenizers into the V3 tokenizer (the
// GPT-2 ByteLevel regex, add_prefix_space, every Split behaviour, invert, String
// patterns) and compares with HF (testdata/pretok.jsonl.gz). These run on regexp2.
func TestPreTokenizersEqualHF(t *testing.T) {
	base, _ := testTokenizers(t)
	type line struct {
		Variant      string          `json:"variant"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
		Text         string          `json:"text"`
		IDs          []int32         `json:"ids"`
	}
	var tok *Tokenizer
	var variant string
	n := 0
	err := readJSONLines(filepath.Join("testdata", "pretok.jsonl.gz"), func(dec *json.Decoder) error {
		var l line
		if err := dec.Decode(&l); err != nil {
			return err
		}
		if l.Variant != "" {
			// The model is parsed once; each variant swaps in its pre-tokenizer.
			variant = l.Variant
			steps, err := parsePreTokenizer(l.PreTokenizer)
			if err != nil {
				return fmt.Errorf("%s: %w", variant, err)
			}
			v := *base
			v.steps, v.cache = steps, newWordCache(1<<10)
			tok = &v
			return nil
		}
		n++
		if got := tok.Encode(l.Text, EncodeOptions{}); !cmp.Equal(got, l.IDs) && !(len(got) == 0 && len(l.IDs) == 0) {
			t.Errorf("%s: Encode(%q)\n got %v\nwant %v", variant, l.Text, got, l.IDs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 500 {
		t.Fatalf("only %d cases", n)
	}
}

// TestExtraCorpusEqualsHF compares a larger, uncommitted HF corpus when
// TOKENIZER_EXTRA_CORPUS names one (tools/gen_tokenizer_goldens.py --extra N FILE).
func TestExtraCorpusEqualsHF(t *testing.T) {
	path := os.Getenv("TOKENIZER_EXTRA_CORPUS")
	if path == "" {
		t.Skip("TOKENIZER_EXTRA_CORPUS not set")
	}
	v3, v4 := testTokenizers(t)
	n, fails := 0, 0
	err := readJSONLines(path, func(dec *json.Decoder) error {
		var r corpusRecord
		if err := dec.Decode(&r); err != nil {
			return err
		}
		n++
		for _, c := range []struct {
			tok  *Tokenizer
			want []int32
		}{{v3, r.V3}, {v4, r.V4}} {
			if got := c.tok.Encode(r.Text, EncodeOptions{}); !cmp.Equal(got, c.want) {
				if fails++; fails <= 10 {
					t.Errorf("Encode(%q)\n got %v\nwant %v", r.Text, got, c.want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d strings, %d mismatches", n, fails)
}
