package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
)

// DType is a safetensors dtype name.
type DType string

// Dtypes of the safetensors specification.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	F8E8M0 DType = "F8_E8M0"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
	F4     DType = "F4" // packed FP4 (two per byte), newer safetensors
)

// Size returns bytes per element; 0 for unknown dtypes. F4 returns 0 as it
// is sub-byte (see ByteLen).
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E5M2, F8E4M3, F8E8M0:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}

func (d DType) known() bool { return d.Size() > 0 || d == F4 }

// Limits applied by the header parser.
const (
	MaxHeaderBytes = 100 << 20 // as the reference implementation (100 MB)
	MaxTensors     = 1 << 20
	MaxRank        = 8
	MaxNameBytes   = 1024
)

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int64
	// Begin and End are byte offsets relative to the start of the data
	// section (after the header), End exclusive.
	Begin, End int64
}

// NumElements is the product of Shape (1 for a scalar).
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	Tensors  []TensorInfo      // sorted by Begin
	Metadata map[string]string // "__metadata__", may be nil
	// DataOffset is the absolute file offset of the data section (8 + header length).
	DataOffset int64
	// DataSize is End of the last tensor (the bytes the data section must hold).
	DataSize int64
}

// rawEntry is one header value. It decodes in a single pass: tensor
// entries fill the pointers; "__metadata__" keeps its raw bytes.
type rawEntry struct {
	DType       *string
	Shape       *[]int64
	DataOffsets *[]int64
	raw         []byte
	err         error
}

func (e *rawEntry) UnmarshalJSON(b []byte) error {
	var v struct {
		DType       *string  `json:"dtype"`
		Shape       *[]int64 `json:"shape"`
		DataOffsets *[]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		e.err = err // reported with the tensor name by ParseHeader
	}
	e.DType, e.Shape, e.DataOffsets = v.DType, v.Shape, v.DataOffsets
	e.raw = append([]byte(nil), b...) // for "__metadata__"
	return nil
}

// ParseHeader parses the header bytes (the JSON after the 8-byte length)
// and validates every entry against dataSize, the number of bytes available
// after the header (use -1 to skip the bound check). The returned header's
// DataOffset is 8+len(b).
func ParseHeader(b []byte, dataSize int64) (*Header, error) {
	if len(b) > MaxHeaderBytes {
		return nil, &Error{Kind: ErrLimit, Detail: fmt.Sprintf("header of %d bytes exceeds %d", len(b), MaxHeaderBytes)}
	}
	raw, ok := parseHeaderFast(b)
	if !ok {
		var err error
		if raw, err = parseHeaderJSON(b); err != nil {
			return nil, err
		}
	}
	if len(raw) > MaxTensors+1 {
		return nil, &Error{Kind: ErrLimit, Detail: fmt.Sprintf("%d entries exceed %d tensors", len(raw), MaxTensors)}
	}
	h := &Header{DataOffset: 8 + int64(len(b))}
	h.Tensors = make([]TensorInfo, 0, len(raw))
	for name, e := range raw {
		if e == nil {
			return nil, &Error{Kind: ErrHeader, Tensor: name, Detail: "entry is null"}
		}
		if name == "__metadata__" {
			if err := json.Unmarshal(e.raw, &h.Metadata); err != nil {
				return nil, &Error{Kind: ErrHeader, Detail: "__metadata__ must map strings to strings", Err: err}
			}
			continue
		}
		if len(name) > MaxNameBytes {
			return nil, &Error{Kind: ErrLimit, Tensor: name[:64] + "...", Detail: fmt.Sprintf("name longer than %d bytes", MaxNameBytes)}
		}
		if e.err != nil {
			return nil, &Error{Kind: ErrHeader, Tensor: name, Detail: "entry must be {dtype, shape, data_offsets}", Err: e.err}
		}
		if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
			return nil, &Error{Kind: ErrHeader, Tensor: name, Detail: "entry lacks dtype, shape or data_offsets"}
		}
		ti := TensorInfo{Name: name, DType: DType(*e.DType), Shape: *e.Shape}
		if !ti.DType.known() {
			return nil, &Error{Kind: ErrDType, Tensor: name, Detail: fmt.Sprintf("dtype %q", *e.DType)}
		}
		if len(ti.Shape) > MaxRank {
			return nil, &Error{Kind: ErrLimit, Tensor: name, Detail: fmt.Sprintf("rank %d exceeds %d", len(ti.Shape), MaxRank)}
		}
		if len(*e.DataOffsets) != 2 {
			return nil, &Error{Kind: ErrHeader, Tensor: name, Detail: "data_offsets must have 2 entries"}
		}
		ti.Begin, ti.End = (*e.DataOffsets)[0], (*e.DataOffsets)[1]
		nbytes, err := byteLen(ti.DType, ti.Shape)
		if err != nil {
			return nil, &Error{Kind: ErrShape, Tensor: name, Detail: err.Error()}
		}
		if ti.Begin < 0 || ti.End < ti.Begin {
			return nil, &Error{Kind: ErrOffsets, Tensor: name, Detail: fmt.Sprintf("data_offsets [%d, %d]", ti.Begin, ti.End)}
		}
		if ti.End-ti.Begin != nbytes {
			return nil, &Error{Kind: ErrShape, Tensor: name, Detail: fmt.Sprintf("%s %v needs %d bytes, data_offsets span %d", ti.DType, ti.Shape, nbytes, ti.End-ti.Begin)}
		}
		h.Tensors = append(h.Tensors, ti)
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := &h.Tensors[i], &h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	var pos int64
	for i := range h.Tensors {
		t := &h.Tensors[i]
		if t.Begin < pos {
			return nil, &Error{Kind: ErrOffsets, Tensor: t.Name, Detail: fmt.Sprintf("data_offsets [%d, %d] overlap the previous tensor ending at %d", t.Begin, t.End, pos)}
		}
		if t.Begin > pos {
			return nil, &Error{Kind: ErrOffsets, Tensor: t.Name, Detail: fmt.Sprintf("hole in the data section: bytes [%d, %d) belong to no tensor", pos, t.Begin)}
		}
		pos = t.End
	}
	h.DataSize = pos
	if dataSize >= 0 && pos > dataSize {
		var last string
		if n := len(h.Tensors); n > 0 {
			last = h.Tensors[n-1].Name
		}
		return nil, &Error{Kind: ErrTruncated, Tensor: last, Detail: fmt.Sprintf("data section has %d bytes, tensors need %d", dataSize, pos)}
	}
	return h, nil
}

