package disagg_test

import (
	"context"
	"fmt"
	"net"

	"github.com/dsv4go/dsv4go/disagg"
	"github.com/dsv4go/dsv4go/dsv4"
)

// A prefill side parks a request's state in a room; a decode side fetches it
// over gRPC after the compatibility handshake and restores it.
func Example() {
	ctx := context.Background()
	pm, _ := dsv4.Load(ctx, "../dsv4/testdata/ckpt_hf_bf16")
	dm, _ := dsv4.Load(ctx, "../dsv4/testdata/ckpt_hf_bf16")

	// Prefill side: rooms served on a bootstrap port.
	rooms := disagg.NewRooms(disagg.ModelIdentity(pm, "tiny"))
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	tr := &disagg.GRPCTransport{}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go tr.Serve(sctx, lis, rooms)
	const room = 42
	rooms.Open(room)
	h, _ := disagg.PrefillHandoff(ctx, pm, room, []int32{3, 10, 17, 24, 31}, nil)
	rooms.Put(room, h)

	// Decode side.
	conn, err := tr.Dial(ctx, lis.Addr().String(), disagg.ModelIdentity(dm, "tiny"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	got, err := conn.Fetch(ctx, room)
	if err != nil {
		fmt.Println(err)
		return
	}
	seq, _ := dm.Restore(got.State)
	fmt.Println(seq.Len(), got.FirstToken == h.FirstToken, rooms.Wait(ctx, room))
	// Output: 5 true <nil>
}
