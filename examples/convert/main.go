// Command convert quantizes a DeepSeek-V4 checkpoint without Python: it
// reads any checkpoint dsv4 loads (HF float, DeepSeek FP8/MXFP4, NVIDIA
// NVFP4) and writes DeepSeek's upstream layout with FP8 128x128-block dense
// weights and MXFP4 or NVFP4 routed experts (package dsv4/convert).
//
//	go run ./examples/convert -experts nvfp4 dsv4/testdata/ckpt_hf_bf16 /tmp/tiny-nvfp4
//	go run ./examples/inspect /tmp/tiny-nvfp4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/dsv4go/dsv4go/dsv4/convert"
	"github.com/schollz/progressbar/v3"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run parses args, converts, and returns the exit status (2: usage).
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	experts := fs.String("experts", "mxfp4", "routed expert format: mxfp4 (DeepSeek) or nvfp4 (NVIDIA ModelOpt)")
	shard := fs.Int64("shard-bytes", convert.DefaultMaxShardBytes, "maximum bytes per output shard")
	inputScale := fs.Float64("input-scale", 0, "NVFP4 activation input_scale to record (0: omit)")
	quiet := fs.Bool("q", false, "no progress bar (it is drawn only when stderr is a terminal)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: convert [flags] SRC_DIR DST_DIR\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h: usage was printed
		}
		if err == nil {
			fs.Usage()
		}
		return 2
	}
	opts := convert.Options{
		Experts:         convert.ExpertFormat(*experts),
		MaxShardBytes:   *shard,
		NVFP4InputScale: float32(*inputScale),
	}
	nl := "" // ends the bar's line before the next message
	if !*quiet && isTerminal(stderr) {
		nl = "\n"
		var bar *progressbar.ProgressBar
		opts.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetDescription("converting"),
					progressbar.OptionSetWriter(stderr), progressbar.OptionShowCount())
			}
			bar.Set(done)
		}
	}
	if err := convert.Convert(ctx, fs.Arg(0), fs.Arg(1), opts); err != nil {
		fmt.Fprint(stderr, nl+"convert: ", err, "\n")
		return 1
	}
	fmt.Fprintf(stderr, "%swrote %s\n", nl, fs.Arg(1))
	return 0
}

// isTerminal reports whether w is a character device (a terminal), where a
// redrawn progress bar makes sense; pipes and files get no bar.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
