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
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/dsv4go/dsv4go/dsv4/convert"
	"github.com/schollz/progressbar/v3"
)

func main() {
	experts := flag.String("experts", "mxfp4", "routed expert format: mxfp4 (DeepSeek) or nvfp4 (NVIDIA ModelOpt)")
	shard := flag.Int64("shard-bytes", convert.DefaultMaxShardBytes, "maximum bytes per output shard")
	inputScale := flag.Float64("input-scale", 0, "NVFP4 activation input_scale to record (0: omit)")
	quiet := flag.Bool("q", false, "no progress bar")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: convert [flags] SRC_DIR DST_DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := convert.Options{
		Experts:         convert.ExpertFormat(*experts),
		MaxShardBytes:   *shard,
		NVFP4InputScale: float32(*inputScale),
	}
	if !*quiet {
		var bar *progressbar.ProgressBar
		opts.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetDescription("converting"),
					progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount())
			}
			bar.Set(done)
		}
	}
	if err := convert.Convert(ctx, flag.Arg(0), flag.Arg(1), opts); err != nil {
		fmt.Fprintln(os.Stderr, "\nconvert:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "\nwrote %s\n", flag.Arg(1))
}
