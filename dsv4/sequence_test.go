package dsv4

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

func TestGreedyGolden(t *testing.T) {
	for _, name := range goldenConfigs {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "forward", name)
			g := readGolden(t, dir)
			n := testNet(t, dir)
			st := n.newState()
			ctx := context.Background()
			lg, err := n.forward(ctx, []segment{{&st, g.GreedyPrompt}}, false)
			if err != nil {
				t.Fatal(err)
			}
			ids := slices.Clone(g.GreedyPrompt)
			for len(ids) < len(g.Greedy) {
				next := argmax(lg[0])
				ids = append(ids, next)
				if len(ids) == len(g.Greedy) {
					break
				}
				if lg, err = n.forward(ctx, []segment{{&st, []int32{next}}}, false); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(ids, g.Greedy) {
				t.Fatalf("greedy ids\n got %v\nwant %v", ids, g.Greedy)
			}
		})
	}
}

// TestBatchedDecodeMixedLengths steps three sequences of different lengths in one
// forward and checks each against stepping it alone.
func TestBatchedDecodeMixedLengths(t *testing.T) {
	dir := filepath.Join("testdata", "forward", "mixed-hc4-yarn")
	g := readGolden(t, dir)
	n := testNet(t, dir)
	ctx := context.Background()
	lens := []int{3, 17, 30}
	mk := func() []*SequenceState {
		var sts []*SequenceState
		for _, l := range lens {
			st := n.newState()
			if _, err := n.forward(ctx, []segment{{&st, g.Tokens[:l]}}, false); err != nil {
				t.Fatal(err)
			}
			sts = append(sts, &st)
		}
		return sts
	}
	batched, alone := mk(), mk()
	for step := 0; step < 6; step++ {
		var segs []segment
		for i, st := range batched {
			segs = append(segs, segment{st, []int32{g.Tokens[lens[i]+step]}})
		}
		got, err := n.forward(ctx, segs, false)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range alone {
			want, err := n.forward(ctx, []segment{{st, []int32{g.Tokens[lens[i]+step]}}}, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[i], want[0]) {
				t.Fatalf("step %d seq %d: batched logits differ from single", step, i)
			}
			// and both match the oracle's full forward at that position
			if d := maxDiff(t, got[i:i+1], g.Full[lens[i]+step:lens[i]+step+1]); d > goldenTol {
				t.Fatalf("step %d seq %d: |Δ| %g vs oracle", step, i, d)
			}
		}
	}
}

