// Command forward runs the dsv4 CPU forward pass on a checkpoint and prints logits or
// greedy tokens as one JSON object on stdout.
//
//	go run ./examples/forward -model DIR -tokens 5,17,3,... [-prefill N] [-generate K]
//
// With neither -prefill nor -generate it prints {"logits": [[...], ...]}, one row per
// position of a single prefill of all tokens. With -prefill N the rows are the logits
// at position N-1 (from a prefill of the first N tokens) followed by the logits of each
// decode step over the remaining tokens. With -generate K it prints {"ids": [...]}: the
// input followed by K greedy tokens (ties to the lowest id). Errors go to stderr with
// exit status 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/dsv4go/dsv4go/dsv4"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h: usage was printed
			return
		}
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
}

func parseTokens(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("-tokens: %q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, errors.New("-tokens: no token ids given")
	}
	return ids, nil
}

func argmax(x []float32) int32 {
	b := 0
	for i, v := range x {
		if v > x[b] {
			b = i
		}
	}
	return int32(b)
}

// run parses args (without the program name), runs the model and writes the JSON
// object to stdout. The usage goes to stderr (-h: flag.ErrHelp; a bad flag:
// its error after the usage).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "checkpoint directory (config.json + safetensors)")
	tokens := fs.String("tokens", "", "comma-separated input token ids")
	prefill := fs.Int("prefill", 0, "prefill the first N tokens, then decode the rest one by one")
	generate := fs.Int("generate", 0, "append K greedy tokens and print the ids")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *model == "" {
		return errors.New("-model is required")
	}
	ids, err := parseTokens(*tokens)
	if err != nil {
		return err
	}
	if *prefill != 0 && *generate != 0 {
		return errors.New("-prefill and -generate are exclusive")
	}
	if *prefill < 0 || *prefill > len(ids) {
		return fmt.Errorf("-prefill %d: want 1..%d", *prefill, len(ids))
	}
	if *generate < 0 {
		return fmt.Errorf("-generate %d: want >= 0", *generate)
	}
	m, err := dsv4.Load(ctx, *model)
	if err != nil {
		return err
	}
	defer m.Close()
	seq := m.NewSequence()
	defer seq.Release()
	enc := json.NewEncoder(stdout)
	switch {
	case *generate > 0:
		lg, err := m.Prefill(ctx, seq, ids)
		if err != nil {
			return err
		}
		out := append([]int32(nil), ids...)
		for k := 0; k < *generate; k++ {
			next := argmax(lg)
			out = append(out, next)
			if k+1 == *generate {
				break
			}
			rows, err := m.Decode(ctx, []*dsv4.Sequence{seq}, []int32{next})
			if err != nil {
				return err
			}
			lg = rows[0]
		}
		return enc.Encode(map[string][]int32{"ids": out})
	case *prefill > 0:
		lg, err := m.Prefill(ctx, seq, ids[:*prefill])
		if err != nil {
			return err
		}
		rows := [][]float32{lg}
		for _, id := range ids[*prefill:] {
			r, err := m.Decode(ctx, []*dsv4.Sequence{seq}, []int32{id})
			if err != nil {
				return err
			}
			rows = append(rows, r[0])
		}
		return enc.Encode(map[string][][]float32{"logits": rows})
	default:
		rows, err := m.PrefillAll(ctx, seq, ids)
		if err != nil {
			return err
		}
		return enc.Encode(map[string][][]float32{"logits": rows})
	}
}
