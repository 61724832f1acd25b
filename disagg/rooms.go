package disagg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Errors of the per-room protocol.
var (
	// ErrAborted: the room was aborted by the other side (the prefill request
	// was cancelled or failed, or the decode side gave up).
	ErrAborted = errors.New("disagg: room aborted")
	// ErrTimeout: a room waited longer than its timeout or lease.
	ErrTimeout = errors.New("disagg: room timed out")
	// ErrRoomInUse: a request reused a live room id.
	ErrRoomInUse = errors.New("disagg: room id already in use")
	// ErrUnavailable: the peer could not be reached or went away mid-transfer.
	ErrUnavailable = errors.New("disagg: peer unavailable")
	// ErrRejected: the prefill server refused the request itself (a
	// validation error such as dsv4.ErrContextLength or
	// dsv4.ErrInvalidParams, which the error wraps too) and failed its
	// room at once; the decode side answers with the same 4xx. It also
	// wraps ErrAborted.
	ErrRejected = errors.New("disagg: request rejected by the prefill server")
	// ErrPoolFull: the prefill server holds as many prefilled states for
	// decode servers to fetch as Rooms.MaxParked or MaxParkedBytes allow
	// (SGLang's prefill side likewise admits a request only while its KV
	// pool and transfer buffers have room); the request is refused with
	// 503 kv_pool_full, before it is prefilled where the limit is already
	// reached, and the Router tries another prefill server.
	ErrPoolFull = errors.New("disagg: prefill server's parked states at their limit")
)

// RoomState is the state of one room on the prefill side. States only move
// forward; Failed is sticky.
type RoomState int

// Room states, in order (SGLang's KVPoll order, with Failed first).
const (
	RoomFailed        RoomState = iota // prefill failed, aborted or lease expired
	RoomBootstrapping                  // decode asked for it before prefill began
	RoomPrefilling                     // the prefill server is computing it
	RoomReady                          // the handoff waits for the decode side (leased)
	RoomTransferring                   // being sent
	RoomSuccess                        // sent completely
)

// String returns the state's name as used in metric labels ("failed",
// "bootstrapping", "prefilling", "ready", "transferring", "success"); a value
// outside the defined states gives "RoomState(N)" (never a panic).
func (s RoomState) String() string {
	if s < RoomFailed || s > RoomSuccess {
		return "RoomState(" + strconv.Itoa(int(s)) + ")"
	}
	return [...]string{"failed", "bootstrapping", "prefilling", "ready", "transferring", "success"}[s]
}

type room struct {
	id      uint64
	state   RoomState
	h       *Handoff
	err     error
	changed chan struct{} // closed and replaced at each state change
	timer   *time.Timer   // lease (Ready) or bootstrap wait (Bootstrapping)
	opened  bool          // the prefill request registered it
	bytes   int64         // h.Bytes(), counted in Rooms.parkedBytes while h is held
}

// Rooms is the prefill side's table of rooms: the per-room state machine, the
// lease on parked handoffs and the tombstones that keep late messages from
// attaching to a finished room id. It implements Source. Safe for concurrent
// use. Make it with NewRooms (the identity it serves); a zero Rooms works
// but has a zero Identity, which no decode side accepts.
type Rooms struct {
	// Lease is how long a ready handoff waits for the decode side before it
	// is dropped (vLLM's KV lease); default 30 s.
	Lease time.Duration
	// BootstrapTimeout is how long a room that the decode side asked for
	// waits for the prefill request to arrive; default 30 s.
	BootstrapTimeout time.Duration
	// OnChange, if set, is called after every state change, with the table
	// locked (so in order); it must not call back into the Rooms. For
	// metrics.
	OnChange func(from, to RoomState)
	// MaxParked and MaxParkedBytes bound the prefilled states the table
	// holds (parked, or being sent) by count and by Handoff.Bytes (0: no
	// bound). Admit refuses a new request, and Put a state that would go
	// over, with ErrPoolFull; a state is accepted whatever its size when
	// none is held, so one larger than MaxParkedBytes is still served, one
	// at a time.
	MaxParked      int
	MaxParkedBytes int64

	mu          sync.Mutex
	parked      int   // rooms holding a handoff
	parkedBytes int64 // their Handoff.Bytes
	rooms       map[uint64]*room
	tombs       map[uint64]error // terminal rooms: nil for Success, else the failure
	tombQ       []uint64
	id          Identity
	closing     bool
}

