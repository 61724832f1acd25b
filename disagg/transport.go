package disagg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// Source is the prefill side of a transfer: what a Transport serves. *Rooms
// implements it.
type Source interface {
	// Identity is the model identity of the handoffs.
	Identity() Identity
	// Take waits for room id's handoff (see Rooms.Take); done reports the
	// transfer's outcome.
	Take(ctx context.Context, id uint64) (h *Handoff, done func(error), err error)
	// Abort aborts room id on behalf of the decode side.
	Abort(id uint64, reason string)
}

// Transport moves handoffs from prefill servers to decode servers. The
// decode side pulls: it dials the prefill server's bootstrap address, the
// handshake checks both identities, and Fetch streams one room's handoff.
// GRPCTransport is the default; InProcess moves handoffs inside one process
// without serialization; an RDMA transport (UCX or Mooncake through cgo)
// would implement the same two methods behind a build tag, using the
// bootstrap connection for descriptors and RDMA reads for the payload.
type Transport interface {
	// Serve serves src on lis until ctx ends or lis fails.
	Serve(ctx context.Context, lis net.Listener, src Source) error
	// Dial connects to the prefill server at addr ("host:port") and runs the
	// handshake: it fails with ErrIncompatible if the peer's identity is
	// not compatible with local, ErrUnavailable if it cannot be reached.
	// A DecodeServer bounds what a *GRPCTransport's connections accept by
	// its model (LimitsFor); any other Transport enforces its own bounds
	// (the wire decoder's defaults are DefaultMaxStateBytes, 1 GiB, and
	// DefaultMaxPrompt: set GRPCTransport.Limits, or wrap with care, for
	// larger states).
	Dial(ctx context.Context, addr string, local Identity) (Conn, error)
}

// Conn is a decode server's connection to one prefill server.
type Conn interface {
	// Remote is the prefill server's identity, from the handshake.
	Remote() Identity
	// Fetch returns room id's handoff once the prefill side has it. Errors:
	// ErrAborted (the prefill failed or was cancelled), ErrTimeout,
	// ErrUnavailable (the peer went away: a partial stream gives
	// ErrTruncated), the wire errors, or ctx.Err() — in which case the
	// prefill side has been told to drop the room.
	Fetch(ctx context.Context, id uint64) (*Handoff, error)
	// Abort tells the prefill side to drop room id (also one it has not
	// seen yet: a later prefill request for it then fails).
	Abort(ctx context.Context, id uint64, reason string) error
	// Close releases the connection.
	Close() error
}

// InProcess is a Transport between servers of one process: Fetch hands over
// the prefill side's *Handoff itself (no serialization, no copy). Addresses
// are the listener addresses given to Serve. The zero value is ready to use.
type InProcess struct {
	mu   sync.Mutex
	srcs map[string]Source
}

// Serve registers src under lis.Addr().String() until ctx ends. lis is not
// read.
func (t *InProcess) Serve(ctx context.Context, lis net.Listener, src Source) error {
	if lis == nil || src == nil {
		return errors.New("disagg: Serve needs a listener and a Source")
	}
	addr := lis.Addr().String()
	t.mu.Lock()
	if t.srcs == nil {
		t.srcs = map[string]Source{}
	}
	t.srcs[addr] = src
	t.mu.Unlock()
	<-ctx.Done()
	t.mu.Lock()
	delete(t.srcs, addr)
	t.mu.Unlock()
	return ctx.Err()
}

