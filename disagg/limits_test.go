package disagg

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestLimitsFor: the bound a receiver derives from its model is the largest
// state the model holds at any length up to the served context, plus the
// logits; for V4-Flash it is far below the old 64 GiB default at every
// context the model serves.
func TestLimitsFor(t *testing.T) {
	flash, err := dsv4.ParseConfig([]byte(`{"model_type":"deepseek_v4"}`))
	if err != nil {
		t.Fatal(err)
	}
	tiny := tinyModel(t).Config()
	for _, tc := range []struct {
		name string
		cfg  *dsv4.Config
		ctx  int
	}{{"flash-64K", flash, 65536}, {"flash-1000", flash, 1000}, {"tiny-4096", tiny, 4096}, {"tiny-300", tiny, 300}, {"tiny-1", tiny, 1}} {
		lim := LimitsFor(tc.cfg, tc.ctx)
		var want int64
		for n := 0; n <= tc.ctx; n++ { // brute force over every length
			want = max(want, dsv4.StateBytes(tc.cfg, n))
		}
		want += 4 * int64(tc.cfg.VocabSize)
		if lim.MaxStateBytes != want || lim.MaxPrompt != tc.ctx {
			t.Errorf("%s: %+v, want MaxStateBytes %d MaxPrompt %d", tc.name, lim, want, tc.ctx)
		}
	}
	// The model's own context when unset or too large: V4-Flash at 1M tokens.
	full := LimitsFor(flash, 0)
	if full != LimitsFor(flash, 1<<40) || full.MaxPrompt != flash.MaxPositionEmbeddings {
		t.Errorf("unset context: %+v vs %+v", full, LimitsFor(flash, 1<<40))
	}
	if gib := float64(full.MaxStateBytes) / (1 << 30); gib < 12 || gib > 14 {
		t.Errorf("V4-Flash at 1M tokens: %.2f GiB, want about 12.9", gib)
	}
	if mib := LimitsFor(flash, 65536).MaxStateBytes >> 20; mib < 800 || mib > 900 {
		t.Errorf("V4-Flash at 64K tokens: %d MiB, want about 834", mib)
	}
	if got := LimitsFor(nil, 0); got != (Limits{MaxStateBytes: DefaultMaxStateBytes, MaxPrompt: DefaultMaxPrompt}) {
		t.Errorf("nil config: %+v", got)
	}
	if DefaultMaxStateBytes > 1<<30 {
		t.Errorf("DefaultMaxStateBytes %d", DefaultMaxStateBytes)
	}
	// A decode server derives its limits from its model and served context.
	d, err := NewDecodeServer(DecodeConfig{Model: tinyModel(t), ContextLength: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got, want := d.Limits(), LimitsFor(tiny, 300); got != want {
		t.Errorf("DecodeServer.Limits() = %+v, want %+v", got, want)
	}
}

// TestWireRefusesOverLimit: a stream whose header announces more than the
// receiver's Limits, or whose data runs past what its header announced, is
// refused with ErrTooLarge (which is also ErrMalformed) before the data is
// buffered; a stream of exactly the limit passes.
func TestWireRefusesOverLimit(t *testing.T) {
	id, h, frames := testFrames(t, 1024)
	stream := bytes.Join(frames, nil)
	exact := Limits{MaxStateBytes: h.Bytes(), MaxPrompt: len(h.Prompt)}
	if _, err := ReadStream(bytes.NewReader(stream), id, exact); err != nil {
		t.Fatalf("stream of exactly the limit: %v", err)
	}
	tooLarge := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	// Announced: refused at the header frame, before any data frame.
	for name, lim := range map[string]Limits{
		"state one value over":  {MaxStateBytes: h.Bytes() - 4},
		"prompt one token over": {MaxPrompt: len(h.Prompt) - 1},
	} {
		tooLarge(name, NewDecoder(id, lim).Next(frames[0]))
	}
	// A 200-byte header announcing 64 GiB, under the default limits: refused
	// at once, nothing allocated for it.
	js, err := json.Marshal(wireHeader{Magic: wireMagic, Version: ProtocolVersion, Config: id.Config, KVLayout: id.KVLayout,
		Prompt: []int32{}, Lens: []int64{16 << 30}, TotalBytes: 64 << 30})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ReadStream(bytes.NewReader(append(frameBytes(frameHeader, js), frameBytes(frameData, make([]byte, 8+4096))...)), id, Limits{})
	runtime.ReadMemStats(&after)
	tooLarge("64 GiB header, default limits", err)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("64 GiB header: allocated %d KiB", got>>10)
	}
	// Actual: a data frame past the announced total is refused before it is
	// copied, however the limit compares.
	past := frameBytes(frameData, append(binary.LittleEndian.AppendUint64(nil, uint64(h.Bytes())), 1, 2, 3, 4))
	d := NewDecoder(id, Limits{})
	for _, f := range frames[:len(frames)-1] {
		if err := d.Next(f); err != nil {
			t.Fatal(err)
		}
	}
	tooLarge("data past the header's total", d.Next(past))
	big := frameBytes(frameData, append(binary.LittleEndian.AppendUint64(nil, 0), make([]byte, h.Bytes()+4)...))
	d = NewDecoder(id, Limits{})
	if err := d.Next(frames[0]); err != nil {
		t.Fatal(err)
	}
	tooLarge("one frame larger than the whole state", d.Next(big))
}

// oversizedSource is a hostile prefill server: it serves, for any room, a
// handoff of the right model whose logits are padded past what the decode
// server's model can legitimately send.
type oversizedSource struct {
	id Identity
	h  *Handoff
}

func (s oversizedSource) Identity() Identity { return s.id }
func (s oversizedSource) Take(ctx context.Context, room uint64) (*Handoff, func(error), error) {
	h := *s.h
	h.Room = room
	return &h, func(error) {}, nil
}
func (s oversizedSource) Abort(uint64, string) {}

// TestDecodeRefusesOversizedState: a decode server fetching from a prefill
// server that streams more than its model's largest state at the served
// context (LimitsFor) refuses the stream at its header: the fetch fails with
// ErrTooLarge, and the client gets 502 transfer_failed. Before, the bound was
// 64 GiB of real data whatever the model.
func TestDecodeRefusesOversizedState(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t)
	d, err := NewDecodeServer(DecodeConfig{Model: m, Name: "dsv4-tiny", ContextLength: 256, FetchTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	prompt, err := d.Engine().ChatPrompt(&dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: "What is 17*23?"}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := PrefillHandoff(ctx, m, 1, prompt, nil)
	if err != nil {
		t.Fatal(err)
	}
	over := d.Limits().MaxStateBytes - h.Bytes() + 4 // one value over the bound
	h.Logits = append(h.Logits, make([]float32, over/4)...)
	lis := listen(t)
	addr := serve(t, &GRPCTransport{}, lis, oversizedSource{id: d.Identity(), h: h})

	c, err := d.conn(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(ctx, 5); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "header announces") {
		t.Fatalf("Fetch: %v, want ErrTooLarge at the header", err)
	}
	// Through the HTTP API: 502 transfer_failed, and nothing left running.
	ds := httptest.NewServer(d.Handler())
	defer ds.Close()
	body := withBootstrap(`{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":4}`, lis.Addr().(*net.TCPAddr).Port, 6)
	resp, out := post(t, ctx, ds.URL, body)
	if resp.StatusCode != 502 || errCode(t, out) != "transfer_failed" || !strings.Contains(out, "limits") {
		t.Fatalf("%d %s, want 502 transfer_failed", resp.StatusCode, out)
	}
	if n := d.Engine().Stats().LiveSequences; n != 0 {
		t.Errorf("live sequences: %d", n)
	}
}