// maxTombstones bounds the tombstone set (oldest dropped first).
const maxTombstones = 1 << 16

// NewRooms returns an empty table serving handoffs of a model with identity id.
func NewRooms(id Identity) *Rooms {
	return &Rooms{rooms: map[uint64]*room{}, tombs: map[uint64]error{}, id: id}
}

// Identity returns the identity of the handoffs' model.
func (rs *Rooms) Identity() Identity { return rs.id }

func (rs *Rooms) lease() time.Duration {
	if rs.Lease > 0 {
		return rs.Lease
	}
	return 30 * time.Second
}

func (rs *Rooms) bootTimeout() time.Duration {
	if rs.BootstrapTimeout > 0 {
		return rs.BootstrapTimeout
	}
	return 30 * time.Second
}

// Live returns the number of live rooms (every state but the terminal ones).
func (rs *Rooms) Live() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.rooms)
}

// Counts returns the number of live rooms per state.
func (rs *Rooms) Counts() map[RoomState]int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := map[RoomState]int{}
	for _, r := range rs.rooms {
		out[r.state]++
	}
	return out
}

// setLocked moves r to state s (forward only) and returns the notify
// function to call after unlocking.
func (rs *Rooms) setLocked(r *room, s RoomState, err error) func() {
	from := r.state
	if from == RoomFailed || s <= from && s != RoomFailed {
		return func() {}
	}
	r.state, r.err = s, err
	close(r.changed)
	r.changed = make(chan struct{})
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if s == RoomFailed || s == RoomSuccess {
		delete(rs.rooms, r.id)
		if r.h != nil {
			rs.parked--
			rs.parkedBytes -= r.bytes
		}
		r.h, r.bytes = nil, 0
		rs.tombLocked(r.id, err)
	}
	if rs.OnChange != nil {
		rs.OnChange(from, s) // under the lock: gauges see transitions in order
	}
	return func() {}
}

func (rs *Rooms) tombLocked(id uint64, err error) {
	if _, ok := rs.tombs[id]; ok {
		return
	}
	if rs.tombs == nil { // a Rooms made without NewRooms
		rs.tombs = map[uint64]error{}
	}
	rs.tombs[id] = err
	rs.tombQ = append(rs.tombQ, id)
	if len(rs.tombQ) > maxTombstones {
		delete(rs.tombs, rs.tombQ[0])
		rs.tombQ = rs.tombQ[1:]
	}
}

// getLocked returns the live room id, creating it in state s when absent and
// not tombstoned.
func (rs *Rooms) getLocked(id uint64, s RoomState) (*room, error) {
	if r, ok := rs.rooms[id]; ok {
		return r, nil
	}
	if terr, dead := rs.tombs[id]; dead {
		if errors.Is(terr, ErrRejected) || errors.Is(terr, ErrPoolFull) {
			return nil, terr // the decode side learns why (a 4xx, a full server)
		}
		return nil, fmt.Errorf("%w: room %d already finished", ErrAborted, id)
	}
	if rs.closing {
		return nil, fmt.Errorf("%w: prefill server closing", ErrUnavailable)
	}
	r := &room{id: id, state: s, changed: make(chan struct{})}
	if rs.rooms == nil { // a Rooms made without NewRooms
		rs.rooms = map[uint64]*room{}
	}
	rs.rooms[id] = r
	return r, nil
}

// notifyCreate reports a new room (locked).
func (rs *Rooms) notifyCreate(s RoomState) {
	if rs.OnChange != nil {
		rs.OnChange(RoomFailed, s) // from "nothing"; Failed stands for it
	}
}

// Parked returns the number of prefilled states the table holds (parked
// for a decode server, or being sent) and their total Handoff.Bytes.
func (rs *Rooms) Parked() (n int, bytes int64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.parked, rs.parkedBytes
}

// Admit returns an error wrapping ErrPoolFull when MaxParked or
// MaxParkedBytes is already reached, so that a new request is refused
// before it is prefilled; nil otherwise.
func (rs *Rooms) Admit() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.fullLocked(0)
}

