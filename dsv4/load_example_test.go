package dsv4_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsv4go/dsv4go/dsv4"
)

func ExampleOpenCheckpoint() {
	// Metadata only: shards are memory-mapped, weights are typed and validated.
	ck, err := dsv4.OpenCheckpoint(context.Background(), "testdata/ckpt_fp8_mxfp4",
		dsv4.WithProgress(func(p dsv4.Progress) {
			if p.Done == p.Total {
				fmt.Printf("%s: %d/%d\n", p.Stage, p.Done, p.Total)
			}
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ck.Close()
	for _, l := range ck.Weights().Layers {
		fmt.Println(l.Index, l.Type, l.MLPType, l.Attn.QBProj.Format, l.MLP.Experts[0].Down.Format)
	}
	// Output:
	// open: 1/1
	// bind: 3/3
	// 0 sliding_attention hash_moe fp8-block mxfp4
	// 1 compressed_sparse_attention moe fp8-block mxfp4
	// 2 heavily_compressed_attention moe fp8-block mxfp4
}

func ExampleTensor_Float32() {
	ck, err := dsv4.OpenCheckpoint(context.Background(), "testdata/ckpt_nvfp4")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ck.Close()
	up := ck.Weights().Layers[1].MLP.Experts[2].Up // NVFP4: E2M1 x (E4M3 per 16 x F32 global)
	w, err := up.Float32()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(up.Name, up.Format, up.Shape, len(w))
	// Output:
	// layers.1.ffn.experts.2.w3.weight nvfp4 [32 128] 4096
}

func ExampleParseConfig() {
	c, err := dsv4.ParseConfig([]byte(`{"dim": 4096, "n_layers": 4, "n_heads": 64,
		"compress_ratios": [0, 4, 128, 4, 0], "n_hash_layers": 1, "rope_factor": 16, "original_seq_len": 65536}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.HiddenSize, c.LayerTypes, c.MLPLayerTypes, c.RopeCompress.RopeType, c.RopeCompress.Factor)

	_, err = dsv4.ParseConfig([]byte(`{"n_layers": 2, "compress_ratios": [0, 3]}`))
	var ce *dsv4.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output:
	// 4096 [sliding_attention compressed_sparse_attention heavily_compressed_attention compressed_sparse_attention] [hash_moe moe moe moe] yarn 16
	// true compress_ratios[1]
}
