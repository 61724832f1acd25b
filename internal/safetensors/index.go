package safetensors

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
)

// IndexFileName is the name of the shard index of a sharded checkpoint.
const IndexFileName = "model.safetensors.index.json"

// maxIndexBytes bounds model.safetensors.index.json (V4-Flash's is ~6 MB).
const maxIndexBytes = 256 << 20

// Index is a parsed model.safetensors.index.json.
type Index struct {
	Metadata  map[string]any    // "metadata", e.g. total_size
	WeightMap map[string]string // tensor name -> shard file name (relative)
}

// ReadIndex reads and validates a shard index: weight_map must be a non-empty
// object of tensor name -> plain file name inside the same directory.
func ReadIndex(path string) (*Index, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	if err != nil {
		return nil, &Error{Kind: ErrIndex, File: path, Err: err}
	}
	if len(b) > maxIndexBytes {
		return nil, &Error{Kind: ErrLimit, File: path, Detail: fmt.Sprintf("index larger than %d bytes", maxIndexBytes)}
	}
	return ParseIndex(path, b)
}

// ParseIndex parses index JSON (path is used in errors only).
func ParseIndex(path string, b []byte) (*Index, error) {
	var raw struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, &Error{Kind: ErrIndex, File: path, Detail: "not a {metadata, weight_map} object", Err: err}
	}
	if len(raw.WeightMap) == 0 {
		return nil, &Error{Kind: ErrIndex, File: path, Detail: "empty or missing weight_map"}
	}
	for name, shard := range raw.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, &Error{Kind: ErrIndex, File: path, Tensor: name, Detail: fmt.Sprintf("shard %q is not a file name in the checkpoint directory", shard)}
		}
	}
	return &Index{Metadata: raw.Metadata, WeightMap: raw.WeightMap}, nil
}

// Shards returns the distinct shard file names, sorted.
func (ix *Index) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ix.WeightMap {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
