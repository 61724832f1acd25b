package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/dsv4go/dsv4go/dsv4"
)

// BenchmarkServerOverhead: the cost per request of the HTTP layer (JSON
// decode, SSE encoding, net/http over loopback, metrics) against calling
// Engine.Chat directly, on the same engine and request. The backend is the
// scripted stand-in model (--mock), whose compute is negligible, so the
// difference between the sub-benchmarks is the server's overhead.
// DSV4_BENCH_MODEL=DIR runs the same on a real checkpoint directory.
func BenchmarkServerOverhead(b *testing.B) {
	var eng *dsv4.Engine
	if dir := os.Getenv("DSV4_BENCH_MODEL"); dir != "" {
		m, err := dsv4.Load(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		if eng, err = dsv4.NewEngine(m, dsv4.EngineOptions{}); err != nil {
			b.Fatal(err)
		}
	} else {
		bk := &scriptBackend{tok: v4Tokenizer(b)}
		var err error
		if eng, err = dsv4.NewEngineWithBackend(bk, dsv4.EngineOptions{Tokenizer: bk.tok}); err != nil {
			b.Fatal(err)
		}
	}
	defer eng.Close(context.Background())
	srv := NewServer(eng, ServerConfig{ModelName: "m"})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ts := hs.URL
	const prompt = "What is 17*23? Number only."
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}],"temperature":0,"max_tokens":16}`)
	streamBody := []byte(`{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}],"temperature":0,"max_tokens":16,"stream":true}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(b *testing.B, body []byte) {
		resp, err := client.Post(ts+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	withCPU(b, "direct-Engine.Chat", func(b *testing.B) {
		for range b.N {
			req := &dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: prompt}},
				RequestSampling: dsv4.RequestSampling{Temperature: new(float64), MaxTokens: ptrInt(16)}}
			if _, err := eng.Chat(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	withCPU(b, "http-non-stream", func(b *testing.B) {
		for range b.N {
			post(b, body)
		}
	})
	withCPU(b, "http-stream", func(b *testing.B) {
		for range b.N {
			post(b, streamBody)
		}
	})
	withCPU(b, "openai-go-non-stream", func(b *testing.B) {
		c := openai.NewClient(option.WithBaseURL(ts+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
		for range b.N {
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
				Temperature: openai.Float(0), MaxTokens: openai.Int(16),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	withCPU(b, "http-stream-parallel16", func(b *testing.B) {
		b.SetParallelism(8) // 2 cores × 8 = 16 goroutines
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				post(b, streamBody)
			}
		})
	})
}

func ptrInt(v int) *int { return &v }

// cpuTime is the process's user+system CPU time (all goroutines: the
// handler, the engine loop, the client).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// withCPU runs f as a sub-benchmark and reports CPU time per op besides
// wall time: on a shared machine it is the steadier figure.
func withCPU(b *testing.B, name string, f func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		c0 := cpuTime()
		f(b)
		b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
	})
}
