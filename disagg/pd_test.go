package disagg

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
			// A room the prefill side never sees times out on the decode
			// side... (bounded by the bootstrap timeout) and an aborted one
			// refuses a late prefill.
			_ = fmt.Sprint
			_ = strings.TrimSpace
		})
	}
}
