package disagg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestSDKMisuse: what an SDK user building on the transport pieces can get
// wrong gives errors, not panics or misleading ones (each case used to
// panic, hang or blame the caller's ctx):
//   - a Rooms made without NewRooms works (it panicked on a nil map);
//   - Put of a nil handoff is ErrMalformed and leaves the room as it was (it
//     was parked and handed to the decode side as nil);
//   - ModelIdentity of a nil model has no fingerprints and Compatible refuses
//     it (it panicked); after Model.Close it is unchanged (it changed);
//   - Serve without a Source returns at once (it served until a handshake
//     panicked on it);
//   - a GRPCTransport Conn's Fetch and Abort after Close are ErrUnavailable
//     (they were context.Canceled, as if the caller's ctx had ended) and a
//     second Close is nil (grpc's "connection is closing"); an InProcess
//     Conn's are too (they kept working after Close), and a Fetch waiting
//     when it is closed ends so and aborts the room;
//   - NewPrefillServer and NewDecodeServer with a nil Model are errors that
//     wrap dsv4.ErrInvalidParams (they were plain errors.New).
func TestSDKMisuse(t *testing.T) {
	ctx := context.Background()
	a := loadModel(t, ckptA)
	id := ModelIdentity(a, "a")
	h, err := PrefillHandoff(ctx, a, 1, testPrompt(5, a.Config().VocabSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
	}{
		{"zero Rooms", func() error {
			var rs Rooms
			rs.BootstrapTimeout = 50 * time.Millisecond
			if err := rs.Open(1); err != nil {
				return err
			}
			if err := rs.Put(1, h); err != nil {
				return err
			}
			got, done, err := rs.Take(ctx, 1)
			if err != nil || got != h {
				return errors.New("Take did not return the handoff")
			}
			done(nil)
			if err := rs.Wait(ctx, 1); err != nil {
				return err
			}
			rs.Abort(2, "never opened") // tombstones on the nil map
			if err := rs.Open(2); !errors.Is(err, ErrAborted) {
				return errors.New("aborted room reopened")
			}
			return nil
		}},
		{"Put nil", func() error {
			rs := NewRooms(id)
			if err := rs.Open(3); err != nil {
				return err
			}
			for _, bad := range []*Handoff{nil, {Room: 3}} {
				if err := rs.Put(3, bad); !errors.Is(err, ErrMalformed) {
					return errors.New("nil handoff not refused with ErrMalformed")
				}
			}
			if c := rs.Counts(); c[RoomPrefilling] != 1 {
				return errors.New("room changed by a refused Put")
			}
			return rs.Put(3, h)
		}},
		{"ModelIdentity nil", func() error {
			z := ModelIdentity(nil, "x")
			if z.Compatible(z) == nil || z.Compatible(id) == nil || id.Compatible(z) == nil || !errors.Is(z.Compatible(id), ErrIncompatible) {
				return errors.New("an identity without fingerprints is compatible")
			}
			return id.Compatible(id)
		}},
		{"ModelIdentity after Close", func() error {
			// The weights fingerprint read the mapped norms, which Close
			// unmaps: a closed model's identity was incompatible with its
			// own (and two closed models of different trainings matched).
			m := loadModel(t, ckptA)
			before := ModelIdentity(m, "a")
			if before.Weights != id.Weights || before.Weights == "" {
				return errors.New("two loads of one checkpoint differ")
			}
			m.Close()
			if err := ModelIdentity(m, "a").Compatible(before); err != nil {
				return err
			}
			other := loadModel(t, ckptOther)
			wo := ModelIdentity(other, "o").Weights
			other.Close()
			if wo == before.Weights || ModelIdentity(other, "o").Weights != wo {
				return errors.New("another checkpoint's fingerprint equals, or changed at Close")
			}
			return nil
		}},
		{"nil Handoff and Worker accessors", func() error {
			var w *Worker
			if (*Handoff)(nil).Bytes() != 0 || w.InFlight() != 0 || w.Healthy() {
				return errors.New("nil accessors")
			}
			return nil
		}},
		{"Serve nil source", func() error {
			for _, tr := range []Transport{&GRPCTransport{}, &InProcess{}} {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				done := make(chan error, 1)
				go func() { done <- tr.Serve(ctx, lis, nil) }()
				select {
				case err := <-done:
					if err == nil {
						return errors.New("Serve(nil) returned nil")
					}
				case <-time.After(5 * time.Second):
					return errors.New("Serve(nil) did not return")
				}
				lis.Close()
			}
			return nil
		}},
		{"Conn after Close", func() error {
			for _, tr := range []Transport{&GRPCTransport{}, &InProcess{}} {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				sctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go tr.Serve(sctx, lis, NewRooms(id))
				c, err := tr.Dial(ctx, lis.Addr().String(), id)
				if err != nil {
					return err
				}
				if err := c.Close(); err != nil {
					return err
				}
				if err := c.Close(); err != nil {
					return fmt.Errorf("%T: second Close: %v", tr, err)
				}
				if _, err := c.Fetch(ctx, 1); !errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) {
					return fmt.Errorf("%T: Fetch after Close: %s", tr, errString(err))
				}
				if err := c.Abort(ctx, 1, "x"); !errors.Is(err, ErrUnavailable) {
					return fmt.Errorf("%T: Abort after Close: %s", tr, errString(err))
				}
			}
			return nil
		}},
		{"InProcess Close during Fetch", func() error {
			// A Fetch waiting for a room when its Conn is closed ends with
			// ErrUnavailable (it waited until the room's timeout), and the
			// room is aborted, as a cancelled gRPC stream leaves it.
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			defer lis.Close()
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			rs := NewRooms(id)
			tr := &InProcess{}
			go tr.Serve(sctx, lis, rs)
			c, err := tr.Dial(ctx, lis.Addr().String(), id)
			if err != nil {
				return err
			}
			done := make(chan error, 1)
			go func() { _, err := c.Fetch(ctx, 7); done <- err }()
			for rs.Counts()[RoomBootstrapping] == 0 {
				time.Sleep(time.Millisecond)
			}
			c.Close()
			select {
			case err := <-done:
				if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) {
					return errors.New("Fetch closed while waiting: " + errString(err))
				}
			case <-time.After(5 * time.Second):
				return errors.New("Fetch still waiting 5 s after Close")
			}
			if err := rs.Open(7); err == nil {
				return errors.New("the room was not aborted")
			}
			return nil
		}},
		{"servers with a nil Model", func() error {
			if _, err := NewPrefillServer(PrefillConfig{}); !errors.Is(err, dsv4.ErrInvalidParams) {
				return errors.New("NewPrefillServer: " + errString(err))
			}
			if _, err := NewDecodeServer(DecodeConfig{}); !errors.Is(err, dsv4.ErrInvalidParams) {
				return errors.New("NewDecodeServer: " + errString(err))
			}
			if _, err := NewPrefillServer(PrefillConfig{Model: a, MaxBodyBytes: -1}); !errors.Is(err, dsv4.ErrInvalidParams) {
				return errors.New("NewPrefillServer MaxBodyBytes -1: " + errString(err))
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
