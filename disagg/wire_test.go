package disagg

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

func loadModel(t testing.TB, dir string) *dsv4.Model {
	t.Helper()
	m, err := dsv4.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

const ckptA = "../dsv4/testdata/ckpt_hf_bf16"
const ckptOther = "../dsv4/testdata/ckpt_hf_saved"

func testPrompt(n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i*7+3) % int32(vocab)
	}
	return p
}

// TestWireRoundTrip: decode after a serialized transfer (every chunk size)
// gives the same logits as decode in place.
func TestWireRoundTrip(t *testing.T) {
	ctx := context.Background()
	a, b := loadModel(t, ckptA), loadModel(t, ckptA)
	ida, idb := ModelIdentity(a, "a"), ModelIdentity(b, "b")
	if err := ida.Compatible(idb); err != nil {
		t.Fatal(err)
	}
	prompt := testPrompt(23, a.Config().VocabSize)
	h, err := PrefillHandoff(ctx, a, 42, prompt, []byte(`{"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	ref := a.NewSequence()
	if _, err := a.Prefill(ctx, ref, prompt); err != nil {
		t.Fatal(err)
	}
	var want [][]float32
	for step := range 4 {
		lg, err := a.Decode(ctx, []*dsv4.Sequence{ref}, []int32{int32(step + 1)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, lg[0])
	}
	for _, chunk := range []int{7, 64, 1000, 0} {
		var buf bytes.Buffer
		if err := WriteStream(&buf, h, ida, chunk); err != nil {
			t.Fatal(err)
		}
		got, err := ReadStream(bytes.NewReader(buf.Bytes()), idb, Limits{})
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if got.Room != 42 || !slices.Equal(got.Prompt, prompt) || !slices.Equal(got.Logits, h.Logits) ||
			got.FirstToken != h.FirstToken || string(got.Sampling) != `{"temperature":0}` || got.Bytes() != h.Bytes() {
			t.Fatalf("chunk %d: handoff fields differ", chunk)
		}
		seq, err := b.Restore(got.State)
		if err != nil {
			t.Fatal(err)
		}
		for step := range 4 {
			lg, err := b.Decode(ctx, []*dsv4.Sequence{seq}, []int32{int32(step + 1)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(lg[0], want[step]) {
				t.Fatalf("chunk %d step %d: logits differ after transfer", chunk, step)
			}
		}
		seq.Release()
	}
}

// testFrames prefills 9 tokens on the ckptA model and encodes the handoff
// in frames of chunk data bytes; it returns the model's identity too.
func testFrames(t *testing.T, chunk int) (Identity, *Handoff, [][]byte) {
	t.Helper()
	a := loadModel(t, ckptA)
	id := ModelIdentity(a, "a")
	h, err := PrefillHandoff(context.Background(), a, 1, testPrompt(9, a.Config().VocabSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	if err := NewEncoder(id, chunk).Encode(h, func(f []byte) error { frames = append(frames, bytes.Clone(f)); return nil }); err != nil {
		t.Fatal(err)
	}
	return id, h, frames
}

// TestWireErrors: truncated, corrupted, reordered, foreign and hostile
// streams give typed errors.
func TestWireErrors(t *testing.T) {
	id, _, frames := testFrames(t, 256)
	if len(frames) < 4 {
		t.Fatalf("%d frames", len(frames))
	}
	stream := bytes.Join(frames, nil)
	read := func(b []byte, local Identity) error {
		_, err := ReadStream(bytes.NewReader(b), local, Limits{})
		return err
	}
	// Truncation at every frame boundary and inside frames.
	for cut := 0; cut < len(stream); cut += max(1, len(stream)/97) {
		if err := read(stream[:cut], id); !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d/%d: %v, want ErrTruncated", cut, len(stream), err)
		}
	}
	// Dropping a whole data frame: offsets no longer match.
	drop := bytes.Join(append(slices.Clone(frames[:2]), frames[3:]...), nil)
	if err := read(drop, id); !errors.Is(err, ErrMalformed) {
		t.Fatalf("dropped frame: %v", err)
	}
	// A flipped bit anywhere is caught by a CRC (or, in a length field, as
	// malformed or truncated).
	for _, pos := range []int{0, 3, 7, len(frames[0]) + 20, len(stream) / 2, len(stream) - 6} {
		bad := bytes.Clone(stream)
		bad[pos] ^= 0x10
		err := read(bad, id)
		if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("flip at %d: %v", pos, err)
		}
		if err == nil {
			t.Fatalf("flip at %d accepted", pos)
		}
	}
	bad := bytes.Clone(stream)
	bad[len(frames[0])+30] ^= 1 // inside the first data frame's payload
	if err := read(bad, id); !errors.Is(err, ErrChecksum) {
		t.Fatalf("payload flip: %v, want ErrChecksum", err)
	}
	// Another model's identity: refused at the header.
	other := ModelIdentity(loadModel(t, ckptOther), "o")
	if err := read(stream, other); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("foreign config: %v", err)
	}
	if err := id.Compatible(other); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("Compatible: %v", err)
	}
	// Version and limits.
	hdr := frameBytes(frameHeader, []byte(`{"magic":"dsv4-kv","version":99}`))
	if err := read(hdr, id); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 99: %v", err)
	}
	if _, err := ReadStream(bytes.NewReader(stream), id, Limits{MaxStateBytes: 64}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("limit: %v", err)
	}
	if err := read(append(slices.Clone(stream), frames[1]...), id); err == nil {
		// trailing bytes after the trailer are not read by ReadStream: fine
	}
	d := NewDecoder(id, Limits{})
	for _, f := range frames {
		if err := d.Next(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Next(frames[1]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("frame after trailer: %v", err)
	}
}

// FuzzReadStream: no input panics the decoder.
func FuzzReadStream(f *testing.F) {
	m, err := dsv4.Load(context.Background(), ckptA)
	if err != nil {
		f.Fatal(err)
	}
	id := ModelIdentity(m, "a")
	h, err := PrefillHandoff(context.Background(), m, 1, testPrompt(9, m.Config().VocabSize), nil)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	_ = WriteStream(&buf, h, id, 128)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ReadStream(bytes.NewReader(b), id, Limits{MaxStateBytes: 1 << 20})
		if err == nil {
			if _, err := m.Restore(got.State); err != nil && !errors.Is(err, dsv4.ErrSequence) {
				t.Fatal(err)
			}
		}
	})
}
