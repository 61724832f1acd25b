package disagg

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// flashHandoff builds a handoff with the shapes of a DeepSeek-V4-Flash
// sequence of n tokens (the default config: 43 layers, head_dim 512,
// window 128, CSA rate 4 with a 128-wide indexer, HCA rate 128), random
// values, and a vocab-sized logits row.
func flashHandoff(tb testing.TB, n int) (*Handoff, Identity) {
	tb.Helper()
	cfg, err := dsv4.ParseConfig([]byte(`{"model_type":"deepseek_v4"}`))
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(k int) []float32 {
		if k == 0 {
			return nil
		}
		v := make([]float32, k)
		for i := range v {
			v[i] = r.Float32()
		}
		return v
	}
	comp := func(d, m int, overlap bool) *dsv4.CompressorState {
		coff := 1
		if overlap {
			coff = 2
		}
		c := &dsv4.CompressorState{Width: d, Rate: m, Overlap: overlap,
			BufferKV: fill((n % m) * coff * d), BufferGate: fill((n % m) * coff * d), Entries: fill(n / m * d)}
		if overlap && n >= m {
			c.OverlapKV, c.OverlapGate = fill(m*d), fill(m*d)
		}
		return c
	}
	st := &dsv4.SequenceState{Position: n, Layers: make([]dsv4.LayerState, cfg.NumHiddenLayers)}
	for i := range st.Layers {
		l := &st.Layers[i]
		l.Type = cfg.LayerTypes[i]
		l.Window = fill(min(n, cfg.SlidingWindow-1) * cfg.HeadDim)
		switch l.Type {
		case dsv4.LayerCSA:
			l.Compressor = comp(cfg.HeadDim, cfg.CompressRateCSA, true)
			l.Indexer = comp(cfg.IndexHeadDim, cfg.CompressRateCSA, true)
		case dsv4.LayerHCA:
			l.Compressor = comp(cfg.HeadDim, cfg.CompressRateHCA, false)
		}
	}
	if got, want := st.Bytes(), dsv4.StateBytes(cfg, n); got != want {
		tb.Fatalf("state bytes %d, StateBytes %d", got, want)
	}
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(r.IntN(cfg.VocabSize))
	}
	id := Identity{Protocol: ProtocolVersion, Config: dsv4.ConfigFingerprint(cfg), KVLayout: dsv4.KVLayoutFingerprint(cfg), DType: "float32"}
	return &Handoff{Prompt: prompt, State: st, Logits: fill(cfg.VocabSize)}, id
}

var benchSizes = []int{1024, 8192, 32768}

// BenchmarkTransferGRPC: one room's V4-Flash-shaped state prefill → decode
// over gRPC on loopback (encode, send, receive, decode, checksums).
func BenchmarkTransferGRPC(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			h, id := flashHandoff(b, n)
			tr := &GRPCTransport{}
			rooms := NewRooms(id)
			lis, _ := net.Listen("tcp", "127.0.0.1:0")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go tr.Serve(ctx, lis, rooms)
			conn, err := tr.Dial(ctx, lis.Addr().String(), id)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			b.SetBytes(h.Bytes())
			b.ResetTimer()
			for i := range b.N {
				room := uint64(i + 1)
				hh := *h
				hh.Room = room
				rooms.Open(room)
				rooms.Put(room, &hh)
				got, err := conn.Fetch(ctx, room)
				if err != nil {
					b.Fatal(err)
				}
				if got.State.Position != n {
					b.Fatal("bad handoff")
				}
			}
		})
	}
}

// BenchmarkTransferTCPRaw: the baseline, the same number of bytes copied
// over one loopback TCP connection (no framing, no checksums, no decode).
func BenchmarkTransferTCPRaw(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			h, _ := flashHandoff(b, n)
			size := h.Bytes()
			src := make([]byte, size)
			lis, _ := net.Listen("tcp", "127.0.0.1:0")
			defer lis.Close()
			go func() {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				var req [8]byte
				for {
					if _, err := io.ReadFull(c, req[:]); err != nil {
						return
					}
					if _, err := c.Write(src); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", lis.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			dst := make([]byte, size)
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				var req [8]byte
				binary.LittleEndian.PutUint64(req[:], uint64(i))
				c.Write(req[:])
				if _, err := io.ReadFull(c, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWireCodec: encode + decode in memory (the CPU cost of the format).
func BenchmarkWireCodec(b *testing.B) {
	for _, n := range benchSizes[:2] {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			h, id := flashHandoff(b, n)
			enc := NewEncoder(id, 0)
			b.SetBytes(h.Bytes())
			for range b.N {
				d := NewDecoder(id, Limits{})
				if err := enc.Encode(h, d.Next); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Handoff(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRouterOverhead: added latency of the router (regular mode) on a
// trivial upstream, against calling the upstream directly. Reports p50/p99.
func BenchmarkRouterOverhead(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"391"},"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16}}`)
	}))
	defer up.Close()
	rt, err := NewRouter(RouterConfig{Workers: []string{up.URL}, HealthInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	front := httptest.NewServer(rt.Handler())
	defer front.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"What is 17*23? Number only."}],"temperature":0}`
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, tc := range []struct{ name, url string }{{"direct", up.URL}, {"router", front.URL}} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				t0 := time.Now()
				resp, err := cl.Post(tc.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
			}
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(p(0.5), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
}

// BenchmarkTTFT: time to the first SSE chunk of "What is 17*23?" on the
// tiny model, through the router in PD mode (prefill + gRPC transfer +
// decode) against the router in front of a co-located server.
func BenchmarkTTFT(b *testing.B) {
	pd := startPDb(b)
	colo := httptest.NewServer(pd.d.Handler()) // no bootstrap fields: served co-located
	defer colo.Close()
	rpd, err := NewRouter(RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{pd.dURL}, HealthInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer rpd.Close()
	rco, err := NewRouter(RouterConfig{Workers: []string{colo.URL}, HealthInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer rco.Close()
	fpd, fco := httptest.NewServer(rpd.Handler()), httptest.NewServer(rco.Handler())
	defer fpd.Close()
	defer fco.Close()
	body := strings.Replace(q391, `"max_tokens":40`, `"max_tokens":40,"stream":true`, 1)
	for _, tc := range []struct{ name, url string }{{"colocated", fco.URL}, {"pd", fpd.URL}} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				t0 := time.Now()
				resp, err := http.Post(tc.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				// The first chunk with generated text (not the role-only one).
				sc := bufio.NewScanner(resp.Body)
				got := false
				for sc.Scan() {
					if strings.Contains(sc.Text(), `"content":"`) {
						got = true
						break
					}
				}
				if !got {
					b.Fatalf("status %d: no content chunk", resp.StatusCode)
				}
				lat = append(lat, time.Since(t0))
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkTransferInProcess: the same handoff through the InProcess
// transport (no serialization: the state changes owner).
func BenchmarkTransferInProcess(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			h, id := flashHandoff(b, n)
			tr := &InProcess{}
			rooms := NewRooms(id)
			lis, _ := net.Listen("tcp", "127.0.0.1:0")
			defer lis.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go tr.Serve(ctx, lis, rooms)
			conn, err := tr.Dial(ctx, lis.Addr().String(), id)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(h.Bytes())
			b.ResetTimer()
			for i := range b.N {
				room := uint64(i + 1)
				rooms.Open(room)
				rooms.Put(room, h)
				if _, err := conn.Fetch(ctx, room); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
