package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// fakeSSE streams max_tokens one-word chunks and a usage chunk.
func fakeSSE(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MaxTokens int `json:"max_tokens"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	for i := range req.MaxTokens {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"w%d \"}]}\n\n", i)
		f.Flush()
		time.Sleep(time.Millisecond)
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d}}\n\n", req.MaxTokens)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func TestSendAndSummarize(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(fakeSSE))
	defer ts.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	reqs, err := makeRequests(rng, "", 4, 16, 8, 0.5, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	var results []result
	for _, r := range reqs {
		if ids := r.prompt.([]int32); len(ids) != r.inputLen || r.outputLen < 4 || r.outputLen > 12 {
			t.Fatalf("request lengths %d %d", len(ids), r.outputLen)
		}
		res := send(context.Background(), http.DefaultClient, ts.URL, "", "m", false, r, true)
		if !res.ok || res.outTokens != r.outputLen || len(res.itls) != r.outputLen-1 || res.ttft <= 0 || res.e2e < res.ttft {
			t.Fatalf("result %+v", res)
		}
		results = append(results, res)
	}
	if err := report(results, time.Second, "50,99", t.TempDir()+"/r.json"); err != nil {
		t.Fatal(err)
	}
	s := summarize([]float64{4, 1, 3, 2}, []float64{50, 100})
	if s.Median != 2.5 || s.Percentiles["p100"] != 4 || s.Mean != 2.5 {
		t.Fatalf("summary %+v", s)
	}
	// gamma with k=1 has mean theta
	var sum float64
	for range 20000 {
		sum += gamma(rng, 1, 0.5)
	}
	if m := sum / 20000; math.Abs(m-0.5) > 0.02 {
		t.Fatalf("gamma mean %v", m)
	}
}
