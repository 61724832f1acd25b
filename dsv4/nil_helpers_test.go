package dsv4

import (
	"math"
	"testing"
)

// TestExportedHelpersEdgeInputs: exported helpers an SDK user may call with
// nil or out-of-range values answer instead of panicking (each case below
// panicked with a nil dereference or a slice bound, or, for StateBytes at
// n = 2^62, wrapped around to 104960 bytes on dsv4-tiny's geometry).
func TestExportedHelpersEdgeInputs(t *testing.T) {
	cfg, err := LoadConfig("testdata/forward/hc2-yarn/config.json")
	if err != nil {
		t.Fatal(err)
	}
	entries := []LogprobEntry{{Token: "a", Logprob: -1}, {Token: "bc", Logprob: -2}}
	positions := []PromptPosition{nil, {{ID: 1, Logprob: -0.5, Rank: 1, DecodedToken: "b"}, {ID: 2, Logprob: -3, Rank: 2, DecodedToken: "x"}}}
	cases := []struct {
		name string
		ok   func() bool
	}{
		{"ConfigFingerprint(nil)", func() bool { return ConfigFingerprint(nil) == "" && ConfigFingerprint(cfg) != "" }},
		{"KVLayoutFingerprint(nil)", func() bool { return KVLayoutFingerprint(nil) == "" && KVLayoutFingerprint(cfg) != "" }},
		{"StateBytes(nil, 5)", func() bool { return StateBytes(nil, 5) == 0 }},
		{"StateBytes huge n saturates", func() bool {
			return StateBytes(cfg, 1<<62) == math.MaxInt64 && StateBytes(cfg, math.MaxInt) == math.MaxInt64
		}},
		{"StateBytes never wraps negative", func() bool {
			for n := 1; n > 0 && n < 1<<62; n *= 3 {
				if StateBytes(cfg, n) <= 0 {
					return false
				}
			}
			return true
		}},
		{"StateBytes huge head_dim", func() bool {
			c := *cfg
			c.HeadDim = 1 << 60
			return StateBytes(&c, 1000) == math.MaxInt64
		}},
		{"SequenceState(nil).Bytes", func() bool { return (*SequenceState)(nil).Bytes() == 0 }},
		{"ChatDelta(nil).Empty", func() bool { return (*ChatDelta)(nil).Empty() }},
		{"ChatAccumulator.Add(nil)", func() bool {
			var a ChatAccumulator
			a.Add(nil)
			a.Add(&ChatChunk{Index: 0, Delta: ChatDelta{Content: "x"}})
			a.Add(nil)
			r := a.Response()
			return len(r.Choices) == 1 && *r.Choices[0].Message.Content == "x"
		}},
		{"LegacyLogprobsAt nil pos", func() bool {
			got := LegacyLogprobsAt(entries, nil)
			want := LegacyLogprobs(entries, 0)
			return len(got.TextOffset) == 2 && got.TextOffset[1] == want.TextOffset[1]
		}},
		{"LegacyPromptLogprobs nil pos, negative k", func() bool {
			got := LegacyPromptLogprobs([]string{"a", "b"}, positions, -5, nil)
			return len(got.Tokens) == 2 && len(got.TopLogprobs[1]) == 1
		}},
		{"LegacyPromptLogprobs fewer positions than tokens", func() bool {
			got := LegacyPromptLogprobs([]string{"a", "b", "c"}, positions, 1, &TextPos{})
			return len(got.Tokens) == 3 && got.TokenLogprobs[2] == nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			if !tc.ok() {
				t.Fatal("wrong answer")
			}
		})
	}
}