func TestSnapshotRestoreAndBytes(t *testing.T) {
	dir := filepath.Join("testdata", "forward", "mixed-hc4-yarn")
	g := readGolden(t, dir)
	n := testNet(t, dir)
	ctx := context.Background()
	st := n.newState()
	s := &Sequence{net: n, st: st}
	for i, id := range g.Tokens[:20] {
		if _, err := n.forward(ctx, []segment{{&s.st, []int32{id}}}, false); err != nil {
			t.Fatal(err)
		}
		if got, want := s.Bytes(), n.sequenceBytes(i+1); got != want {
			t.Fatalf("after %d tokens: Bytes %d, sequenceBytes %d", i+1, got, want)
		}
		if err := n.validate(&s.st); err != nil {
			t.Fatalf("after %d tokens: %v", i+1, err)
		}
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// continue the original; the snapshot must not change
	before := snap.Bytes()
	a, err := n.forward(ctx, []segment{{&s.st, g.Tokens[20:25]}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Bytes() != before || snap.Position != 20 {
		t.Fatal("snapshot changed with the sequence")
	}
	if err := n.validate(snap); err != nil {
		t.Fatal(err)
	}
	r := snap.clone()
	b, err := n.forward(ctx, []segment{{r, g.Tokens[20:25]}}, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			t.Fatalf("row %d: restored sequence diverges", i)
		}
	}
	// corrupted states are rejected
	bad := []func(*SequenceState){
		func(x *SequenceState) { x.Position++ },
		func(x *SequenceState) { x.Layers = x.Layers[1:] },
		func(x *SequenceState) { x.Layers[0].Window = x.Layers[0].Window[1:] },
		func(x *SequenceState) { x.Layers[1].Compressor.Entries = nil },
		func(x *SequenceState) { x.Layers[1].Indexer = nil },
		func(x *SequenceState) { x.Layers[1].Compressor.OverlapKV = nil },
		func(x *SequenceState) { x.Layers[2].Type = LayerCSA },
		func(x *SequenceState) { x.Layers[2].Compressor.Width++ },
	}
	for i, f := range bad {
		c := snap.clone()
		f(c)
		if err := n.validate(c); !errors.Is(err, ErrSequence) {
			t.Errorf("corruption %d: validate = %v, want ErrSequence", i, err)
		}
	}
}

// TestIndexerTies: with 2 indexer heads ReLU makes many indexer scores exactly 0. The
// oracle's torch.topk then picks different entries in its own batched and incremental
// paths (recorded in the golden); Go breaks ties towards the lower entry index in every
// path, so its full, incremental and chunked logits agree.
func TestIndexerTies(t *testing.T) {
	dir := filepath.Join("testdata", "forward", "ties")
	g := readGolden(t, dir)
	if g.IndexTies == 0 {
		t.Fatal("the ties golden has no exact indexer ties")
	}
	n := testNet(t, dir)
	L := len(g.Tokens)
	full := runNet(t, n, g.Tokens, []int{L})
	inc := []int{g.Prefill}
	for i := g.Prefill; i < L; i++ {
		inc = append(inc, 1)
	}
	incl := runNet(t, n, g.Tokens, inc)
	ch := runNet(t, n, g.Tokens, g.Chunks)
	var dInc, dCh float64
	for i := range full {
		for j := range full[i] {
			dInc = math.Max(dInc, math.Abs(float64(full[i][j]-incl[i][j])))
			dCh = math.Max(dCh, math.Abs(float64(full[i][j]-ch[i][j])))
		}
	}
	t.Logf("oracle self-disagreement: incremental %.3g, chunked %.3g; Go: %.3g, %.3g", g.OracleIncrementalVsFull, g.OracleChunkedVsFull, dInc, dCh)
	if dInc > 1e-5 || dCh > 1e-5 {
		t.Fatalf("Go paths disagree under ties: incremental %g, chunked %g", dInc, dCh)
	}
	// the selection itself: equal scores go to the lower index
	x := &indexer{nh: 1, hd: 2, topk: 2}
	idx := make([]int32, 2)
	sc := make([]float32, 4)
	keys := []float32{-1, 0, 1, 0, -2, 0, 1, 0} // scores: 0, 1/√2, 0, 1/√2
	k := x.selectTopK(idx, sc, []float32{1, 0}, []float32{1}, keys, 4, 1)
	if k != 2 || idx[0] != 1 || idx[1] != 3 {
		t.Fatalf("tie order: %v", idx[:k])
	}
	keys = []float32{-1, 0, -1, 0, -2, 0, 1, 0} // scores: 0, 0, 0, 1/√2
	k = x.selectTopK(idx, sc, []float32{1, 0}, []float32{1}, keys, 4, 1)
	if k != 2 || idx[0] != 3 || idx[1] != 0 {
		t.Fatalf("tie order: %v", idx[:k])
	}
}

// TestStateBytesFlash logs the per-request KV state of V4-Flash (the config defaults)
// at a few lengths; the README quotes these figures.
func TestStateBytesFlash(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	for _, n := range []int{1, 128, 1024, 8192, 65536, 1 << 20} {
		b := StateBytes(cfg, n)
		if b <= prev {
			t.Fatalf("StateBytes not increasing at %d", n)
		}
		prev = b
		t.Logf("V4-Flash state after %7d tokens: %12d bytes (%.2f MiB)", n, b, float64(b)/(1<<20))
	}
}

// TestIndexerSplitScoring: spreading one query's scoring over goroutines (long
// contexts) selects exactly what the serial scoring selects.
func TestIndexerSplitScoring(t *testing.T) {
	x := &indexer{nh: 4, hd: 8, topk: 37}
	r := rand.New(rand.NewPCG(9, 10))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const valid = 1500
	q, w, keys := rnd(4*8), rnd(4), rnd(valid*8)
	a, b := make([]int32, 37), make([]int32, 37)
	na := x.selectTopK(a, make([]float32, valid), q, w, keys, valid, 1)
	nb := x.selectTopK(b, make([]float32, valid), q, w, keys, valid, 3)
	if na != 37 || nb != 37 || !slices.Equal(a, b) {
		t.Fatalf("serial %v (%d) != split %v (%d)", a, na, b, nb)
	}
}