// fullLocked: is the table full (extra 0: for a new request), or would a
// state of extra bytes go over the limits?
func (rs *Rooms) fullLocked(extra int64) error {
	if rs.parked == 0 {
		return nil
	}
	if rs.MaxParked > 0 && rs.parked >= rs.MaxParked {
		return fmt.Errorf("%w: %d states parked for decode servers (limit %d)", ErrPoolFull, rs.parked, rs.MaxParked)
	}
	if rs.MaxParkedBytes > 0 && (rs.parkedBytes >= rs.MaxParkedBytes || rs.parkedBytes+extra > rs.MaxParkedBytes) {
		return fmt.Errorf("%w: %d bytes of states parked for decode servers (limit %d)", ErrPoolFull, rs.parkedBytes, rs.MaxParkedBytes)
	}
	return nil
}

// Open registers room id for a prefill request that is starting. A room the
// decode side already asked for (Bootstrapping) is taken over. Errors:
// ErrRoomInUse (another prefill request holds it), ErrAborted (the room was
// aborted or finished before).
func (rs *Rooms) Open(id uint64) error {
	rs.mu.Lock()
	r, err := rs.getLocked(id, RoomPrefilling)
	if err != nil {
		rs.mu.Unlock()
		return err
	}
	if r.opened {
		rs.mu.Unlock()
		return fmt.Errorf("%w: %d", ErrRoomInUse, id)
	}
	r.opened = true
	if r.state == RoomPrefilling {
		rs.notifyCreate(RoomPrefilling)
	} else {
		rs.setLocked(r, RoomPrefilling, nil)
	}
	rs.mu.Unlock()
	return nil
}

// Put parks the prefilled handoff of room id under a lease. If the room was
// aborted meanwhile, the handoff is dropped and Put returns ErrAborted. A nil
// h or h.State is refused with ErrMalformed and the room is left as it was
// (Fail it); parked, it would have reached the decode side as a nil handoff.
func (rs *Rooms) Put(id uint64, h *Handoff) error {
	if h == nil || h.State == nil {
		return fmt.Errorf("%w: Put of a nil handoff or state (room %d)", ErrMalformed, id)
	}
	rs.mu.Lock()
	r, ok := rs.rooms[id]
	if !ok || !r.opened {
		rs.mu.Unlock()
		return fmt.Errorf("%w: room %d is gone", ErrAborted, id)
	}
	n := h.Bytes()
	if err := rs.fullLocked(n); err != nil {
		// the prefill request holds the room: fail it, so that a decode
		// side waiting for it learns why at once
		notify := rs.setLocked(r, RoomFailed, fmt.Errorf("%w: %w", ErrAborted, err))
		rs.mu.Unlock()
		notify()
		return err
	}
	r.h, r.bytes = h, n
	rs.parked++
	rs.parkedBytes += n
	notify := rs.setLocked(r, RoomReady, nil)
	r.timer = time.AfterFunc(rs.lease(), func() {
		rs.expire(r, RoomReady, fmt.Errorf("%w: lease of %v expired before the decode side fetched room %d", ErrTimeout, rs.lease(), id))
	})
	rs.mu.Unlock()
	notify()
	return nil
}

func (rs *Rooms) expire(r *room, in RoomState, err error) {
	rs.mu.Lock()
	notify := func() {}
	if r.state == in && rs.rooms[r.id] == r {
		notify = rs.setLocked(r, RoomFailed, err)
	}
	rs.mu.Unlock()
	notify()
}

// Fail marks room id failed with err (prefill error or cancellation); a
// waiting decode side gets an error wrapping ErrAborted.
func (rs *Rooms) Fail(id uint64, err error) {
	rs.failWith(id, fmt.Errorf("%w: %v", ErrAborted, err))
}

// failWith fails room id, or tombstones an unknown id, with err as it is.
func (rs *Rooms) failWith(id uint64, err error) {
	rs.mu.Lock()
	notify := func() {}
	if r, ok := rs.rooms[id]; ok {
		notify = rs.setLocked(r, RoomFailed, err)
	} else {
		rs.tombLocked(id, err)
	}
	rs.mu.Unlock()
	notify()
}

