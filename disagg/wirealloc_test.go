package disagg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestWireAllocatesAsDataArrives: a header that announces a large state makes the decoder
// allocate in step with the data that actually arrives. Before, the header alone made it
// allocate every announced component: a 200-byte header announcing 64 GiB (then the default
// MaxStateBytes; TestWireRefusesOverLimit checks the default now refuses it) killed the process with a fatal "out of memory" that no recover catches.
func TestWireAllocatesAsDataArrives(t *testing.T) {
	a := loadModel(t, ckptA)
	id := ModelIdentity(a, "a")
	const values = 16 << 30 // 64 GiB of float32
	js, err := json.Marshal(wireHeader{Magic: wireMagic, Version: ProtocolVersion, Config: id.Config, KVLayout: id.KVLayout,
		Prompt: []int32{}, Lens: []int64{values}, TotalBytes: 4 * values})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8+4096)
	for _, tc := range []struct {
		name   string
		stream []byte
	}{
		{"header only", frameBytes(frameHeader, js)},
		{"header and one data frame", append(frameBytes(frameHeader, js), frameBytes(frameData, data)...)},
		{"header and a partial value", append(frameBytes(frameHeader, js), frameBytes(frameData, binary.LittleEndian.AppendUint64(nil, 0))...)},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadStream(bytes.NewReader(tc.stream), id, Limits{MaxStateBytes: 64 << 30}) // the old default
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: %v, want ErrTruncated", tc.name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
			t.Errorf("%s: allocated %d MiB for a %d-byte stream", tc.name, got>>20, len(tc.stream))
		}
	}
}

// TestWireLargeComponentRoundTrip: components larger than the first allocation grow to their
// exact length and capacity, with frames that split values between them.
func TestWireLargeComponentRoundTrip(t *testing.T) {
	id := Identity{Protocol: ProtocolVersion, Config: "c", KVLayout: "k"}
	logits := make([]float32, 3*minGrow+5)
	for i := range logits {
		logits[i] = float32(i)
	}
	h := &Handoff{Room: 1, Prompt: []int32{}, State: &dsv4.SequenceState{}, Logits: logits}
	for _, chunk := range []int{1 << 20, 999_999} {
		var buf bytes.Buffer
		if err := WriteStream(&buf, h, id, chunk); err != nil {
			t.Fatal(err)
		}
		got, err := ReadStream(&buf, id, Limits{})
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if len(got.Logits) != len(logits) || cap(got.Logits) != len(logits) || !slices.Equal(got.Logits, logits) {
			t.Fatalf("chunk %d: %d logits (cap %d), want %d equal", chunk, len(got.Logits), cap(got.Logits), len(logits))
		}
	}
}
