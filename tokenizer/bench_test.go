package tokenizer

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Benchmarks on the golden corpus (tokenizer/testdata/corpus.jsonl.gz), DeepSeek-V4
// vocabulary; tools/bench_tokenizer.py measures HF tokenizers on the same texts.
// Results are recorded in BENCHMARKS.md, section "Tokenizer".

func corpusTexts(b *testing.B) (texts []string, bytes int64, tokens int64) {
	_, v4 := testTokenizers(b)
	for _, r := range corpusRec {
		texts = append(texts, r.Text)
		bytes += int64(len(r.Text))
		tokens += int64(len(r.V4))
	}
	_ = v4
	return texts, bytes, tokens
}

// reportTokens reports tokens/s of wall time and, because the development machine
// is shared, MB/s and tokens/s of process CPU time (cpu0 = processCPU() at the start
// of the timed loop; it includes the garbage collector's work).
func reportTokens(b *testing.B, bytes, tokens int64, cpu0 time.Duration) {
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "cpuMB/s")
		b.ReportMetric(float64(tokens)*float64(b.N)/cpu.Seconds(), "cpu-tokens/s")
	}
}

// BenchmarkEncodeCorpus encodes each corpus string in turn on one goroutine, with a
// warm BPE cache (as HF's, which caches words too).
func BenchmarkEncodeCorpus(b *testing.B) {
	texts, n, tokens := corpusTexts(b)
	_, v4 := testTokenizers(b)
	var dst []int32
	for _, s := range texts { // warm the cache
		dst = v4.AppendEncode(dst[:0], s, EncodeOptions{})
	}
	b.SetBytes(n)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, s := range texts {
			dst = v4.AppendEncode(dst[:0], s, EncodeOptions{})
		}
	}
	reportTokens(b, n, tokens, cpu0)
}

// BenchmarkEncodeCorpusCold is BenchmarkEncodeCorpus with an empty BPE cache at the
// start of every pass.
func BenchmarkEncodeCorpusCold(b *testing.B) {
	texts, n, tokens := corpusTexts(b)
	_, v4 := testTokenizers(b)
	tok := *v4
	var dst []int32
	b.SetBytes(n)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tok.cache = newWordCache(1 << 16)
		b.StartTimer()
		for _, s := range texts {
			dst = tok.AppendEncode(dst[:0], s, EncodeOptions{})
		}
	}
	reportTokens(b, n, tokens, cpu0)
}

// BenchmarkEncodeDocument encodes the corpus joined by newlines as one text.
func BenchmarkEncodeDocument(b *testing.B) {
	texts, _, _ := corpusTexts(b)
	_, v4 := testTokenizers(b)
	doc := strings.Join(texts, "\n")
	dst := v4.Encode(doc, EncodeOptions{})
	tokens := int64(len(dst))
	n := int64(len(doc))
	b.SetBytes(n)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		dst = v4.AppendEncode(dst[:0], doc, EncodeOptions{})
	}
	reportTokens(b, n, tokens, cpu0)
}

// BenchmarkEncodeBatch encodes the corpus with EncodeBatch on GOMAXPROCS goroutines.
func BenchmarkEncodeBatch(b *testing.B) {
	texts, n, tokens := corpusTexts(b)
	_, v4 := testTokenizers(b)
	b.SetBytes(n)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := v4.EncodeBatch(context.Background(), texts, EncodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	reportTokens(b, n, tokens, cpu0)
}

// BenchmarkDecode decodes the corpus ids string by string.
func BenchmarkDecode(b *testing.B) {
	_, n, tokens := corpusTexts(b)
	_, v4 := testTokenizers(b)
	b.SetBytes(n)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, r := range corpusRec {
			if _, err := v4.Decode(r.V4, DecodeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportTokens(b, n, tokens, cpu0)
}

// BenchmarkStreamDecode feeds the corpus ids one at a time to a StreamDecoder.
func BenchmarkStreamDecode(b *testing.B) {
	_, n, tokens := corpusTexts(b)
	_, v4 := testTokenizers(b)
	d := v4.NewStreamDecoder(DecodeOptions{})
	b.SetBytes(n)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, r := range corpusRec {
			for _, id := range r.V4 {
				if _, err := d.Add(id); err != nil {
					b.Fatal(err)
				}
			}
			d.Flush()
		}
	}
	reportTokens(b, n, tokens, cpu0)
}

// BenchmarkEncodeLongRuns encodes pathological inputs: 64 KiB of one letter, of
// spaces, and of one CJK character (long pre-tokens, heap BPE).
func BenchmarkEncodeLongRuns(b *testing.B) {
	_, v4 := testTokenizers(b)
	for _, c := range []struct{ name, unit string }{{"letters", "a"}, {"spaces", " "}, {"cjk", "中"}, {"digits", "7"}} {
		s := strings.Repeat(c.unit, 65536/len(c.unit))
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for i := 0; i < b.N; i++ {
				v4.Encode(s, EncodeOptions{})
			}
		})
	}
}

// BenchmarkLoad measures Load of the V4 tokenizer (gzipped tokenizer.json).
func BenchmarkLoad(b *testing.B) {
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := Load("testdata/deepseek-v4"); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
}
