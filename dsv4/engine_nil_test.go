package dsv4

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// nilCtx is a nil context.Context, as a caller's zero-value field would hold.
var nilCtx context.Context

// TestNilArguments: a nil Model, Engine, Backend or request given to a public entry
// point is an error wrapping ErrInvalidParams (or ErrSequence for a nil Sequence), never
// a nil-pointer panic. A nil context is ErrInvalidParams too (as
// http.NewRequestWithContext refuses one): left to panic, it crashed the engine's
// goroutine, not the caller's.
func TestNilArguments(t *testing.T) {
	ctx := context.Background()
	var nm *Model
	var ne *Engine
	e := newFakeEngine(&fakeBackend{}, EngineOptions{})
	defer e.Close(ctx)
	m, _ := loadGoldenModel(t, "hc2-yarn")
	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"Model.Prefill nil model", ErrInvalidParams, func() error { _, err := nm.Prefill(ctx, nm.NewSequence(), []int32{1}); return err }},
		{"Model.PrefillAll nil model", ErrInvalidParams, func() error { _, err := nm.PrefillAll(ctx, nil, []int32{1}); return err }},
		{"Model.Decode nil model", ErrInvalidParams, func() error { _, err := nm.Decode(ctx, nil, nil); return err }},
		{"Model.Restore nil model", ErrInvalidParams, func() error { _, err := nm.Restore(&SequenceState{}); return err }},
		{"Model.Chat nil model", ErrInvalidParams, func() error { _, err := nm.Chat(ctx, &ChatRequest{}); return err }},
		{"Model.ChatStream nil model", ErrInvalidParams, func() error { _, err := nm.ChatStream(ctx, &ChatRequest{}); return err }},
		{"Model.DefaultEngine nil model", ErrInvalidParams, func() error { _, err := nm.DefaultEngine(); return err }},
		{"NewEngine nil model", ErrInvalidParams, func() error { _, err := NewEngine(nil, EngineOptions{}); return err }},
		{"NewEngineWithBackend nil", ErrInvalidParams, func() error { _, err := NewEngineWithBackend(nil, EngineOptions{}); return err }},
		{"Engine.Chat nil engine", ErrInvalidParams, func() error { _, err := ne.Chat(ctx, &ChatRequest{}); return err }},
		{"Engine.ChatStream nil engine", ErrInvalidParams, func() error { _, err := ne.ChatStream(ctx, &ChatRequest{}); return err }},
		{"Engine.CompleteStream nil engine", ErrInvalidParams, func() error { _, err := ne.CompleteStream(ctx, &CompletionRequest{}); return err }},
		{"Engine.Generate nil engine", ErrInvalidParams, func() error { _, err := ne.Generate(ctx, []int32{1}, SamplingParams{}); return err }},
		{"Engine.Chat nil request", ErrInvalidParams, func() error { _, err := e.Chat(ctx, nil); return err }},
		{"Engine.ChatStream nil request", ErrInvalidParams, func() error { _, err := e.ChatStream(ctx, nil); return err }},
		{"Engine.CompleteStream nil request", ErrInvalidParams, func() error { _, err := e.CompleteStream(ctx, nil); return err }},
		{"ChatRequest.Sampling nil", ErrInvalidParams, func() error { _, err := (*ChatRequest)(nil).Sampling(); return err }},
		{"Model.Chat nil request", ErrInvalidParams, func() error { _, err := m.Chat(ctx, nil); return err }},
		{"nil model's sequence", ErrSequence, func() error { _, err := m.Prefill(ctx, nm.NewSequence(), []int32{1}); return err }},
		{"nil sequence", ErrSequence, func() error { _, err := m.Prefill(ctx, nil, []int32{1}); return err }},
		{"nil sequence in Decode", ErrSequence, func() error { _, err := m.Decode(ctx, []*Sequence{nil, nil}, []int32{1, 1}); return err }},
		{"nil sequence Snapshot", ErrSequence, func() error { _, err := (*Sequence)(nil).Snapshot(); return err }},
		// A nil context is ErrInvalidParams, not a panic; in Generate and
		// ChatStream the panic used to come from the engine's goroutine
		// after the request was queued, ending the process.
		{"Model.Prefill nil ctx", ErrInvalidParams, func() error { _, err := m.Prefill(nilCtx, m.NewSequence(), []int32{1}); return err }},
		{"Model.PrefillAll nil ctx", ErrInvalidParams, func() error { _, err := m.PrefillAll(nilCtx, m.NewSequence(), []int32{1}); return err }},
		{"Model.Decode nil ctx", ErrInvalidParams, func() error { _, err := m.Decode(nilCtx, []*Sequence{m.NewSequence()}, []int32{1}); return err }},
		{"TransferKV nil ctx", ErrInvalidParams, func() error {
			s := m.NewSequence()
			if _, err := m.Prefill(ctx, s, []int32{1}); err != nil {
				return err
			}
			_, err := TransferKV(nilCtx, s, m)
			if s.Len() != 1 {
				return errors.New("TransferKV changed the sequence")
			}
			return err
		}},
		{"Engine.Generate nil ctx", ErrInvalidParams, func() error { _, err := e.Generate(nilCtx, []int32{1}, SamplingParams{}); return err }},
		{"Engine.Chat nil ctx", ErrInvalidParams, func() error { _, err := e.Chat(nilCtx, chatReq("q")); return err }},
		{"Engine.ChatStream nil ctx", ErrInvalidParams, func() error { _, err := e.ChatStream(nilCtx, chatReq("q")); return err }},
		{"Engine.CompleteStream nil ctx", ErrInvalidParams, func() error {
			_, err := e.CompleteStream(nilCtx, &CompletionRequest{Prompt: Prompt{Texts: []string{"q"}}})
			return err
		}},
		{"Model.Chat nil ctx", ErrInvalidParams, func() error { _, err := m.Chat(nilCtx, chatReq("q")); return err }},
		{"Load nil ctx", ErrInvalidParams, func() error { _, err := Load(nilCtx, "testdata/forward/hc2-yarn"); return err }},
		{"OpenCheckpoint nil ctx", ErrInvalidParams, func() error { _, err := OpenCheckpoint(nilCtx, "testdata/forward/hc2-yarn"); return err }},
		{"Engine.Close nil ctx", nil, func() error {
			e := newFakeEngine(&fakeBackend{}, EngineOptions{})
			if err := e.Close(nilCtx); err != nil {
				return err
			}
			_, err := e.Generate(ctx, []int32{1}, SamplingParams{})
			if !errors.Is(err, ErrEngineClosed) {
				return fmt.Errorf("Generate after Close(nil): %v", err)
			}
			return nil
		}},
		{"nil model, nil engine: accessors", nil, func() error {
			if nm.Config() != nil || nm.Weights() != nil || nm.Checkpoint() != nil || nm.Close() != nil || nm.SequenceBytes(3) != 0 {
				return errors.New("nil model accessors")
			}
			if ne.Close(ctx) != nil || ne.VocabSize() != 0 || ne.MaxContext() != 0 || ne.Stats() != (EngineStats{}) {
				return errors.New("nil engine accessors")
			}
			s := nm.NewSequence()
			s.Release()
			if s.Len() != 0 || s.Bytes() != 0 {
				return errors.New("nil model's sequence not empty")
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			err := c.call()
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// TestModelCloseClosesDefaultEngine: Model.Close closes the engine Model.Chat started
// (no engine goroutine, and no reference to the model, outlives the model's Close), and a
// later DefaultEngine starts a fresh one that the next Close closes too.
func TestModelCloseClosesDefaultEngine(t *testing.T) {
	ctx := context.Background()
	m, _ := loadGoldenModel(t, "hc2-yarn")
	e1, err := m.DefaultEngine()
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := m.DefaultEngine(); e != e1 {
		t.Fatal("DefaultEngine is not shared")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := defaultEngines.Load(m); ok {
		t.Fatal("Close left the default engine registered")
	}
	if _, err := e1.Generate(ctx, []int32{1}, SamplingParams{MaxTokens: 1}); !errors.Is(err, ErrEngineClosed) {
		t.Fatalf("Generate on the closed default engine: %v, want ErrEngineClosed", err)
	}
	e2, err := m.DefaultEngine()
	if err != nil || e2 == e1 {
		t.Fatalf("DefaultEngine after Close: %v (same engine: %v)", err, e2 == e1)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := defaultEngines.Load(m); ok {
		t.Fatal("second Close left the default engine registered")
	}
}
