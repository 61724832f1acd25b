package safetensors

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// WriteTensor is one tensor to write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte // little-endian, exactly the dtype's byte length for Shape
}

// WriteFile writes tensors, in the given order, to path as one safetensors
// file. It writes to a temporary file in the same directory and renames it,
// so a failed write never leaves a truncated file behind.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) (err error) {
	infos := make([]TensorInfo, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		if seen[t.Name] {
			return &Error{Kind: ErrHeader, File: path, Tensor: t.Name, Detail: "duplicate tensor name"}
		}
		seen[t.Name] = true
		n, err := byteLen(t.DType, t.Shape)
		if err != nil {
			return &Error{Kind: ErrShape, File: path, Tensor: t.Name, Detail: err.Error()}
		}
		if int64(len(t.Data)) != n {
			return &Error{Kind: ErrShape, File: path, Tensor: t.Name, Detail: fmt.Sprintf("%d data bytes for %s %v (want %d)", len(t.Data), t.DType, t.Shape, n)}
		}
		infos[i] = TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	hdr, _, err := EncodeHeader(infos, metadata)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	if _, err = w.Write(hdr); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err = w.Write(t.Data); err != nil {
			return err
		}
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
