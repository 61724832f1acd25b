package disagg

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"unsafe"

	"github.com/dsv4go/dsv4go/dsv4"
)

// ProtocolVersion is the version of the wire format and of the bootstrap
// protocol. A receiver refuses frames and peers of another version.
const ProtocolVersion = 1

// Errors of the wire format. Every decoding error wraps exactly one of them.
var (
	// ErrVersion: the stream is not a dsv4 KV stream or has another version.
	ErrVersion = errors.New("disagg: unsupported wire format or protocol version")
	// ErrChecksum: a frame's or the whole stream's CRC-32C does not match.
	ErrChecksum = errors.New("disagg: checksum mismatch")
	// ErrTruncated: the stream ended before its trailer.
	ErrTruncated = errors.New("disagg: truncated stream")
	// ErrMalformed: a frame is well-checksummed but inconsistent (bad lengths,
	// offsets or shapes, limits exceeded, frames out of order).
	ErrMalformed = errors.New("disagg: malformed stream")
	// ErrTooLarge: the stream announces, or sends, more than the receiver's
	// Limits allow (state bytes, prompt tokens), or sends more data than its
	// own header announced. It wraps ErrMalformed, so
	// errors.Is(err, ErrMalformed) holds too. The decoder refuses the header
	// (or the data frame) before buffering any of it.
	ErrTooLarge = fmt.Errorf("%w: over the receiver's limits", ErrMalformed)
	// ErrIncompatible: the peer's model, config, KV layout or protocol differ
	// from ours (see Identity.Compatible).
	ErrIncompatible = errors.New("disagg: incompatible peer")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame kinds. A stream is one header frame, data frames, one trailer frame.
const (
	frameHeader  byte = 'H'
	frameData    byte = 'D'
	frameTrailer byte = 'T'
)

// frame overhead: kind (1) + payload length (4) + CRC-32C (4).
const frameOverhead = 9

// DefaultChunkBytes is the data payload of one frame when not configured.
const DefaultChunkBytes = 1 << 20

// MaxFrameBytes bounds one frame (header included) on decode.
const MaxFrameBytes = 64 << 20

// Handoff is one request's transferable state after prefill: everything a
// decode engine needs to continue it as if it had prefilled it itself.
// Ownership moves with it: after Rooms.Put the prefill side must not touch
// it, and a decode server adopts its buffers (dsv4.Model.Adopt).
type Handoff struct {
	// Room is the rendezvous id of the request (SGLang's bootstrap_room).
	Room uint64
	// Prompt is the prefilled token ids, [Position].
	Prompt []int32
	// State is the sequence's KV state (typed per-layer components).
	State *dsv4.SequenceState
	// Logits are the last prompt position's logits, [vocab] float32: the
	// decode side samples the first output token from them with the
	// request's own sampling parameters and seed, which reproduces a
	// co-located engine exactly (logprobs included).
	Logits []float32
	// FirstToken is the prefill side's greedy first token (argmax of Logits),
	// carried so that a greedy decode side can verify it.
	FirstToken int32
	// Sampling is the request's sampling parameters as the prefill side saw
	// them (JSON of dsv4.SamplingParams); the decode side checks that it
	// sees the same ones.
	Sampling json.RawMessage
}

// Bytes returns the float32 payload bytes of h (state plus logits); 0 for a
// nil h.
func (h *Handoff) Bytes() int64 {
	if h == nil {
		return 0
	}
	n := 4 * int64(len(h.Logits))
	if h.State != nil {
		n += h.State.Bytes()
	}
	return n
}

type wireComp struct {
	Width   int  `json:"width"`
	Rate    int  `json:"rate"`
	Overlap bool `json:"overlap,omitempty"`
}

type wireLayer struct {
	Type       dsv4.LayerType `json:"type"`
	Compressor *wireComp      `json:"compressor,omitempty"`
	Indexer    *wireComp      `json:"indexer,omitempty"`
}

// wireHeader is the JSON payload of the header frame.
type wireHeader struct {
	Magic      string          `json:"magic"`
	Version    int             `json:"version"`
	Config     string          `json:"config"`
	KVLayout   string          `json:"kv_layout"`
	Room       uint64          `json:"room"`
	Position   int             `json:"position"`
	Prompt     []int32         `json:"prompt"`
	FirstToken int32           `json:"first_token"`
	Sampling   json.RawMessage `json:"sampling,omitempty"`
	Layers     []wireLayer     `json:"layers"`
	// Lens are the float32 counts of the components in stream order:
	// logits, then per layer window, then (if present) the compressor's
	// buffer_kv, buffer_gate, overlap_kv, overlap_gate, entries, then the
	// indexer's five.
	Lens       []int64 `json:"lens"`
	TotalBytes int64   `json:"total_bytes"`
}

const wireMagic = "dsv4-kv"

// components lists h's float32 slices in stream order (pointers, so a decoder
// can fill them).
func components(logits *[]float32, st *dsv4.SequenceState) []*[]float32 {
	out := []*[]float32{logits}
	for i := range st.Layers {
		l := &st.Layers[i]
		out = append(out, &l.Window)
		for _, c := range []*dsv4.CompressorState{l.Compressor, l.Indexer} {
			if c != nil {
				out = append(out, &c.BufferKV, &c.BufferGate, &c.OverlapKV, &c.OverlapGate, &c.Entries)
			}
		}
	}
	return out
}

func compOf(c *dsv4.CompressorState) *wireComp {
	if c == nil {
		return nil
	}
	return &wireComp{Width: c.Width, Rate: c.Rate, Overlap: c.Overlap}
}

// Encoder turns a Handoff into frames. Make one with NewEncoder; the zero
// value stamps a zero Identity (which no receiver accepts) and uses
// DefaultChunkBytes.
type Encoder struct {
	id    Identity
	chunk int
	buf   []byte
}

// NewEncoder returns an encoder that stamps frames with id (the sender's
// identity) and cuts data into frames of chunkBytes (DefaultChunkBytes when
// ≤ 0; at most MaxFrameBytes/2).
func NewEncoder(id Identity, chunkBytes int) *Encoder {
	if chunkBytes <= 0 {
		chunkBytes = DefaultChunkBytes
	}
	chunkBytes = min(chunkBytes, MaxFrameBytes/2)
	return &Encoder{id: id, chunk: chunkBytes}
}

// Encode calls emit with each frame of h in order: header, data, trailer.
// A frame slice is only valid during the call (the encoder reuses it). It
// returns emit's first error. A nil h or h.State is ErrMalformed; a nil
// emit or Encoder an error.
func (e *Encoder) Encode(h *Handoff, emit func(frame []byte) error) error {
	if emit == nil {
		return errors.New("disagg: nil emit function")
	}
	return e.EncodeParts(h, func(parts [][]byte) error {
		if len(parts) == 1 {
			return emit(parts[0])
		}
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		if cap(e.buf) < n {
			e.buf = make([]byte, 0, n)
		}
		b := e.buf[:0]
		for _, p := range parts {
			b = append(b, p...)
		}
		e.buf = b
		return emit(b)
	})
}

// EncodeParts is Encode without copying the state: each frame is given as
// parts whose concatenation is the frame; data parts are views of h's
// float32 slices (valid as long as h is not modified), the others are
// fresh. Transports that can send scatter lists (gRPC's mem.BufferSlice,
// writev, RDMA SGEs) use it to avoid a copy.
func (e *Encoder) EncodeParts(h *Handoff, emit func(parts [][]byte) error) error {
	if e == nil || emit == nil {
		return errors.New("disagg: nil Encoder or emit function")
	}
	if h == nil || h.State == nil {
		return fmt.Errorf("%w: nil handoff or state", ErrMalformed)
	}
	chunk := e.chunk
	if chunk <= 0 { // a zero Encoder: it used to loop for ever on 0-byte frames
		chunk = DefaultChunkBytes
	}
	if !nativeLE {
		return errors.New("disagg: the wire format needs a little-endian host")
	}
	st := h.State
	logits := h.Logits
	comps := components(&logits, st)
	hd := wireHeader{
		Magic: wireMagic, Version: ProtocolVersion, Config: e.id.Config, KVLayout: e.id.KVLayout,
		Room: h.Room, Position: st.Position, Prompt: h.Prompt, FirstToken: h.FirstToken,
		Sampling: h.Sampling, Layers: make([]wireLayer, len(st.Layers)), Lens: make([]int64, len(comps)),
	}
	for i := range st.Layers {
		l := &st.Layers[i]
		hd.Layers[i] = wireLayer{Type: l.Type, Compressor: compOf(l.Compressor), Indexer: compOf(l.Indexer)}
	}
	for i, c := range comps {
		hd.Lens[i] = int64(len(*c))
		hd.TotalBytes += 4 * int64(len(*c))
	}
	js, err := json.Marshal(&hd)
	if err != nil {
		return fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if err := emit([][]byte{frameBytes(frameHeader, js)}); err != nil {
		return err
	}
	// Data: the components' bytes as one concatenated range, cut in frames
	// of e.chunk bytes that may span components (small components coalesce).
	var dataCRC uint32
	var nFrames uint32
	var off int64
	ci, coff := 0, 0
	var parts [][]byte
	for off < hd.TotalBytes {
		size := int(min(int64(chunk), hd.TotalBytes-off))
		hdr := make([]byte, 13)
		hdr[0] = frameData
		binary.LittleEndian.PutUint32(hdr[1:], uint32(8+size))
		binary.LittleEndian.PutUint64(hdr[5:], uint64(off))
		fcrc := crc32.Update(0, castagnoli, hdr)
		parts = append(parts[:0], hdr)
		for left := size; left > 0; {
			b := f32Bytes(*comps[ci])[coff:]
			if len(b) == 0 {
				ci, coff = ci+1, 0
				continue
			}
			n := min(len(b), left)
			v := b[:n:n]
			parts = append(parts, v)
			fcrc = crc32.Update(fcrc, castagnoli, v)
			dataCRC = crc32.Update(dataCRC, castagnoli, v)
			left -= n
			coff += n
		}
		parts = append(parts, binary.LittleEndian.AppendUint32(make([]byte, 0, 4), fcrc))
		if err := emit(parts); err != nil {
			return err
		}
		nFrames++
		off += int64(size)
	}
	var tr [16]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(off))
	binary.LittleEndian.PutUint32(tr[8:], dataCRC)
	binary.LittleEndian.PutUint32(tr[12:], nFrames)
	return emit([][]byte{frameBytes(frameTrailer, tr[:])})
}

// frameBytes builds a frame: kind, payload length, payload, CRC-32C.
func frameBytes(kind byte, payload []byte) []byte {
	b := make([]byte, 5, len(payload)+frameOverhead)
	b[0] = kind
	binary.LittleEndian.PutUint32(b[1:], uint32(len(payload)))
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DefaultMaxStateBytes is Limits.MaxStateBytes when it is not set and the
// receiver does not know the model: 1 GiB, which holds a V4-Flash state of
// up to about 75K tokens (dsv4.StateBytes: 834 MiB at 64K) plus its logits.
// A receiver that knows its model uses LimitsFor instead (a DecodeServer
// does), whose bound is the model's own largest state.
const DefaultMaxStateBytes = 1 << 30

// DefaultMaxPrompt is Limits.MaxPrompt when it is not set: 1<<22 tokens.
const DefaultMaxPrompt = 1 << 22

// Limits bound what a Decoder accepts, so that a hostile or broken peer
// cannot make it buffer without bound: a header announcing more is refused
// with ErrTooLarge before any data is read, and data past what the header
// announced is refused frame by frame (ErrTooLarge) before it is copied.
type Limits struct {
	// MaxStateBytes bounds the total float32 payload in bytes: the state's
	// components plus the logits (DefaultMaxStateBytes when ≤ 0).
	MaxStateBytes int64
	// MaxPrompt bounds the prompt length in tokens (DefaultMaxPrompt when
	// ≤ 0).
	MaxPrompt int
}

// fill returns l with its unset fields at the package defaults.
func (l Limits) fill() Limits {
	return l.or(Limits{MaxStateBytes: DefaultMaxStateBytes, MaxPrompt: DefaultMaxPrompt})
}

// or returns l with its unset (≤ 0) fields taken from d.
func (l Limits) or(d Limits) Limits {
	if l.MaxStateBytes <= 0 {
		l.MaxStateBytes = d.MaxStateBytes
	}
	if l.MaxPrompt <= 0 {
		l.MaxPrompt = d.MaxPrompt
	}
	return l
}

// LimitsFor returns the Limits of a receiver serving a model of config cfg
// with a context of contextLength tokens (≤ 0 or above
// cfg.MaxPositionEmbeddings: the model's): MaxPrompt is contextLength and
// MaxStateBytes the largest state a legitimate stream can carry, the
// maximum of dsv4.StateBytes(cfg, n) over n ≤ contextLength (it is not
// monotonic: a compressor's open window empties when it closes) plus
// cfg.VocabSize float32 logits. For V4-Flash that is about 12.9 GiB at its
// 1M-token context and 834 MiB at 64K. A nil cfg gives the defaults.
func LimitsFor(cfg *dsv4.Config, contextLength int) Limits {
	if cfg == nil {
		return Limits{}.fill()
	}
	n := cfg.MaxPositionEmbeddings
	if contextLength > 0 && contextLength < n {
		n = contextLength
	}
	// The non-monotonic part of StateBytes is periodic in the compress
	// rates, so the maximum lies within the last period before n.
	span := statePeriod(cfg)
	var state int64
	for j := max(n-span, 0); j <= n; j++ {
		state = max(state, dsv4.StateBytes(cfg, j))
	}
	return Limits{MaxStateBytes: state + 4*int64(max(cfg.VocabSize, 0)), MaxPrompt: max(n, 1)}
}

// statePeriod is the period of the open-window terms of dsv4.StateBytes: the
// least common multiple of the compress rates, at most 1<<16 (rates are
// powers of two in every DeepSeek-V4 config: 4 and 128).
func statePeriod(cfg *dsv4.Config) int {
	gcd := func(a, b int) int {
		for b != 0 {
			a, b = b, a%b
		}
		return a
	}
	p := 1
	for _, r := range []int{cfg.CompressRateCSA, cfg.CompressRateHCA} {
		if r > 1 {
			p = min(p/gcd(p, r)*r, 1<<16)
		}
	}
	return p
}

// Decoder rebuilds a Handoff from frames. Feed every frame to Next; after the
// trailer, Handoff returns the result. A Decoder checks every frame's CRC-32C,
// the header's version and the sender's identity against local, the order and
// contiguity of data, and the trailer's total length and CRC.
type Decoder struct {
	local   Identity
	lim     Limits
	hd      *wireHeader
	out     *Handoff
	comps   []*[]float32
	ci      int   // current component
	coff    int64 // byte offset inside it
	off     int64 // stream offset
	crc     uint32
	nFrames uint32
	done    bool
}

// NewDecoder returns a decoder that accepts streams from a sender compatible
// with local (equal config and KV-layout fingerprints), within lim (unset
// fields: DefaultMaxStateBytes, DefaultMaxPrompt; LimitsFor derives them from
// the receiver's model).
func NewDecoder(local Identity, lim Limits) *Decoder {
	return &Decoder{local: local, lim: lim.fill()}
}

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

// Next consumes one frame. Errors wrap ErrChecksum, ErrVersion,
// ErrIncompatible or ErrMalformed (ErrTooLarge, which wraps ErrMalformed,
// when the stream exceeds the decoder's Limits); after an error the decoder
// is unusable.
func (d *Decoder) Next(frame []byte) error {
	if len(frame) < frameOverhead {
		return malformed("frame of %d bytes", len(frame))
	}
	n := int(binary.LittleEndian.Uint32(frame[1:]))
	if n != len(frame)-frameOverhead {
		return malformed("frame says %d payload bytes, has %d", n, len(frame)-frameOverhead)
	}
	if got, want := crc32.Checksum(frame[:5+n], castagnoli), binary.LittleEndian.Uint32(frame[5+n:]); got != want {
		return fmt.Errorf("%w: frame %q crc %08x, want %08x", ErrChecksum, frame[0], got, want)
	}
	p := frame[5 : 5+n]
	switch kind := frame[0]; {
	case d.done:
		return malformed("frame after trailer")
	case kind == frameHeader:
		if d.hd != nil {
			return malformed("second header")
		}
		return d.header(p)
	case d.hd == nil:
		return malformed("frame %q before header", kind)
	case kind == frameData:
		return d.data(p)
	case kind == frameTrailer:
		return d.trailer(p)
	default:
		return malformed("unknown frame kind %q", kind)
	}
}

func (d *Decoder) header(p []byte) error {
	if !nativeLE {
		return errors.New("disagg: the wire format needs a little-endian host")
	}
	var hd wireHeader
	if err := json.Unmarshal(p, &hd); err != nil {
		return malformed("header: %v", err)
	}
	if hd.Magic != wireMagic || hd.Version != ProtocolVersion {
		return fmt.Errorf("%w: magic %q version %d, want %q %d", ErrVersion, hd.Magic, hd.Version, wireMagic, ProtocolVersion)
	}
	if hd.Config != d.local.Config || hd.KVLayout != d.local.KVLayout {
		return fmt.Errorf("%w: sender config %.12s layout %.12s, ours %.12s %.12s", ErrIncompatible, hd.Config, hd.KVLayout, d.local.Config, d.local.KVLayout)
	}
	if len(hd.Prompt) > d.lim.MaxPrompt {
		return fmt.Errorf("%w: prompt of %d tokens, limit %d", ErrTooLarge, len(hd.Prompt), d.lim.MaxPrompt)
	}
	if hd.Position != len(hd.Prompt) || hd.Position < 0 {
		return malformed("position %d with %d prompt ids", hd.Position, len(hd.Prompt))
	}
	if len(hd.Layers) > 4096 {
		return malformed("%d layers", len(hd.Layers))
	}
	st := &dsv4.SequenceState{Position: hd.Position, Layers: make([]dsv4.LayerState, len(hd.Layers))}
	mk := func(c *wireComp) *dsv4.CompressorState {
		if c == nil {
			return nil
		}
		return &dsv4.CompressorState{Width: c.Width, Rate: c.Rate, Overlap: c.Overlap}
	}
	for i, l := range hd.Layers {
		st.Layers[i] = dsv4.LayerState{Type: l.Type, Compressor: mk(l.Compressor), Indexer: mk(l.Indexer)}
	}
	h := &Handoff{Room: hd.Room, Prompt: hd.Prompt, State: st, FirstToken: hd.FirstToken, Sampling: hd.Sampling}
	comps := components(&h.Logits, st)
	if len(comps) != len(hd.Lens) {
		return malformed("%d component lengths for %d components", len(hd.Lens), len(comps))
	}
	var total int64
	for _, n := range hd.Lens {
		if n < 0 {
			return malformed("component of %d values", n)
		}
		if n > (d.lim.MaxStateBytes-total)/4 { // total ≤ MaxStateBytes: no overflow
			return fmt.Errorf("%w: header announces a component of %d values after %d bytes; state limit %d bytes", ErrTooLarge, n, total, d.lim.MaxStateBytes)
		}
		total += 4 * n
	}
	if total != hd.TotalBytes {
		return malformed("components sum to %d bytes, header says %d", total, hd.TotalBytes)
	}
	// Components are allocated as their data arrives (see grow), not here: a
	// header of a few hundred bytes announcing MaxStateBytes would otherwise
	// make the decoder allocate all of it at once (with a large limit, such
	// as the 12.9 GiB of V4-Flash at 1M tokens, a fatal "out of memory" that
	// no recover catches).
	d.hd, d.out, d.comps = &hd, h, comps
	d.skipEmpty()
	return nil
}

func (d *Decoder) skipEmpty() {
	for d.ci < len(d.comps) && d.coff == 4*d.hd.Lens[d.ci] {
		d.ci++
		d.coff = 0
	}
}

// minGrow is the float32 count a component is first allocated with (or its
// whole length if smaller): 4 MiB, so small components are allocated once.
const minGrow = 1 << 20

// grow makes the current component hold at least need values, so that what
// the decoder allocates stays within twice the data received plus 4 MiB.
// Capacity doubles up to the component's announced length, which is also its
// final capacity.
func (d *Decoder) grow(need int64) {
	c := d.comps[d.ci]
	if need <= int64(len(*c)) {
		return
	}
	if need > int64(cap(*c)) {
		total := d.hd.Lens[d.ci]
		nc := min(max(need, 2*int64(cap(*c)), minGrow), total)
		b := make([]float32, len(*c), nc)
		copy(b, *c)
		*c = b
	}
	*c = (*c)[:need]
}

func (d *Decoder) data(p []byte) error {
	if len(p) < 8 {
		return malformed("short data frame")
	}
	if off := int64(binary.LittleEndian.Uint64(p)); off != d.off {
		return malformed("data at offset %d, expected %d", off, d.off)
	}
	b := p[8:]
	if d.off+int64(len(b)) > d.hd.TotalBytes {
		return fmt.Errorf("%w: data past the announced %d bytes", ErrTooLarge, d.hd.TotalBytes)
	}
	d.crc = crc32.Update(d.crc, castagnoli, b)
	d.nFrames++
	for len(b) > 0 {
		d.grow(min((d.coff+int64(len(b))+3)/4, d.hd.Lens[d.ci]))
		dst := f32Bytes(*d.comps[d.ci])[d.coff:]
		n := copy(dst, b)
		b = b[n:]
		d.coff += int64(n)
		d.off += int64(n)
		d.skipEmpty()
	}
	return nil
}

func (d *Decoder) trailer(p []byte) error {
	if len(p) != 16 {
		return malformed("trailer of %d bytes", len(p))
	}
	total := int64(binary.LittleEndian.Uint64(p))
	crc := binary.LittleEndian.Uint32(p[8:])
	nf := binary.LittleEndian.Uint32(p[12:])
	switch {
	case total != d.hd.TotalBytes || d.off != total:
		return fmt.Errorf("%w: %d of %d data bytes (trailer says %d)", ErrTruncated, d.off, d.hd.TotalBytes, total)
	case nf != d.nFrames:
		return fmt.Errorf("%w: %d data frames, trailer says %d", ErrTruncated, d.nFrames, nf)
	case crc != d.crc:
		return fmt.Errorf("%w: data crc %08x, trailer says %08x", ErrChecksum, d.crc, crc)
	}
	d.done = true
	return nil
}

// Handoff returns the decoded handoff; ErrTruncated until the trailer came.
func (d *Decoder) Handoff() (*Handoff, error) {
	if !d.done {
		return nil, fmt.Errorf("%w: stream ended after %d of %d data bytes", ErrTruncated, d.off, d.totalBytes())
	}
	return d.out, nil
}

func (d *Decoder) totalBytes() int64 {
	if d.hd == nil {
		return 0
	}
	return d.hd.TotalBytes
}

// WriteStream writes h to w as a byte stream of frames (the form used over
// plain TCP and in files; gRPC carries the same frames as messages).
func WriteStream(w io.Writer, h *Handoff, id Identity, chunkBytes int) error {
	if w == nil {
		return errors.New("disagg: WriteStream to a nil io.Writer")
	}
	return NewEncoder(id, chunkBytes).EncodeParts(h, func(parts [][]byte) error {
		bufs := net.Buffers(parts) // writev on sockets
		_, err := bufs.WriteTo(w)
		return err
	})
}

// ReadStream reads one handoff written by WriteStream. A stream that ends
// early gives ErrTruncated; other errors as Decoder.Next.
func ReadStream(r io.Reader, local Identity, lim Limits) (*Handoff, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: ReadStream from a nil io.Reader", ErrTruncated)
	}
	d := NewDecoder(local, lim)
	var hdr [5]byte
	var buf []byte
	for !d.done {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
			}
			return nil, err
		}
		n := int(binary.LittleEndian.Uint32(hdr[1:]))
		if n > MaxFrameBytes {
			return nil, malformed("frame of %d bytes", n)
		}
		if cap(buf) < n+frameOverhead {
			buf = make([]byte, n+frameOverhead)
		}
		buf = buf[:n+frameOverhead]
		copy(buf, hdr[:])
		if _, err := io.ReadFull(r, buf[5:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
			}
			return nil, err
		}
		if err := d.Next(buf); err != nil {
			return nil, err
		}
	}
	return d.Handoff()
}

var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// f32Bytes views f as bytes (no copy; little-endian hosts only).
func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}