// Dial finds the source served at addr and checks its identity.
func (t *InProcess) Dial(ctx context.Context, addr string, local Identity) (Conn, error) {
	var src Source
	for i := 0; ; i++ { // Serve may be starting in another goroutine
		t.mu.Lock()
		src = t.srcs[addr]
		t.mu.Unlock()
		if src != nil || i == 50 || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if src == nil {
		return nil, fmt.Errorf("%w: nothing served at %s", ErrUnavailable, addr)
	}
	if err := local.Compatible(src.Identity()); err != nil {
		return nil, err
	}
	life, closeFn := context.WithCancel(context.Background())
	return &inprocConn{src: src, life: life, closeFn: closeFn}, nil
}

// inprocConn is InProcess's Conn. Like a closed *GRPCTransport Conn, after
// Close its Fetch and Abort fail with ErrUnavailable (errConnClosed), and a
// Fetch waiting when Close is called is cancelled (the room is aborted, as a
// gRPC stream's cancellation makes the prefill side do) and fails the same way.
type inprocConn struct {
	src     Source
	life    context.Context // cancelled by Close
	closeFn context.CancelFunc
}

func (c *inprocConn) Remote() Identity { return c.src.Identity() }

// Close closes the connection; it is idempotent and returns nil.
func (c *inprocConn) Close() error {
	c.closeFn()
	return nil
}

func (c *inprocConn) isClosed() bool { return c.life.Err() != nil }

func (c *inprocConn) Abort(_ context.Context, id uint64, reason string) error {
	if c.isClosed() {
		return errConnClosed
	}
	c.src.Abort(id, reason)
	return nil
}

func (c *inprocConn) Fetch(ctx context.Context, id uint64) (*Handoff, error) {
	if c.isClosed() {
		return nil, errConnClosed
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()
	h, done, err := c.src.Take(tctx, id)
	if err != nil {
		if ctx.Err() == nil && c.isClosed() {
			return nil, errConnClosed // closed while it waited
		}
		return nil, err
	}
	done(nil)
	return h, nil
}

// GRPCTransport carries handoffs over gRPC (google.golang.org/grpc): service
// dsv4go.disagg.v1.Bootstrap with a unary Handshake and Abort and a
// server-streaming Fetch whose messages are the wire format's frames (a
// raw-bytes codec, so no protobuf code is generated). HTTP/2 gives flow
// control; keepalive pings every 5 s (10 s timeout) are the heartbeat that
// detects a dead peer mid-transfer.
type GRPCTransport struct {
	// ChunkBytes is the data payload of one frame (DefaultChunkBytes if 0).
	ChunkBytes int
	// Limits bound what the decode side accepts. Fields left unset (≤ 0)
	// take the limits of the dialing DecodeServer (LimitsFor its model and
	// context length), or DefaultMaxStateBytes and DefaultMaxPrompt when
	// Dial is called directly.
	Limits Limits
	// FrameDelay, if set, makes the prefill side sleep before each frame: a
	// slow link for fault tests (kill a server mid-transfer). Zero in
	// production.
	FrameDelay time.Duration
	// OnSent, if set, is called by the prefill side after each transfer
	// with the payload bytes, the time it took and its error.
	OnSent func(bytes int64, d time.Duration, err error)
}

// windowBytes is the HTTP/2 flow-control window of KV streams: large, so a
// transfer is not paced by window updates on high bandwidth-delay paths.
const windowBytes = 32 << 20

const serviceName = "dsv4go.disagg.v1.Bootstrap"

// rawCodec carries frames as they are (a grpc encoding.CodecV2, so no
// protobuf): a message is a frame given as parts (sent without copying) or,
// on receive, handed to sink (a Decoder) before grpc frees its buffers.
type rawCodec struct{}

type rawMsg struct {
	b     []byte
	parts [][]byte
	sink  func([]byte) error // receive side: consume the frame in place
	err   error              // sink's error
}

func (rawCodec) Name() string { return "dsv4raw" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*rawMsg)
	if !ok {
		return nil, fmt.Errorf("disagg: codec: unexpected %T", v)
	}
	if m.parts == nil {
		return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
	}
	out := make(mem.BufferSlice, len(m.parts))
	for i, p := range m.parts {
		out[i] = mem.SliceBuffer(p)
	}
	return out, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMsg)
	if !ok {
		return fmt.Errorf("disagg: codec: unexpected %T", v)
	}
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData() // valid until we return
	} else {
		b = data.Materialize()
	}
	if m.sink != nil {
		m.err = m.sink(b)
		return nil
	}
	m.b = append(m.b[:0], b...)
	return nil
}

type bootstrapService interface{ isBootstrap() }

type grpcServer struct {
	t   *GRPCTransport
	src Source
}

func (*grpcServer) isBootstrap() {}

