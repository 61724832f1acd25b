package dsv4

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestTokenizeDetokenize: Tokenize gives the ids CompleteStream prefills,
// Detokenize inverts it, an unknown id is a *ParamError for "tokens", and
// an engine without a tokenizer (or a nil one) refuses both.
func TestTokenizeDetokenize(t *testing.T) {
	ctx := context.Background()
	e := newFakeEngine(&fakeBackend{}, EngineOptions{})
	defer e.Close(ctx)
	for _, text := range []string{"", "hello", "Grüße 世界 🚀"} {
		ids, err := e.Tokenize(text)
		if err != nil || ids == nil {
			t.Fatalf("Tokenize(%q): %v %v", text, ids, err)
		}
		want, _ := fakeTok{}.Encode(text)
		if len(want) != 0 && !slices.Equal(ids, want) {
			t.Errorf("Tokenize(%q) = %v, want %v", text, ids, want)
		}
		if got, err := e.Detokenize(ids); err != nil || got != text {
			t.Errorf("Detokenize(Tokenize(%q)) = %q, %v", text, got, err)
		}
	}
	for _, bad := range [][]int32{{-1}, {'a', int32(e.VocabSize())}} {
		_, err := e.Detokenize(bad)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != "tokens" || !errors.Is(err, ErrInvalidParams) {
			t.Errorf("Detokenize(%v): %v", bad, err)
		}
	}
	var ne *Engine
	if _, err := ne.Tokenize("x"); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("nil engine Tokenize: %v", err)
	}
	if _, err := ne.Detokenize(nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("nil engine Detokenize: %v", err)
	}
	bare, err := NewEngineWithBackend(&fakeBackend{}, EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close(ctx)
	if _, err := bare.Tokenize("x"); !errors.Is(err, ErrNoChat) {
		t.Errorf("no tokenizer Tokenize: %v", err)
	}
	if _, err := bare.Detokenize([]int32{1}); !errors.Is(err, ErrNoChat) {
		t.Errorf("no tokenizer Detokenize: %v", err)
	}
}