// Reject fails room id because the prefill server refused its request
// (err: the validation error). A room that a prefill request already holds is
// left alone (a client reused a live room id); one the decode side waits for
// fails at once, and an unknown id is tombstoned so that a decode side
// asking later fails at once too. The room's error wraps ErrAborted,
// ErrRejected and err.
func (rs *Rooms) Reject(id uint64, err error) {
	rs.mu.Lock()
	rerr := fmt.Errorf("%w: %w: %w", ErrAborted, ErrRejected, err)
	notify := func() {}
	if r, ok := rs.rooms[id]; ok {
		if !r.opened {
			notify = rs.setLocked(r, RoomFailed, rerr)
		}
	} else {
		rs.tombLocked(id, rerr)
	}
	rs.mu.Unlock()
	notify()
}

// Abort is Fail for aborts from the decode side; an unknown id is tombstoned
// so that a prefill request arriving later for it fails at Open.
func (rs *Rooms) Abort(id uint64, reason string) {
	rs.Fail(id, fmt.Errorf("aborted by decode: %s", reason))
}

// Take waits until room id is ready and hands its handoff to the caller
// (state Transferring); done(nil) then marks it Success, done(err) Failed.
// A room not yet opened is created in Bootstrapping and waits at most
// BootstrapTimeout for its prefill request. Errors: ErrAborted (failed or
// aborted room), ErrTimeout, ctx.Err() (the room is then aborted too).
func (rs *Rooms) Take(ctx context.Context, id uint64) (*Handoff, func(error), error) {
	rs.mu.Lock()
	r, err := rs.getLocked(id, RoomBootstrapping)
	if err != nil {
		rs.mu.Unlock()
		return nil, nil, err
	}
	if r.state == RoomBootstrapping && r.timer == nil {
		r.timer = time.AfterFunc(rs.bootTimeout(), func() {
			rs.expire(r, RoomBootstrapping, fmt.Errorf("%w: no prefill request for room %d within %v", ErrTimeout, id, rs.bootTimeout()))
		})
		rs.notifyCreate(RoomBootstrapping)
	}
	for {
		switch r.state {
		case RoomReady:
			h := r.h
			notify := rs.setLocked(r, RoomTransferring, nil)
			rs.mu.Unlock()
			notify()
			return h, func(err error) {
				rs.mu.Lock()
				var n func()
				if err != nil {
					n = rs.setLocked(r, RoomFailed, err)
				} else {
					n = rs.setLocked(r, RoomSuccess, nil)
				}
				rs.mu.Unlock()
				n()
			}, nil
		case RoomFailed:
			err := r.err
			rs.mu.Unlock()
			return nil, nil, err
		case RoomTransferring, RoomSuccess:
			rs.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: room %d fetched twice", ErrRoomInUse, id)
		}
		ch := r.changed
		rs.mu.Unlock()
		select {
		case <-ch:
			rs.mu.Lock()
		case <-ctx.Done():
			rs.Fail(id, fmt.Errorf("decode side went away: %w", ctx.Err()))
			return nil, nil, ctx.Err()
		}
	}
}

// Wait blocks until room id reaches a terminal state and returns nil for
// Success or the room's error. If ctx ends first it returns ctx.Err().
func (rs *Rooms) Wait(ctx context.Context, id uint64) error {
	rs.mu.Lock()
	r, ok := rs.rooms[id]
	if !ok {
		err, dead := rs.tombs[id]
		rs.mu.Unlock()
		if !dead {
			return fmt.Errorf("%w: unknown room %d", ErrAborted, id)
		}
		return err
	}
	for r.state != RoomFailed && r.state != RoomSuccess {
		ch := r.changed
		rs.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		rs.mu.Lock()
	}
	err := r.err
	rs.mu.Unlock()
	return err
}

// Close fails every live room (ErrUnavailable) and refuses new ones.
func (rs *Rooms) Close() {
	rs.mu.Lock()
	rs.closing = true
	var ns []func()
	for _, r := range rs.rooms {
		ns = append(ns, rs.setLocked(r, RoomFailed, fmt.Errorf("%w: prefill server closing", ErrUnavailable)))
	}
	rs.mu.Unlock()
	for _, n := range ns {
		n()
	}
}
