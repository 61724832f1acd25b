package parse

import (
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// benchText is a long V4 thinking-mode completion rendered by DeepSeek's
// reference encoder (tools/bench_parse.py): about 64 KB of mixed
// English/Chinese reasoning, an answer and three tool calls, one of which
// carries a long code string.
func benchText(b *testing.B) string {
	f, err := os.Open("testdata/bench_v4.txt.gz")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

var benchOpts = Options{Reasoning: "deepseek-v4", Tools: "deepseek-v4", Thinking: true, NewID: seqIDs}

// BenchmarkParse: whole-text parse throughput (MB/s of completion text).
func BenchmarkParse(b *testing.B) {
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m, _ := Parse(text, benchOpts)
		if len(m.ToolCalls) != 3 {
			b.Fatalf("%d calls", len(m.ToolCalls))
		}
	}
}

// tokenChunks cuts text into detokenized-token-sized pieces (4 bytes, the
// average UTF-8 length of a DeepSeek BPE token on mixed text; cuts may
// fall inside runes and markers, as real deltas do).
func tokenChunks(text string) []string { return fixedChunks(text, 4) }

// BenchmarkStreamPerToken: streaming, one Push per token; reports ns/token
// and MB/s.
func BenchmarkStreamPerToken(b *testing.B) {
	benchStream(b, benchText(b), benchOpts)
}

// BenchmarkStreamPerTokenV31 is BenchmarkStreamPerToken on the V3.1 format
// (same reasoning and content, calls as <｜tool▁call▁begin｜> blocks).
func BenchmarkStreamPerTokenV31(b *testing.B) {
	text := benchText(b)
	i := strings.Index(text, "\n\n<｜DSML｜tool_calls>")
	text = text[:i] + SB + CB + "get_weather" + SEP + `{"location": "北京", "days": 3}` + CE + SE
	benchStream(b, text, Options{Reasoning: "deepseek-v3", Tools: "deepseekv31", Thinking: true, NewID: seqIDs})
}

func benchStream(b *testing.B, text string, opts Options) {
	chunks := tokenChunks(text)
	b.SetBytes(int64(len(text)))
	start := time.Now()
	n := 0
	for b.Loop() {
		s, _ := NewStream(opts)
		for _, c := range chunks {
			s.Push(c)
		}
		s.Close()
		n++
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n*len(chunks)), "ns/token")
}

// BenchmarkScanFloor is the floor the parse is compared with: one
// strings.Index pass per V4 marker over the same text.
func BenchmarkScanFloor(b *testing.B) {
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		for _, m := range []string{thinkClose, "<｜DSML｜tool_calls>", dsmlInvoke, dsmlParam, dsmlParamEnd, eosToken} {
			_ = strings.Count(text, m)
		}
	}
}

// BenchmarkParseManyEvents: 3.5 MB holding 20,000 tool-call blocks and
// text and a stray </think> between them, to show whole-text parsing stays linear in the
// number of markers (each marker is searched once, text is gathered in
// builders).
func BenchmarkParseManyEvents(b *testing.B) {
	text := strings.Repeat("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>x </think>", 20000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m, _ := Parse(text, benchOpts)
		if len(m.ToolCalls) != 20000 {
			b.Fatalf("%d calls", len(m.ToolCalls))
		}
	}
}

// BenchmarkNewStream: per-request set-up cost (marker tables, tool schemas).
func BenchmarkNewStream(b *testing.B) {
	opts := benchOpts
	opts.ToolsDecl = synthTools
	for b.Loop() {
		if _, err := NewStream(opts); err != nil {
			b.Fatal(err)
		}
	}
}
