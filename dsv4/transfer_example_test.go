package dsv4_test

import (
	"context"
	"fmt"

	"github.com/dsv4go/dsv4go/dsv4"
)

// Move a prefilled request from a prefill engine's model to a decode
// engine's model in the same process: the state changes owner, nothing is
// copied.
func ExampleTransferKV() {
	ctx := context.Background()
	prefill, _ := dsv4.Load(ctx, "testdata/ckpt_hf_bf16")
	decode, _ := dsv4.Load(ctx, "testdata/ckpt_hf_bf16")
	seq := prefill.NewSequence()
	logits, _ := prefill.Prefill(ctx, seq, []int32{3, 10, 17, 24, 31})
	moved, err := dsv4.TransferKV(ctx, seq, decode)
	if err != nil {
		fmt.Println(err)
		return
	}
	next := int32(0)
	for i, v := range logits {
		if v > logits[next] {
			next = int32(i)
		}
	}
	out, _ := decode.Decode(ctx, []*dsv4.Sequence{moved}, []int32{next})
	fmt.Println(seq.Len(), moved.Len(), len(out[0]))
	// Output: 0 6 128
}
