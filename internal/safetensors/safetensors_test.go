package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeRaw(t *testing.T, header string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.safetensors")
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	b = append(b, data...)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTripWithoutMmap(t *testing.T) {
	noMmap = true
	defer func() { noMmap = false }()
	TestRoundTrip(t)
}

func TestRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.safetensors")
	in := []WriteTensor{
		{Name: "w", DType: BF16, Shape: []int64{2, 3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{Name: "s", DType: F32, Shape: []int64{}, Data: []byte{0, 0, 128, 63}},
		{Name: "e", DType: F8E8M0, Shape: []int64{0}, Data: nil},
		{Name: "i", DType: I64, Shape: []int64{1}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
	}
	if err := WriteFile(p, in, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Mapped() == noMmap {
		t.Errorf("Mapped() = %v with noMmap %v", f.Mapped(), noMmap)
	}
	if f.Header().Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Header().Metadata)
	}
	if f.Header().DataOffset%8 != 0 {
		t.Errorf("data offset %d not 8-aligned", f.Header().DataOffset)
	}
	for _, w := range in {
		got, err := f.Data(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(w.Data) {
			t.Errorf("%s: %v want %v", w.Name, got, w.Data)
		}
		info, ok := f.Info(w.Name)
		if !ok || info.DType != w.DType || len(info.Shape) != len(w.Shape) {
			t.Errorf("%s: info %+v", w.Name, info)
		}
	}
	if _, err := f.Data("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	f.Close()
	if _, err := f.Data("w"); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestBadFiles(t *testing.T) {
	four := []byte{1, 2, 3, 4}
	tests := []struct {
		name   string
		header string
		data   []byte
		want   error
	}{
		{"bad json", `{"a":`, nil, ErrHeader},
		{"not object", `[1,2]`, nil, ErrHeader},
		{"null", `null`, nil, ErrHeader},
		{"missing field", `{"a":{"dtype":"F32","shape":[1]}}`, four, ErrHeader},
		{"unknown dtype", `{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}`, four, ErrDType},
		{"negative dim", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, four, ErrShape},
		{"size mismatch", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, four, ErrShape},
		{"out of range", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, four, ErrOffsets},
		{"truncated data", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, four, ErrTruncated},
		{"overlap", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, four, ErrOffsets},
		{"hole", `{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, four, ErrOffsets},
		{"reversed", `{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, four, ErrOffsets},
		{"rank", `{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}`, four[:1], ErrLimit},
		{"overflow", `{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, four, ErrShape},
		{"trailing", `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}} {}`, four, ErrHeader},
		{"bad metadata", `{"__metadata__":{"a":1}}`, nil, ErrHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeRaw(t, tt.header, tt.data)
			_, err := Open(p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var se *Error
			if !errors.As(err, &se) || se.File != p {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestTruncatedPrefix(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.safetensors")
	os.WriteFile(short, []byte{1, 2, 3}, 0o644)
	if _, err := Open(short); !errors.Is(err, ErrTruncated) {
		t.Errorf("3-byte file: %v", err)
	}
	long := filepath.Join(dir, "long.safetensors")
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, 100)
	os.WriteFile(long, b, 0o644)
	if _, err := Open(long); !errors.Is(err, ErrTruncated) {
		t.Errorf("header past EOF: %v", err)
	}
	huge := filepath.Join(dir, "huge.safetensors")
	binary.LittleEndian.PutUint64(b, 1<<40)
	os.WriteFile(huge, b, 0o644)
	if _, err := Open(huge); !errors.Is(err, ErrLimit) {
		t.Errorf("huge header: %v", err)
	}
	absent := filepath.Join(dir, "absent")
	if _, err := Open(absent); !errors.Is(err, ErrNoFile) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), absent) {
		t.Errorf("absent: %v", err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	if _, err := ReadIndex(absent); !errors.Is(err, ErrNoFile) {
		t.Errorf("absent index: %v", err)
	}
}

func TestIndex(t *testing.T) {
	ix, err := ParseIndex("i.json", []byte(`{"metadata":{"total_size":8},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors","c":"m-1.safetensors"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := ix.Shards(); len(s) != 2 || s[0] != "m-1.safetensors" {
		t.Errorf("shards %v", s)
	}
	for _, bad := range []string{`{}`, `{"weight_map":{"a":"../x.safetensors"}}`, `{"weight_map":{"a":""}}`, `[`, `{"weight_map":{"a":"/etc/passwd"}}`} {
		if _, err := ParseIndex("i.json", []byte(bad)); !errors.Is(err, ErrIndex) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func FuzzHeader(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), int64(4))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"s":{"dtype":"F8_E8M0","shape":[1,1],"data_offsets":[8,9]}}`), int64(9))
	f.Add([]byte(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`), int64(4))
	f.Add([]byte(`{"a":{"dtype":"F4","shape":[3,2],"data_offsets":[0,3]}}`), int64(3))
	f.Add([]byte(`{}`), int64(0))
	f.Add([]byte(`{"a":{"shape":[2],"dtype":"U8","data_offsets":[0,2]}, "__metadata__":{"k":"v","x":""}}  `), int64(2))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		// Differential: whatever the fast decoder accepts, encoding/json
		// decodes to the same entries.
		if fast, ok := parseHeaderFast(b); ok {
			slow, err := parseHeaderJSON(b)
			if err != nil {
				t.Fatalf("fast decoder accepted what encoding/json rejects (%v): %q", err, b)
			}
			if len(fast) != len(slow) {
				t.Fatalf("fast %d entries, encoding/json %d: %q", len(fast), len(slow), b)
			}
			for k, fe := range fast {
				se := slow[k]
				if se == nil || !sameEntry(k == "__metadata__", fe, se) {
					t.Fatalf("entry %q differs: fast %+v, encoding/json %+v", k, fe, se)
				}
			}
		}
		h, err := ParseHeader(b, size)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		// Invariants of an accepted header.
		var pos int64
		for _, ti := range h.Tensors {
			if ti.Begin != pos || ti.End < ti.Begin {
				t.Fatalf("bad layout accepted: %+v at %d", ti, pos)
			}
			n, err := byteLen(ti.DType, ti.Shape)
			if err != nil || n != ti.End-ti.Begin {
				t.Fatalf("size mismatch accepted: %+v", ti)
			}
			pos = ti.End
		}
		if size >= 0 && pos > size {
			t.Fatalf("data past the end accepted: %d > %d", pos, size)
		}
		// Re-encoding the accepted tensors must parse again.
		enc, _, err := EncodeHeader(h.Tensors, h.Metadata)
		if err != nil {
			t.Fatalf("EncodeHeader: %v", err)
		}
		if _, err := ParseHeader(enc[8:], pos); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

func sameEntry(metadata bool, a, b *rawEntry) bool {
	eqS := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqI := func(x, y *[]int64) bool {
		if (x == nil) != (y == nil) {
			return false
		}
		return x == nil || slices.Equal(*x, *y)
	}
	if metadata { // compare the decoded maps

		var ma, mb map[string]string
		ea, eb := json.Unmarshal(a.raw, &ma), json.Unmarshal(b.raw, &mb)
		return (ea == nil) == (eb == nil) && maps.Equal(ma, mb)
	}
	return eqS(a.DType, b.DType) && eqI(a.Shape, b.Shape) && eqI(a.DataOffsets, b.DataOffsets)
}

func TestFastHeaderFallback(t *testing.T) {
	for _, h := range []string{
		`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`,
		`{"a\u0041":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, // escape: fallback
		`{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`,     // float: fallback, JSON error
		`{"a":{"DTYPE":"U8","shape":[1],"data_offsets":[0,1]}}`,       // case-insensitive field: fallback
		`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}`, // unknown field: fallback
		`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`,
	} {
		b := []byte(h)
		fast, fok := parseHeaderFast(b)
		slow, serr := parseHeaderJSON(b)
		if fok && (serr != nil || len(fast) != len(slow)) {
			t.Errorf("%s: fast accepted, json: %v", h, serr)
		}
		_, err1 := ParseHeader(b, 1)
		if fok != (h == `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`) {
			t.Errorf("%s: fast ok = %v", h, fok)
		}
		_ = err1
	}
}

func TestMetadataThatLooksLikeAnEntry(t *testing.T) {
	h, err := ParseHeader([]byte(`{"__metadata__":{"dtype":"x"}}`), 0)
	if err != nil || h.Metadata["dtype"] != "x" {
		t.Fatalf("%v %v", h, err)
	}
	h, err = ParseHeader([]byte(`{"__metadata__" : {"dtype":"x"} , "b":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`), 1)
	if err != nil || h.Metadata["dtype"] != "x" || len(h.Tensors) != 1 {
		t.Fatalf("%v %v", h, err)
	}
}

func BenchmarkParseHeader(b *testing.B) {
	var infos []TensorInfo
	for i := range 1500 {
		infos = append(infos, TensorInfo{Name: fmt.Sprintf("layers.7.ffn.experts.%d.w1.weight", i), DType: I8, Shape: []int64{2048, 2048}})
	}
	hdr, size, err := EncodeHeader(infos, map[string]string{"format": "pt"})
	if err != nil {
		b.Fatal(err)
	}
	body := hdr[8:]
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := ParseHeader(body, size); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := parseHeaderJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
