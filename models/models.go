// Package models ships the embedded default model of dsv4go, dsv4-tiny: a
// small DeepSeek-V4 checkpoint (HF layout: config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json, generation_config.json) trained to
// answer a fixed set of arithmetic questions, to reason in thinking mode and
// to call tools in DSML. The examples use it when no model directory is named,
// so the README's main command runs on a fresh clone with nothing but Go.
//
// Why a package of its own with go:embed: the files (about 36 MB) then travel
// inside the module, so they are there for users who `go get` the module and
// in binaries moved to other machines, which a path inside the repository would
// not give. And only programs that import this package carry the 36 MB: the
// dsv4 package does not import it, so services built on dsv4 stay small.
//
// dsv4.Load and tokenizer.Load read directories, so TinyDir writes the
// embedded files once into the user's cache directory and returns that path;
// TinyFS gives the same files as an fs.FS.
//
// The checkpoint is made by tools/train_tiny (README there: data, training,
// and how to re-run). The greedy outputs of transformers for every training
// prompt are in dsv4-tiny/greedy_golden.jsonl, for engine tests.
package models

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// TinyName is the name of the embedded model, and of its folder.
const TinyName = "dsv4-tiny"

// TinyContextLength is the served context, in tokens, that the examples
// (server, pd) use for the embedded model when none is given: its config
// allows 1,048,576 positions, but it was trained on short turns, and an
// unbounded default would let one request hold a CPU for minutes (and size a
// decode server's KV transfer bound, disagg.LimitsFor, for 1M tokens).
const TinyContextLength = 4096

// TinyFiles lists the files of the embedded model, in the HF layout.
var TinyFiles = []string{
	"config.json",
	"generation_config.json",
	"model.safetensors",
	"tokenizer.json",
	"tokenizer_config.json",
}

//go:embed dsv4-tiny/config.json dsv4-tiny/generation_config.json dsv4-tiny/model.safetensors dsv4-tiny/tokenizer.json dsv4-tiny/tokenizer_config.json
var tiny embed.FS

// TinyFS returns the embedded model's files as a read-only file system whose
// root holds TinyFiles.
func TinyFS() fs.FS {
	sub, err := fs.Sub(tiny, TinyName)
	if err != nil { // cannot happen: the folder is embedded
		panic(err)
	}
	return sub
}

var (
	versionOnce sync.Once
	version     string
)

// TinyVersion returns a content hash of the embedded files (the first 16 hex
// digits of a SHA-256 over their names and bytes). It names the cache folder,
// so a rebuilt model never reuses stale files.
func TinyVersion() string {
	versionOnce.Do(func() {
		h := sha256.New()
		for _, name := range TinyFiles {
			b, err := tiny.ReadFile(TinyName + "/" + name)
			if err != nil {
				panic(err) // cannot happen: embedded
			}
			fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
			h.Write(b)
		}
		version = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return version
}

// ErrNoCacheDir reports that no writable folder was found for the model files.
var ErrNoCacheDir = errors.New("models: no writable cache directory")

var dirMu sync.Mutex

// TinyDir returns a directory holding the embedded model's files, ready for
// dsv4.Load and tokenizer.Load. The first call writes them (about 36 MB) under
// os.UserCacheDir()/dsv4go/dsv4-tiny-<TinyVersion>, or under os.TempDir() when
// there is no user cache directory; later calls, in this process or another,
// find them there (files are checked by size; a damaged copy is replaced). Writing goes through a
// temporary folder renamed into place, so a crash never leaves a partial model
// and concurrent processes are safe.
//
// Errors: ErrNoCacheDir wrapping the last file-system error when neither
// location is writable.
func TinyDir() (string, error) {
	dirMu.Lock()
	defer dirMu.Unlock()
	var bases []string
	if d, err := os.UserCacheDir(); err == nil {
		bases = append(bases, filepath.Join(d, "dsv4go"))
	}
	bases = append(bases, filepath.Join(os.TempDir(), "dsv4go"))
	var last error
	for _, base := range bases {
		dir := filepath.Join(base, TinyName+"-"+TinyVersion())
		if complete(dir) {
			return dir, nil
		}
		if err := materialize(base, dir); err != nil {
			last = err
			continue
		}
		return dir, nil
	}
	return "", fmt.Errorf("%w: %v", ErrNoCacheDir, last)
}

// complete reports whether dir holds every file with its embedded size.
func complete(dir string) bool {
	for _, name := range TinyFiles {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return false
		}
		info, err := fs.Stat(tiny, TinyName+"/"+name)
		if err != nil || st.Size() != info.Size() {
			return false
		}
	}
	return true
}

func materialize(base, dir string) error {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(base, ".tmp-"+TinyName+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // no-op after a successful rename
	for _, name := range TinyFiles {
		if err := copyOut(filepath.Join(tmp, name), TinyName+"/"+name); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(dir); err == nil && !complete(dir) {
		// A damaged copy (a file removed or truncated): replace it.
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have won the race: accept its complete copy.
		if complete(dir) {
			return nil
		}
		return err
	}
	return nil
}

func copyOut(dst, src string) error {
	in, err := tiny.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
