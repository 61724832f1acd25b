package disagg

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// cutListener's connections die after writing limit bytes (a prefill server
// killed mid-transfer).
type cutListener struct {
	net.Listener
	limit int64
}

func (l cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, left: l.limit}, nil
}

type cutConn struct {
	net.Conn
	left int64
}

func (c *cutConn) Write(b []byte) (int, error) {
	if atomic.AddInt64(&c.left, -int64(len(b))) < 0 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func serve(t *testing.T, tr Transport, lis net.Listener, src Source) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Serve(ctx, lis, src) }()
	t.Cleanup(func() { cancel(); <-done })
	return lis.Addr().String()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

func TestTransports(t *testing.T) {
	ctx := context.Background()
	a, b := loadModel(t, ckptA), loadModel(t, ckptA)
	ida, idb := ModelIdentity(a, "a"), ModelIdentity(b, "b")
	prompt := testPrompt(30, a.Config().VocabSize)
	for _, tc := range []struct {
		name string
		tr   Transport
	}{{"grpc", &GRPCTransport{ChunkBytes: 512}}, {"inprocess", &InProcess{}}} {
		t.Run(tc.name, func(t *testing.T) {
			rooms := NewRooms(ida)
			addr := serve(t, tc.tr, listen(t), rooms)
			conn, err := tc.tr.Dial(ctx, addr, idb)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Concurrent dispatch: decode asks before prefill starts.
			got := make(chan *Handoff, 1)
			errc := make(chan error, 1)
			go func() {
				h, err := conn.Fetch(ctx, 7)
				got <- h
				errc <- err
			}()
			time.Sleep(20 * time.Millisecond)
			if err := rooms.Open(7); err != nil {
				t.Fatal(err)
			}
			h, err := PrefillHandoff(ctx, a, 7, prompt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := rooms.Put(7, h); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			hh := <-got
			if err := rooms.Wait(ctx, 7); err != nil {
				t.Fatalf("prefill side outcome: %v", err)
			}
			if !slices.Equal(hh.Prompt, prompt) || !slices.Equal(hh.Logits, h.Logits) {
				t.Fatal("handoff differs")
			}
			seq, err := b.Restore(hh.State)
			if err != nil {
				t.Fatal(err)
			}
			ref := a.NewSequence()
			a.Prefill(ctx, ref, prompt)
			l1, _ := a.Decode(ctx, []*dsv4.Sequence{ref}, []int32{5})
			l2, _ := b.Decode(ctx, []*dsv4.Sequence{seq}, []int32{5})
			if !slices.Equal(l1[0], l2[0]) {
				t.Fatal("decode after transfer differs from decode in place")
			}
			// Fetching a finished room fails.
			if _, err := conn.Fetch(ctx, 7); !errors.Is(err, ErrAborted) && !errors.Is(err, ErrRoomInUse) {
				t.Fatalf("second fetch: %v", err)
			}
			// Abort decode → prefill: a cancelled fetch drops the room, and
			// the prefill request that comes later is refused.
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			if _, err := conn.Fetch(cctx, 8); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch with deadline: %v", err)
			}
			cancel()
			waitFor(t, func() bool { return rooms.Live() == 0 })
			if err := rooms.Open(8); !errors.Is(err, ErrAborted) {
				t.Fatalf("open after decode abort: %v", err)
			}
			if err := conn.Abort(ctx, 9, "client gone"); err != nil {
				t.Fatal(err)
			}
			if err := rooms.Open(9); !errors.Is(err, ErrAborted) {
				t.Fatalf("open after explicit abort: %v", err)
			}
			// Abort prefill → decode.
			rooms.Open(10)
			go func() { time.Sleep(20 * time.Millisecond); rooms.Fail(10, errors.New("prefill cancelled")) }()
			if _, err := conn.Fetch(ctx, 10); !errors.Is(err, ErrAborted) {
				t.Fatalf("fetch of failed room: %v", err)
			}
			if rooms.Live() != 0 {
				t.Fatalf("%d live rooms", rooms.Live())
			}
		})
	}
}

func waitFor(t *testing.T, f func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached in 5 s")
}

func TestTransportFaults(t *testing.T) {
	ctx := context.Background()
	a := loadModel(t, ckptA)
	id := ModelIdentity(a, "a")
	tr := &GRPCTransport{ChunkBytes: 1024}
	// Mismatched pair refused at connect.
	rooms := NewRooms(id)
	addr := serve(t, tr, listen(t), rooms)
	other := ModelIdentity(loadModel(t, ckptOther), "o")
	if _, err := tr.Dial(ctx, addr, other); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("mismatched dial: %v", err)
	}
	if _, err := (&InProcess{}).Dial(ctx, addr, other); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("in-process dial of nothing: %v", err)
	}
	// Nobody listening.
	lis := listen(t)
	dead := lis.Addr().String()
	lis.Close()
	if _, err := tr.Dial(ctx, dead, id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("dial of closed port: %v", err)
	}
	// Prefill killed mid-transfer: the stream breaks after ~half the bytes.
	h, err := PrefillHandoff(ctx, a, 3, testPrompt(200, a.Config().VocabSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	rooms2 := NewRooms(id)
	addr2 := serve(t, tr, cutListener{listen(t), h.Bytes() / 2}, rooms2)
	conn, err := tr.Dial(ctx, addr2, id)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rooms2.Open(3)
	rooms2.Put(3, h)
	if _, err := conn.Fetch(ctx, 3); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("killed mid-transfer: %v", err)
	}
	waitFor(t, func() bool { return rooms2.Live() == 0 })
	// Lease expiry frees a handoff nobody fetched.
	rooms3 := NewRooms(id)
	rooms3.Lease = 30 * time.Millisecond
	rooms3.Open(4)
	rooms3.Put(4, h)
	if err := rooms3.Wait(ctx, 4); !errors.Is(err, ErrTimeout) {
		t.Fatalf("lease: %v", err)
	}
	rooms3.BootstrapTimeout = 30 * time.Millisecond
	if _, _, err := rooms3.Take(ctx, 5); !errors.Is(err, ErrTimeout) {
		t.Fatalf("bootstrap timeout: %v", err)
	}
	if rooms3.Live() != 0 {
		t.Fatal("rooms leaked")
	}
}
