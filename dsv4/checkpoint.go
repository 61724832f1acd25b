package dsv4

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dsv4go/dsv4go/internal/safetensors"
	"golang.org/x/sync/errgroup"
)

// Checkpoint is an opened checkpoint directory: its Config, its memory-mapped
// safetensors shards and the Weights bound to them. Load wraps it in a Model;
// tools that only inspect or convert a checkpoint can use OpenCheckpoint
// directly. Tensor data stays valid until Close.
type Checkpoint struct {
	dir     string
	cfg     *Config
	files   []*safetensors.File
	entries map[string]*entry // canonical name -> stored tensor
	weights *Weights
}

type entry struct {
	canonical string
	file      *safetensors.File
	info      safetensors.TensorInfo
	used      bool
}

// TensorInfo describes one stored tensor of a checkpoint (scales included).
type TensorInfo struct {
	Name      string // as written in the file
	Canonical string // CanonicalName(Name)
	File      string // shard file name (base name)
	DType     DType  // storage dtype
	Shape     []int  // stored shape (packed FP4 rows hold 2 values per byte)
	Bytes     int64  // stored bytes
}

// OpenCheckpoint opens dir: it parses dir/config.json, opens every
// safetensors shard (dir/model.safetensors.index.json when present, else
// every *.safetensors file of dir), validates their headers, and binds and
// validates the Weights against the Config (see Load for the options). Only
// metadata is read: tensor bytes are memory-mapped, not loaded.
func OpenCheckpoint(ctx context.Context, dir string, opts ...Option) (*Checkpoint, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	o := newLoadOptions(opts)
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{dir: dir, cfg: cfg, entries: map[string]*entry{}}
	if err := ck.openShards(ctx, o); err != nil {
		ck.Close()
		return nil, err
	}
	w, err := bindWeights(ctx, ck, o)
	if err != nil {
		ck.Close()
		return nil, err
	}
	ck.weights = w
	return ck, nil
}

func (ck *Checkpoint) openShards(ctx context.Context, o *loadOptions) error {
	var shards []string
	var ix *safetensors.Index
	indexPath := filepath.Join(ck.dir, safetensors.IndexFileName)
	if _, err := os.Stat(indexPath); err == nil {
		ix, err = safetensors.ReadIndex(indexPath)
		if err != nil {
			return checkpointErr(err)
		}
		shards = ix.Shards()
	} else {
		matches, err := filepath.Glob(filepath.Join(ck.dir, "*.safetensors"))
		if err != nil {
			return checkpointErr(err)
		}
		for _, m := range matches {
			shards = append(shards, filepath.Base(m))
		}
		sort.Strings(shards)
		if len(shards) == 0 {
			return &TensorError{Kind: ErrCheckpoint, Name: "*.safetensors", File: ck.dir, Detail: "no safetensors files and no " + safetensors.IndexFileName}
		}
	}
	o.report(Progress{Stage: StageOpen, Total: int64(len(shards))})
	// Open and parse the shard headers in parallel (JSON parsing dominates a
	// metadata-only load), then index them in shard order.
	files := make([]*safetensors.File, len(shards))
	var done atomic.Int64
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.GOMAXPROCS(0)))
	for i, s := range shards {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			f, err := safetensors.Open(filepath.Join(ck.dir, s))
			if err != nil {
				return checkpointErr(err)
			}
			files[i] = f
			mu.Lock() // reports stay monotonic
			o.report(Progress{Stage: StageOpen, Done: done.Add(1), Total: int64(len(shards))})
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	for _, f := range files {
		if f != nil {
			ck.files = append(ck.files, f)
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	for i, f := range files {
		s := shards[i]
		for _, ti := range f.Tensors() {
			if ix != nil {
				if want, ok := ix.WeightMap[ti.Name]; ok && want != s {
					return &TensorError{Kind: ErrCheckpoint, Name: ti.Name, File: s, Detail: "the index places it in " + want}
				} else if !ok {
					return &TensorError{Kind: ErrCheckpoint, Name: ti.Name, File: s, Detail: "tensor is not listed in " + safetensors.IndexFileName}
				}
			}
			c := CanonicalName(ti.Name)
			if prev, dup := ck.entries[c]; dup {
				return &TensorError{Kind: ErrCheckpoint, Name: ti.Name, File: s,
					Detail: fmt.Sprintf("same tensor as %q in %s (both spell %q)", prev.info.Name, filepath.Base(prev.file.Path()), c)}
			}
			ck.entries[c] = &entry{canonical: c, file: f, info: ti}
		}
	}
	if ix != nil {
		// Every tensor of the index must exist in its shard.
		names := make([]string, 0, len(ix.WeightMap))
		for n := range ix.WeightMap {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if _, ok := ck.entries[CanonicalName(n)]; !ok {
				return &TensorError{Kind: ErrMissingTensor, Name: n, File: ix.WeightMap[n], Detail: "listed in the index but absent from the shard"}
			}
		}
	}
	return nil
}

func checkpointErr(err error) error {
	var se *safetensors.Error
	if errors.As(err, &se) {
		kind := ErrCheckpoint
		if errors.Is(err, safetensors.ErrClosed) {
			kind = ErrClosed // Raw after Close
		}
		return &TensorError{Kind: kind, Name: se.Tensor, File: se.File, Err: err}
	}
	return &TensorError{Kind: ErrCheckpoint, Err: err}
}

// Dir returns the checkpoint directory.
func (ck *Checkpoint) Dir() string { return ck.dir }

// Config returns the parsed configuration.
func (ck *Checkpoint) Config() *Config { return ck.cfg }

// Weights returns the bound, validated weights.
func (ck *Checkpoint) Weights() *Weights { return ck.weights }

// TensorInfos lists every stored tensor, sorted by canonical name.
func (ck *Checkpoint) TensorInfos() []TensorInfo {
	out := make([]TensorInfo, 0, len(ck.entries))
	for _, e := range ck.entries {
		out = append(out, TensorInfo{Name: e.info.Name, Canonical: e.canonical, File: filepath.Base(e.file.Path()),
			DType: DType(e.info.DType), Shape: intShape(e.info.Shape), Bytes: e.info.End - e.info.Begin})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Canonical < out[j].Canonical })
	return out
}

// Raw returns a stored tensor by canonical (or any supported) name, as
// stored: FormatFloat or FormatInt with the stored shape and no scales.
func (ck *Checkpoint) Raw(name string) (*Tensor, error) {
	e, ok := ck.entries[CanonicalName(name)]
	if !ok {
		return nil, &TensorError{Kind: ErrMissingTensor, Name: name}
	}
	return ck.rawTensor(e)
}

func (ck *Checkpoint) rawTensor(e *entry) (*Tensor, error) {
	data, err := e.file.Data(e.info.Name)
	if err != nil {
		return nil, checkpointErr(err)
	}
	t := &Tensor{Name: e.info.Name, File: filepath.Base(e.file.Path()), DType: DType(e.info.DType),
		Shape: intShape(e.info.Shape), Data: data, GlobalScale: 1, src: e.file}
	switch t.DType {
	case I64, I32, I16, I8, U8, BOOL:
		t.Format = FormatInt
	}
	return t, nil
}

func intShape(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// Close unmaps and closes every shard. Tensors obtained from the checkpoint
// must not be used afterwards. Close is idempotent.
func (ck *Checkpoint) Close() error {
	var errs []error
	for _, f := range ck.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	ck.files = nil
	return errors.Join(errs...)
}

// isMTP reports whether a canonical name belongs to the MTP block(s).
func isMTP(canonical string) bool { return strings.HasPrefix(canonical, "mtp.") }
