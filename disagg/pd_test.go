package disagg

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

const q391 = `{"model":"dsv4-tiny","messages":[{"role":"user","content":"What is 17*23? Number only."}],"temperature":0,"max_tokens":40}`

func withFields(body string, kv map[string]any) string {
	var m map[string]any
	json.Unmarshal([]byte(body), &m)
	for k, v := range kv {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestPDServersInProcess drives prefill and decode servers directly (no
// router) in both coordination modes over both transports.
func TestPDServersInProcess(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tr   Transport
	}{{"grpc", &GRPCTransport{}}, {"inprocess", &InProcess{}}} {
		t.Run(tc.name, func(t *testing.T) {
			pd := startPD(t, tc.tr, 0)
			var colo dsv4.ChatRequest
			json.Unmarshal([]byte(q391), &colo)
			want, err := pd.colo.Chat(ctx, &colo)
			if err != nil {
				t.Fatal(err)
			}
			if c := want.Choices[0].Message.Content; c == nil || *c != "391" {
				t.Fatalf("co-located answer %v", c)
			}
			// Concurrent mode.
			room := uint64(12345)
			body := withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": pd.bootPort, "bootstrap_room": room})
			dres := make(chan string, 1)
			go func() { _, s := post(t, ctx, pd.dURL, body); dres <- s }()
			presp, pbody := post(t, ctx, pd.pURL, body)
			if presp.StatusCode != 200 {
				t.Fatalf("prefill: %d %s", presp.StatusCode, pbody)
			}
			got := parseChat(t, <-dres)
			if s := got.summary(); s != "C:391|F:stop" {
				t.Fatalf("PD concurrent: %s", s)
			}
			// Sequential mode: prefill returns the descriptor.
			presp, pbody = post(t, ctx, pd.pURL, q391)
			var desc struct {
				KV json.RawMessage `json:"kv_transfer_params"`
			}
			json.Unmarshal([]byte(pbody), &desc)
			if presp.StatusCode != 200 || desc.KV == nil {
				t.Fatalf("sequential prefill: %d %s", presp.StatusCode, pbody)
			}
			_, dbody := post(t, ctx, pd.dURL, withFields(q391, map[string]any{"kv_transfer_params": desc.KV, "stream": true}))
			if s := sseSummary(t, dbody); s != "C:391|F:stop" {
				t.Fatalf("PD sequential stream: %s", s)
			}
			if n := pd.d.back.restored.Load(); n != 2 {
				t.Fatalf("%d prompts restored from transfers, want 2", n)
			}
			waitFor(t, func() bool { return pd.p.Rooms().Live() == 0 && pd.d.eng.Stats().LiveSequences == 0 })
			// n = 2 with a seed: both choices come from the one transfer.
			before := pd.d.back.restored.Load()
			body = withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": pd.bootPort,
				"bootstrap_room": 777, "n": 2, "temperature": 0.7, "seed": 5})
			go func() { _, s := post(t, ctx, pd.dURL, body); dres <- s }()
			if presp, pbody := post(t, ctx, pd.pURL, body); presp.StatusCode != 200 {
				t.Fatalf("prefill n=2: %s", pbody)
			}
			got = parseChat(t, <-dres)
			if len(got.Choices) != 2 || pd.d.back.restored.Load()-before != 2 {
				t.Fatalf("n=2: %d choices, %d restored", len(got.Choices), pd.d.back.restored.Load()-before)
			}
			var coloN dsv4.ChatRequest
			json.Unmarshal([]byte(body), &coloN)
			wantN, err := pd.colo.Chat(ctx, &coloN)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if g, w := *got.Choices[i].Message.Content, *wantN.Choices[i].Message.Content; g != w {
					t.Errorf("seeded choice %d: PD %q, co-located %q", i, g, w)
				}
			}
			// Mismatched sampling parameters between the legs are refused.
			bodyP := withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": pd.bootPort, "bootstrap_room": 778})
			bodyD := withFields(bodyP, map[string]any{"top_k": 5})
			go func() { _, s := post(t, ctx, pd.dURL, bodyD); dres <- s }()
			post(t, ctx, pd.pURL, bodyP)
			if s := <-dres; !strings.Contains(s, "disagree") || !strings.Contains(s, `"code":"transfer_mismatch"`) {
				t.Fatalf("sampling mismatch accepted: %s", s)
			}
			waitFor(t, func() bool { return pd.p.Rooms().Live() == 0 && pd.d.eng.Stats().LiveSequences == 0 })
			if n := pd.d.back.nPend.Load(); n != 0 {
				t.Fatalf("%d pending handoffs leaked", n)
			}
			_ = fmt.Sprint
		})
	}
}

// TestPDTimeouts: a room the prefill side never sees times out on the decode
// side; a parked state nobody fetches is dropped when its lease ends.
func TestPDTimeouts(t *testing.T) {
	ctx := context.Background()
	pd := startPD(t, &GRPCTransport{}, 300*time.Millisecond)
	body := withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": pd.bootPort, "bootstrap_room": 999})
	resp, out := post(t, ctx, pd.dURL, body)
	if resp.StatusCode != 504 || !strings.Contains(out, "transfer_timeout") {
		t.Fatalf("decode waiting for a room nobody prefills: %d %s", resp.StatusCode, out)
	}
	// Sequential prefill whose descriptor is never used.
	if resp, out := post(t, ctx, pd.pURL, q391); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if pd.p.Rooms().Live() != 1 {
		t.Fatalf("%d live rooms after a sequential prefill", pd.p.Rooms().Live())
	}
	waitFor(t, func() bool { return pd.p.Rooms().Live() == 0 })
	if n := pd.d.live; n == nil {
		t.Fatal("no gauge")
	}
}