// parseHeaderJSON decodes a header with encoding/json (any valid JSON form).
func parseHeaderJSON(b []byte) (map[string]*rawEntry, error) {
	trimmed := bytes.TrimRight(b, " ") // the spec allows trailing space padding
	var raw map[string]*rawEntry
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&raw); err != nil {
		return nil, &Error{Kind: ErrHeader, Detail: "header is not a JSON object", Err: err}
	}
	if dec.More() {
		return nil, &Error{Kind: ErrHeader, Detail: "trailing data after the header JSON"}
	}
	if raw == nil {
		return nil, &Error{Kind: ErrHeader, Detail: "header is null"}
	}
	return raw, nil
}

// byteLen computes the byte size of dtype x shape with overflow checks.
func byteLen(d DType, shape []int64) (int64, error) {
	n := uint64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("negative dimension in %v", shape)
		}
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > math.MaxInt64/8 {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n = lo
	}
	if d == F4 {
		if n%2 != 0 {
			return 0, fmt.Errorf("F4 tensor with an odd element count %d", n)
		}
		return int64(n / 2), nil
	}
	return int64(n) * int64(d.Size()), nil
}

// EncodeHeader builds the 8-byte length prefix plus JSON header for tensors
// laid out contiguously in the given order; it returns the header bytes and
// the data section size. Padding to 8-byte alignment uses spaces.
func EncodeHeader(tensors []TensorInfo, metadata map[string]string) ([]byte, int64, error) {
	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata)
		if err != nil {
			return nil, 0, err
		}
		sb.WriteString(`"__metadata__":`)
		sb.Write(m)
		first = false
	}
	var pos int64
	for _, t := range tensors {
		if !t.DType.known() {
			return nil, 0, &Error{Kind: ErrDType, Tensor: t.Name, Detail: string(t.DType)}
		}
		n, err := byteLen(t.DType, t.Shape)
		if err != nil {
			return nil, 0, &Error{Kind: ErrShape, Tensor: t.Name, Detail: err.Error()}
		}
		if !first {
			sb.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(t.Name)
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		sh, _ := json.Marshal(shape)
		fmt.Fprintf(&sb, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, t.DType, sh, pos, pos+n)
		pos += n
	}
	sb.WriteByte('}')
	hdr := sb.String()
	for (len(hdr))%8 != 0 {
		hdr += " "
	}
	out := make([]byte, 8+len(hdr))
	le64(out, uint64(len(hdr)))
	copy(out[8:], hdr)
	return out, pos, nil
}

func le64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
