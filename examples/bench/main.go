// Command bench is a load generator for OpenAI-compatible servers, in the
// manner of `vllm bench serve`: it sends streaming requests at a fixed
// concurrency and/or a request rate (Poisson or gamma arrivals), with random
// or given input and output lengths, and prints TTFT, TPOT, ITL and
// end-to-end latency percentiles and token throughput.
//
//	go run ./examples/server &
//	go run ./examples/bench --num-prompts 200 --max-concurrency 16 \
//	    --random-input-len 128 --random-output-len 64
//
// Definitions (as vLLM's): TTFT is send → first token chunk; ITL the gaps
// between successive token chunks; TPOT per request (E2E − TTFT) /
// (output tokens − 1); E2EL send → last byte. Output tokens are the
// server's usage.completion_tokens (stream_options.include_usage).
//
// Random prompts: on /v1/completions, random token ids of exactly the input
// length; on /v1/chat/completions, that many random words. Requests set
// ignore_eos so outputs have the requested length. --dataset-path reads a
// JSONL file of {"prompt": "...", "output_len": N} objects instead.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type request struct {
	prompt    any // string or []int32
	inputLen  int
	outputLen int
}

type result struct {
	ok        bool
	err       string
	ttft      time.Duration
	itls      []time.Duration
	e2e       time.Duration
	outTokens int
	inTokens  int
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		baseURL     = flag.String("base-url", "http://127.0.0.1:30000", "server URL")
		endpoint    = flag.String("endpoint", "/v1/completions", "/v1/completions or /v1/chat/completions")
		model       = flag.String("model", "", "model name sent in requests")
		apiKey      = flag.String("api-key", "", "Bearer API key")
		numPrompts  = flag.Int("num-prompts", 100, "requests to send")
		concurrency = flag.Int("max-concurrency", 0, "most requests in flight (0: unlimited)")
		rate        = flag.Float64("request-rate", math.Inf(1), "requests per second (inf: all at once)")
		burstiness  = flag.Float64("burstiness", 1, "gamma shape of inter-arrival times (1: Poisson)")
		inLen       = flag.Int("random-input-len", 64, "input tokens per request")
		outLen      = flag.Int("random-output-len", 64, "output tokens per request")
		rangeRatio  = flag.Float64("random-range-ratio", 0, "lengths drawn uniformly in [len·(1−r), len·(1+r)]")
		vocab       = flag.Int("vocab", 128000, "token ids drawn in [100, vocab) for random completion prompts")
		dataset     = flag.String("dataset-path", "", "JSONL file of {\"prompt\":..., \"output_len\":...} (instead of random)")
		ignoreEOS   = flag.Bool("ignore-eos", true, "send ignore_eos so outputs reach their length")
		seed        = flag.Uint64("seed", 0, "random seed")
		percentiles = flag.String("metric-percentiles", "50,90,99", "percentiles to report")
		resultJSON  = flag.String("result-json", "", "also write the results as JSON to this file")
		timeout     = flag.Duration("timeout", 10*time.Minute, "per-request timeout")
	)
	flag.Parse()
	rng := rand.New(rand.NewPCG(*seed, 7))
	chat := strings.Contains(*endpoint, "chat")
	reqs, err := makeRequests(rng, *dataset, *numPrompts, *inLen, *outLen, *rangeRatio, *vocab, chat)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	url := strings.TrimRight(*baseURL, "/") + *endpoint

	var sem chan struct{}
	if *concurrency > 0 {
		sem = make(chan struct{}, *concurrency)
	}
	results := make([]result, len(reqs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range reqs {
		if i > 0 && !math.IsInf(*rate, 1) && *rate > 0 {
			// gamma(shape k, scale 1/(rate·k)) inter-arrival; k = 1 is Poisson
			time.Sleep(time.Duration(gamma(rng, *burstiness, 1/(*rate**burstiness)) * float64(time.Second)))
		}
		if sem != nil {
			sem <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sem != nil {
				defer func() { <-sem }()
			}
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			results[i] = send(ctx, client, url, *apiKey, *model, chat, r, *ignoreEOS)
		}()
	}
	wg.Wait()
	dur := time.Since(start)
	return report(results, dur, *percentiles, *resultJSON)
}

func makeRequests(rng *rand.Rand, path string, n, inLen, outLen int, ratio float64, vocab int, chat bool) ([]request, error) {
	draw := func(l int) int {
		if ratio <= 0 {
			return max(l, 1)
		}
		lo, hi := int(float64(l)*(1-ratio)), int(float64(l)*(1+ratio))
		return max(lo+rng.IntN(hi-lo+1), 1)
	}
	var out []request
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() && len(out) < n {
			var d struct {
				Prompt    string `json:"prompt"`
				OutputLen int    `json:"output_len"`
			}
			if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			if d.OutputLen <= 0 {
				d.OutputLen = outLen
			}
			out = append(out, request{prompt: d.Prompt, outputLen: d.OutputLen})
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: no prompts", path)
		}
		return out, sc.Err()
	}
	words := []string{"alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "green", "seven", "table", "light", "music"}
	for range n {
		il, ol := draw(inLen), draw(outLen)
		if chat {
			w := make([]string, il)
			for j := range w {
				w[j] = words[rng.IntN(len(words))]
			}
			out = append(out, request{prompt: strings.Join(w, " "), inputLen: il, outputLen: ol})
			continue
		}
		ids := make([]int32, il)
		for j := range ids {
			ids[j] = int32(100 + rng.IntN(max(vocab-100, 1)))
		}
		out = append(out, request{prompt: ids, inputLen: il, outputLen: ol})
	}
	return out, nil
}

// gamma draws from Gamma(k, theta) (Marsaglia–Tsang; k < 1 boosted).
func gamma(rng *rand.Rand, k, theta float64) float64 {
	if k <= 0 {
		return 0
	}
	if k < 1 {
		return gamma(rng, k+1, theta) * math.Pow(rng.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v * theta
		}
	}
}

func send(ctx context.Context, client *http.Client, url, key, model string, chat bool, r request, ignoreEOS bool) result {
	body := map[string]any{
		"model": model, "stream": true, "max_tokens": r.outputLen, "temperature": 0,
		"ignore_eos": ignoreEOS, "stream_options": map[string]any{"include_usage": true},
	}
	if chat {
		body["messages"] = []map[string]any{{"role": "user", "content": r.prompt}}
	} else {
		body["prompt"] = r.prompt
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return result{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e bytes.Buffer
		_, _ = e.ReadFrom(resp.Body)
		return result{err: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(e.String()))}
	}
	res := result{inTokens: r.inputLen}
	last := t0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []any  `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return result{err: "bad chunk: " + err.Error()}
		}
		if ch.Error != nil {
			return result{err: ch.Error.Message}
		}
		if ch.Usage != nil {
			res.outTokens = ch.Usage.CompletionTokens
			res.inTokens = ch.Usage.PromptTokens
		}
		has := false
		for _, c := range ch.Choices {
			if c.Text != "" || c.Delta.Content != "" || c.Delta.ReasoningContent != "" || len(c.Delta.ToolCalls) > 0 {
				has = true
			}
		}
		if has {
			now := time.Now()
			if res.ttft == 0 {
				res.ttft = now.Sub(t0)
			} else {
				res.itls = append(res.itls, now.Sub(last))
			}
			last = now
		}
	}
	if err := sc.Err(); err != nil {
		return result{err: err.Error()}
	}
	res.e2e = time.Since(t0)
	res.ok = true
	return res
}

type stats struct {
	Mean, Median, Std float64
	Percentiles       map[string]float64
}

func summarize(xs []float64, ps []float64) stats {
	s := stats{Percentiles: map[string]float64{}}
	if len(xs) == 0 {
		return s
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	s.Mean = sum / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - s.Mean) * (x - s.Mean)
	}
	s.Std = math.Sqrt(v / float64(len(xs)))
	pct := func(p float64) float64 { // linear interpolation, as numpy
		pos := p / 100 * float64(len(xs)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(xs)-1)
		return xs[lo] + (xs[hi]-xs[lo])*(pos-float64(lo))
	}
	s.Median = pct(50)
	for _, p := range ps {
		s.Percentiles["p"+strconv.FormatFloat(p, 'f', -1, 64)] = pct(p)
	}
	return s
}

func report(results []result, dur time.Duration, pctFlag string, jsonPath string) error {
	var ps []float64
	for _, f := range strings.Split(pctFlag, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("bad percentile %q", f)
		}
		ps = append(ps, p)
	}
	var ttft, tpot, itl, e2e []float64
	var in, out, ok int
	errs := map[string]int{}
	for _, r := range results {
		if !r.ok {
			errs[r.err]++
			continue
		}
		ok++
		in += r.inTokens
		out += r.outTokens
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		ttft = append(ttft, ms(r.ttft))
		e2e = append(e2e, ms(r.e2e))
		if r.outTokens > 1 {
			tpot = append(tpot, ms(r.e2e-r.ttft)/float64(r.outTokens-1))
		}
		for _, x := range r.itls {
			itl = append(itl, ms(x))
		}
	}
	sec := dur.Seconds()
	fmt.Printf("%s\n", center(" Serving Benchmark Result ", '='))
	row := func(name string, v any) { fmt.Printf("%-40s %-10v\n", name, v) }
	row("Successful requests:", ok)
	row("Failed requests:", len(results)-ok)
	row("Benchmark duration (s):", fmt.Sprintf("%.2f", sec))
	row("Total input tokens:", in)
	row("Total generated tokens:", out)
	row("Request throughput (req/s):", fmt.Sprintf("%.2f", float64(ok)/sec))
	row("Output token throughput (tok/s):", fmt.Sprintf("%.2f", float64(out)/sec))
	row("Total token throughput (tok/s):", fmt.Sprintf("%.2f", float64(in+out)/sec))
	all := map[string]stats{}
	for _, m := range []struct {
		key, title string
		xs         []float64
	}{
		{"ttft", "Time to First Token", ttft},
		{"tpot", "Time per Output Token (excl. 1st token)", tpot},
		{"itl", "Inter-token Latency", itl},
		{"e2el", "End-to-end Latency", e2e},
	} {
		s := summarize(m.xs, ps)
		all[m.key] = s
		fmt.Printf("%s\n", center(m.title, '-'))
		name := strings.ToUpper(m.key)
		row("Mean "+name+" (ms):", fmt.Sprintf("%.2f", s.Mean))
		row("Median "+name+" (ms):", fmt.Sprintf("%.2f", s.Median))
		for _, p := range ps {
			k := "p" + strconv.FormatFloat(p, 'f', -1, 64)
			row("P"+strconv.FormatFloat(p, 'f', -1, 64)+" "+name+" (ms):", fmt.Sprintf("%.2f", s.Percentiles[k]))
		}
	}
	fmt.Println(strings.Repeat("=", 50))
	for e, n := range errs {
		fmt.Fprintf(os.Stderr, "%d× %s\n", n, e)
	}
	if jsonPath != "" {
		b, _ := json.MarshalIndent(map[string]any{
			"completed": ok, "failed": len(results) - ok, "duration_s": sec,
			"total_input_tokens": in, "total_output_tokens": out,
			"request_throughput": float64(ok) / sec, "output_throughput": float64(out) / sec,
			"total_token_throughput": float64(in+out) / sec, "metrics_ms": all, "errors": errs,
		}, "", "  ")
		if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if ok == 0 {
		return fmt.Errorf("no request succeeded")
	}
	return nil
}

func center(s string, fill byte) string {
	const w = 50
	if len(s) >= w {
		return s
	}
	l := (w - len(s)) / 2
	return strings.Repeat(string(fill), l) + s + strings.Repeat(string(fill), w-len(s)-l)
}
