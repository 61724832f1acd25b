// Command tokenize encodes stdin to token ids, or decodes ids to text, with a Hugging
// Face byte-level BPE tokenizer (package tokenizer).
//
//	go run ./examples/tokenize -tokenizer DIR [-bos] < text      # prints [id, ...]
//	go run ./examples/tokenize -tokenizer DIR -decode < ids.json  # prints the text
//
// DIR holds tokenizer.json (or tokenizer.json.gz) and optionally tokenizer_config.json,
// e.g. tokenizer/testdata/deepseek-v4. Encoding reads stdin verbatim (a trailing
// newline is part of the text) and prints a JSON array of ids, without BOS unless -bos
// is given; every added token in the text is matched. Decoding reads a JSON array of
// ids and prints their text verbatim, special tokens kept, so that
// `tokenize | tokenize -decode` reproduces its input.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dsv4go/dsv4go/tokenizer"
)

// maxInput bounds stdin: 256 MiB.
const maxInput = 256 << 20

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h: usage was printed
			return
		}
		fmt.Fprintln(os.Stderr, "tokenize:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	dir := fs.String("tokenizer", "", "directory with tokenizer.json[.gz] and tokenizer_config.json")
	bos := fs.Bool("bos", false, "prepend the BOS token when encoding")
	decode := fs.Bool("decode", false, "read a JSON array of ids and print their text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-tokenizer DIR is required")
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil {
		return err
	}
	if len(in) > maxInput {
		return fmt.Errorf("input exceeds %d bytes", maxInput)
	}
	if *decode {
		var ids []int32
		if err := json.Unmarshal(in, &ids); err != nil {
			return fmt.Errorf("stdin is not a JSON array of int32 ids: %w", err)
		}
		text, err := tok.Decode(ids, tokenizer.DecodeOptions{})
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, text)
		return err
	}
	ids, err := tok.EncodeErr(string(in), tokenizer.EncodeOptions{AddBOS: *bos})
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []int32{}
	}
	out, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}
