// Command inspect prints a summary of a DeepSeek-V4 checkpoint directory:
// the configuration, every layer's attention and MoE type with the storage
// form of its weights, and parameter counts and bytes by dtype and by
// weight form. Only metadata is read (the shards are memory-mapped), so it
// takes seconds even on the 160 GB V4-Flash checkpoint.
//
//	go run ./examples/inspect dsv4/testdata/ckpt_fp8_mxfp4
//
// A progress bar (github.com/schollz/progressbar: a maintained terminal
// progress bar, rather than one written here) follows dsv4's WithProgress
// callback on stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/schollz/progressbar/v3"
)

func main() {
	quiet := flag.Bool("q", false, "no progress bar (it is drawn only when stderr is a terminal)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: inspect [-q] CHECKPOINT_DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, flag.Arg(0), !*quiet && isTerminal(os.Stderr)); err != nil {
		fmt.Fprintln(os.Stderr, "inspect:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, dir string, bar bool) error {
	var opts []dsv4.Option
	if bar {
		var pb *progressbar.ProgressBar
		var stage string
		opts = append(opts, dsv4.WithProgress(func(p dsv4.Progress) {
			if p.Stage != stage || pb == nil {
				if pb != nil {
					pb.Finish()
				}
				stage = p.Stage
				desc := map[string]string{dsv4.StageOpen: "opening shards", dsv4.StageBind: "binding layers"}[p.Stage]
				pb = progressbar.NewOptions64(p.Total, progressbar.OptionSetDescription(desc),
					progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish())
			}
			pb.Set64(p.Done)
			if p.Done == p.Total {
				pb.Finish()
			}
		}))
	}
	ck, err := dsv4.OpenCheckpoint(ctx, dir, opts...)
	if err != nil {
		return err
	}
	defer ck.Close()
	summarize(w, ck)
	return nil
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func count(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func summarize(w io.Writer, ck *dsv4.Checkpoint) {
	c := ck.Config()
	fmt.Fprintf(w, "checkpoint  %s\n", ck.Dir())
	fmt.Fprintf(w, "model       %s  hidden %d, %d layers, %d heads x %d (rope %d), q_lora %d, o_groups %d x %d\n",
		or(c.ModelType, "deepseek_v4"), c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.HeadDim, c.QKRopeHeadDim, c.QLoraRank, c.OGroups, c.OLoraRank)
	fmt.Fprintf(w, "moe         %d routed experts (top %d, %s, scale %g) + %d shared, width %d\n",
		c.NRoutedExperts, c.NumExpertsPerTok, c.ScoringFunc, c.RoutedScalingFactor, c.NSharedExperts, c.MoEIntermediateSize)
	fmt.Fprintf(w, "attention   sliding window %d; CSA rate %d, HCA rate %d; indexer %d heads x %d, top %d; mHC x%d\n",
		c.SlidingWindow, c.CompressRateCSA, c.CompressRateHCA, c.IndexNHeads, c.IndexHeadDim, c.IndexTopK, c.HCMult)
	fmt.Fprintf(w, "rope        main theta %g; compress theta %g (%s", c.RopeMain.RopeTheta, c.RopeCompress.RopeTheta, c.RopeCompress.RopeType)
	if c.RopeCompress.RopeType == "yarn" {
		fmt.Fprintf(w, " x%g from %d", c.RopeCompress.Factor, c.RopeCompress.OriginalMaxPositionEmbeddings)
	}
	fmt.Fprintf(w, "); vocab %d; context %d\n", c.VocabSize, c.MaxPositionEmbeddings)
	if q := c.Quantization; q != nil {
		fmt.Fprintf(w, "quant       %s %s blocks %v scale %s", q.QuantMethod, q.Fmt, q.WeightBlockSize, or(q.ScaleFmt, "f32"))
		if q.MoEQuantAlgo != "" {
			fmt.Fprintf(w, "; experts %s", q.MoEQuantAlgo)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "\nlayers")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tattention\trate\tmlp\tattn weights\texperts\tparams")
	wts := ck.Weights()
	for _, l := range wts.Layers {
		var params int64
		for _, x := range layerTensors(wts, l.Index) {
			params += int64(x.NumElements())
		}
		expertForm := "-"
		if len(l.MLP.Experts) > 0 && l.MLP.Experts[0].Gate != nil {
			expertForm = l.MLP.Experts[0].Gate.Format.String()
		}
		attnForm := "-"
		if l.Attn.QAProj != nil {
			attnForm = l.Attn.QAProj.Format.String()
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%d x %s\t%s\n", l.Index, l.Type, l.CompressRate, l.MLPType, attnForm, len(l.MLP.Experts), expertForm, count(params))
	}
	tw.Flush()

	type agg struct {
		tensors int
		elems   int64
		bytes   int64
	}
	byDType := map[string]*agg{}
	var totalBytes int64
	for _, ti := range ck.TensorInfos() {
		a := byDType[string(ti.DType)]
		if a == nil {
			a = &agg{}
			byDType[string(ti.DType)] = a
		}
		n := int64(1)
		for _, d := range ti.Shape {
			n *= int64(d)
		}
		a.tensors++
		a.elems += n
		a.bytes += ti.Bytes
		totalBytes += ti.Bytes
	}
	fmt.Fprintln(w, "\nstored tensors by dtype (packed FP4: 2 values per I8/U8 element)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dtype\ttensors\telements\tbytes\t")
	for _, k := range sortedKeys(byDType) {
		a := byDType[k]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", k, a.tensors, count(a.elems), human(a.bytes))
	}
	tw.Flush()

	byForm := map[string]*agg{}
	var params int64
	wts.Tensors(func(name string, t *dsv4.Tensor) error {
		key := t.Format.String()
		if t.Format == dsv4.FormatFloat || t.Format == dsv4.FormatInt {
			key += " " + string(t.DType)
		}
		a := byForm[key]
		if a == nil {
			a = &agg{}
			byForm[key] = a
		}
		a.tensors++
		a.elems += int64(t.NumElements())
		a.bytes += t.Bytes()
		params += int64(t.NumElements())
		return nil
	})
	fmt.Fprintln(w, "\nmodel weights by storage form (parameters = dequantized elements; bytes include scales)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "form\ttensors\tparameters\tbytes\t")
	for _, k := range sortedKeys(byForm) {
		a := byForm[k]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", k, a.tensors, count(a.elems), human(a.bytes))
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal: %s parameters in the main model (%d MTP tensors besides), %s on disk in %d tensors\n",
		count(params), len(wts.MTP), human(totalBytes), len(ck.TensorInfos()))
}

// layerTensors lists the tensors of layer i.
func layerTensors(w *dsv4.Weights, i int) []*dsv4.Tensor {
	var out []*dsv4.Tensor
	prefix := fmt.Sprintf("layers.%d.", i)
	w.Tensors(func(name string, t *dsv4.Tensor) error {
		if strings.HasPrefix(name, prefix) {
			out = append(out, t)
		}
		return nil
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// isTerminal reports whether f is a character device (a terminal), where a
// redrawn progress bar makes sense; pipes and files get no bar.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
