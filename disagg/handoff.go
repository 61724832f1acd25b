package disagg

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dsv4go/dsv4go/dsv4"
)

// PrefillHandoff prefills prompt on a fresh sequence of m and returns the
// request's handoff: the sequence's state (Snapshot), the last position's
// logits and the greedy first token. The sequence is released before it
// returns. sampling is stored as is (JSON of the request's dsv4.SamplingParams,
// or nil). Errors: dsv4.ErrInvalidParams for an empty prompt, a nil m or a
// nil ctx; otherwise those of Model.Prefill and Sequence.Snapshot.
func PrefillHandoff(ctx context.Context, m *dsv4.Model, room uint64, prompt []int32, sampling json.RawMessage) (*Handoff, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", dsv4.ErrInvalidParams)
	}
	seq := m.NewSequence()
	defer seq.Release()
	logits, err := m.Prefill(ctx, seq, prompt)
	if err != nil {
		return nil, err
	}
	st, err := seq.Snapshot()
	if err != nil {
		return nil, err
	}
	return &Handoff{Room: room, Prompt: append([]int32(nil), prompt...), State: st, Logits: logits,
		FirstToken: argmax(logits), Sampling: sampling}, nil
}

func argmax(x []float32) int32 {
	b := 0
	for i, v := range x {
		if v > x[b] {
			b = i
		}
	}
	return int32(b)
}