type fetchReq struct {
	Room   uint64 `json:"room"`
	Config string `json:"config"`
	// Weights is the decode side's weights fingerprint: a Fetch may reach
	// another process than the one the handshake checked (grpc reconnects
	// to whatever serves the address after a restart), so the prefill side
	// checks it again with the config. Empty (an older peer): not checked.
	Weights string `json:"weights,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

var bootstrapDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*bootstrapService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Handshake", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in rawMsg
			if err := dec(&in); err != nil {
				return nil, err
			}
			return srv.(*grpcServer).handshake(in.b)
		}},
		{MethodName: "Abort", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in rawMsg
			if err := dec(&in); err != nil {
				return nil, err
			}
			var r fetchReq
			if err := json.Unmarshal(in.b, &r); err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			srv.(*grpcServer).src.Abort(r.Room, r.Reason)
			return &rawMsg{}, nil
		}},
	},
	Streams: []grpc.StreamDesc{{StreamName: "Fetch", ServerStreams: true, Handler: func(srv any, st grpc.ServerStream) error {
		return srv.(*grpcServer).fetch(st)
	}}},
}

func (s *grpcServer) handshake(b []byte) (any, error) {
	var peer Identity
	if err := json.Unmarshal(b, &peer); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	mine := s.src.Identity()
	if err := mine.Compatible(peer); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	out, _ := json.Marshal(mine)
	return &rawMsg{b: out}, nil
}

func (s *grpcServer) fetch(st grpc.ServerStream) error {
	var in rawMsg
	if err := st.RecvMsg(&in); err != nil {
		return err
	}
	var r fetchReq
	if err := json.Unmarshal(in.b, &r); err != nil {
		return status.Error(codes.Internal, "malformed fetch request: "+err.Error()) // InvalidArgument means a rejected request
	}
	if mine := s.src.Identity(); r.Config != mine.Config {
		return status.Error(codes.FailedPrecondition, "config fingerprint differs")
	} else if r.Weights != "" && r.Weights != mine.Weights {
		return status.Error(codes.FailedPrecondition, "weights fingerprint differs (the prefill server changed since the handshake)")
	}
	ctx := st.Context()
	h, done, err := s.src.Take(ctx, r.Room)
	if err != nil {
		return toStatus(err)
	}
	t0 := time.Now()
	err = NewEncoder(s.src.Identity(), s.t.ChunkBytes).EncodeParts(h, func(parts [][]byte) error {
		if s.t.FrameDelay > 0 {
			select {
			case <-time.After(s.t.FrameDelay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return st.SendMsg(&rawMsg{parts: slices.Clone(parts)})
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	done(err)
	if s.t.OnSent != nil {
		s.t.OnSent(h.Bytes(), time.Since(t0), err)
	}
	return err
}

func toStatus(err error) error {
	switch {
	case errors.Is(err, ErrRejected) && errors.Is(err, dsv4.ErrContextLength):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.Is(err, ErrRejected):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrAborted):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, ErrTimeout):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, ErrRoomInUse):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.OutOfRange: // a rejected request (toStatus)
		return fmt.Errorf("%w: %w: %w (remote: %s)", ErrAborted, ErrRejected, dsv4.ErrContextLength, msg)
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %w: %w (remote: %s)", ErrAborted, ErrRejected, dsv4.ErrInvalidParams, msg)
	case codes.Aborted:
		return fmt.Errorf("%w (remote: %s)", ErrAborted, msg)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%w (remote: %s)", ErrTimeout, msg)
	case codes.AlreadyExists:
		return fmt.Errorf("%w (remote: %s)", ErrRoomInUse, msg)
	case codes.FailedPrecondition:
		return fmt.Errorf("%w (remote: %s)", ErrIncompatible, msg)
	case codes.Canceled:
		return context.Canceled
	case codes.Unimplemented: // not our bootstrap service (another gRPC server, another version)
		return fmt.Errorf("%w: the peer does not serve %s: %s", ErrIncompatible, serviceName, msg)
	case codes.Unavailable, codes.Internal, codes.Unknown:
		return fmt.Errorf("%w: %s", ErrUnavailable, msg)
	}
	return fmt.Errorf("%w: remote error %s: %s", ErrUnavailable, st.Code(), msg) // typed: a 502, not a 500
}

// Serve runs the bootstrap gRPC service for src on lis until ctx ends.
func (t *GRPCTransport) Serve(ctx context.Context, lis net.Listener, src Source) error {
	if lis == nil || src == nil {
		return errors.New("disagg: Serve needs a listener and a Source")
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(MaxFrameBytes+frameOverhead), grpc.MaxSendMsgSize(MaxFrameBytes+frameOverhead),
		grpc.InitialWindowSize(windowBytes), grpc.InitialConnWindowSize(windowBytes),
		grpc.WriteBufferSize(1<<20), grpc.ReadBufferSize(1<<20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 2 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 10 * time.Second}))
	gs.RegisterService(&bootstrapDesc, &grpcServer{t: t, src: src})
	stop := context.AfterFunc(ctx, gs.Stop)
	defer stop()
	err := gs.Serve(lis)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

type grpcConn struct {
	t      *GRPCTransport
	cc     *grpc.ClientConn
	local  Identity
	remote Identity
	lim    Limits // what Fetch's decoder accepts

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// errConnClosed is what Fetch and Abort return on a closed Conn (grpc says
// Canceled, which read as the caller's own ctx having been cancelled).
var errConnClosed = fmt.Errorf("%w: connection closed", ErrUnavailable)

// limitDialer is a Transport whose decode side decodes wire streams: a
// DecodeServer dials through it with the Limits derived from its model.
type limitDialer interface {
	dialLimits(ctx context.Context, addr string, local Identity, lim Limits) (Conn, error)
}

// Dial connects to addr and runs the handshake. Fetch accepts streams within
// t.Limits (unset fields: DefaultMaxStateBytes, DefaultMaxPrompt).
func (t *GRPCTransport) Dial(ctx context.Context, addr string, local Identity) (Conn, error) {
	return t.dialLimits(ctx, addr, local, Limits{})
}

// dialLimits is Dial with lim for the fields t.Limits leaves unset.
func (t *GRPCTransport) dialLimits(ctx context.Context, addr string, local Identity, lim Limits) (Conn, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(MaxFrameBytes+frameOverhead)),
		grpc.WithInitialWindowSize(windowBytes), grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithWriteBufferSize(1<<20), grpc.WithReadBufferSize(1<<20),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	c := &grpcConn{t: t, cc: cc, local: local, lim: t.Limits.or(lim)}
	b, _ := json.Marshal(local)
	var out rawMsg
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cc.Invoke(hctx, "/"+serviceName+"/Handshake", &rawMsg{b: b}, &out, grpc.WaitForReady(false)); err != nil {
		cc.Close()
		return nil, fromStatus(err)
	}
	if err := json.Unmarshal(out.b, &c.remote); err != nil {
		cc.Close()
		return nil, fmt.Errorf("%w: handshake reply: %v", ErrMalformed, err)
	}
	if err := local.Compatible(c.remote); err != nil {
		cc.Close()
		return nil, err
	}
	return c, nil
}

func (c *grpcConn) Remote() Identity { return c.remote }

// Close closes the connection; later calls return nil, and Fetch and Abort
// then fail with ErrUnavailable.
func (c *grpcConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.closeErr = c.cc.Close()
	})
	return c.closeErr
}

func (c *grpcConn) Abort(ctx context.Context, id uint64, reason string) error {
	if c.closed.Load() {
		return errConnClosed
	}
	b, _ := json.Marshal(fetchReq{Room: id, Config: c.local.Config, Reason: reason})
	var out rawMsg
	err := c.cc.Invoke(ctx, "/"+serviceName+"/Abort", &rawMsg{b: b}, &out)
	if err != nil && ctx.Err() == nil && c.closed.Load() {
		return errConnClosed
	}
	return fromStatus(err)
}

var fetchDesc = grpc.StreamDesc{StreamName: "Fetch", ServerStreams: true}

func (c *grpcConn) Fetch(ctx context.Context, id uint64) (*Handoff, error) {
	if c.closed.Load() {
		return nil, errConnClosed
	}
	h, err := c.fetch(ctx, id)
	if err != nil && ctx.Err() == nil && c.closed.Load() {
		return nil, errConnClosed // closed while it ran
	}
	return h, err
}

func (c *grpcConn) fetch(ctx context.Context, id uint64) (*Handoff, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.cc.NewStream(ctx, &fetchDesc, "/"+serviceName+"/Fetch")
	if err != nil {
		return nil, fromStatus(err)
	}
	b, _ := json.Marshal(fetchReq{Room: id, Config: c.local.Config, Weights: c.local.Weights})
	if err := st.SendMsg(&rawMsg{b: b}); err != nil {
		return nil, fromStatus(err)
	}
	if err := st.CloseSend(); err != nil {
		return nil, fromStatus(err)
	}
	d := NewDecoder(c.local, c.lim)
	in := rawMsg{sink: d.Next}
	for {
		err := st.RecvMsg(&in)
		if err == nil && in.err != nil {
			return nil, in.err
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// grpc's own deadline timer may fire before ctx's.
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				return nil, context.DeadlineExceeded
			}
			if errors.Is(err, io.EOF) {
				h, herr := d.Handoff()
				if herr == nil && h.Room != id {
					return nil, fmt.Errorf("%w: got room %d, asked for %d", ErrMalformed, h.Room, id)
				}
				return h, herr
			}
			if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable && d.hd != nil {
				return nil, fmt.Errorf("%w: %w after %d bytes: %s", ErrUnavailable, ErrTruncated, d.off, st.Message())
			} else if ok && st.Code() == codes.ResourceExhausted {
				// grpc refused a message over MaxCallRecvMsgSize (a frame
				// over MaxFrameBytes) from its length prefix, unread.
				return nil, fmt.Errorf("%w: a frame over %d bytes after %d data bytes: %s", ErrTooLarge, MaxFrameBytes, d.off, st.Message())
			}
			return nil, fromStatus(err)
		}
	}
}
