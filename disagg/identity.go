package disagg

import (
	"fmt"
	"strings"

	"github.com/dsv4go/dsv4go/dsv4"
)

// Identity is what a prefill and a decode engine exchange at connect time (the
// compatibility handshake): a pair whose identities are not Compatible never
// transfers a request.
type Identity struct {
	// Protocol is ProtocolVersion of the peer's build.
	Protocol int `json:"protocol"`
	// Model is the served model name (informational).
	Model string `json:"model"`
	// Config is dsv4.ConfigFingerprint of the model's config.
	Config string `json:"config"`
	// KVLayout is dsv4.KVLayoutFingerprint: layer count and types, widths,
	// rates, window.
	KVLayout string `json:"kv_layout"`
	// Weights fingerprints the checkpoint (dsv4.Model.WeightsFingerprint):
	// every tensor's name, dtype, shape, length and a fixed sample of its
	// bytes (whole up to 24 KiB, else 6 blocks of 4 KiB).
	Weights string `json:"weights"`
	// LayerTypes lists the attention type of each layer.
	LayerTypes []string `json:"layer_types"`
	// DType and Layout name the state's element type and memory layout.
	DType  string `json:"dtype"`
	Layout string `json:"layout"`
	// Vocab is the number of logits per position.
	Vocab int `json:"vocab"`
}

// ModelIdentity computes m's identity under the served name name. A nil m
// gives an identity without fingerprints, which Compatible refuses.
func ModelIdentity(m *dsv4.Model, name string) Identity {
	cfg := m.Config()
	if cfg == nil { // a nil Model: no fingerprints, compatible with no model
		return Identity{Protocol: ProtocolVersion, Model: name}
	}
	id := Identity{
		Protocol: ProtocolVersion, Model: name,
		Config: dsv4.ConfigFingerprint(cfg), KVLayout: dsv4.KVLayoutFingerprint(cfg),
		DType: "float32", Layout: "dsv4.SequenceState/row-major/v1", Vocab: cfg.VocabSize,
	}
	for _, t := range cfg.LayerTypes {
		id.LayerTypes = append(id.LayerTypes, string(t))
	}
	// Computed at Load: the same after m.Close (reading the unmapped norms
	// here gave another value then, so a closed model's server was refused).
	id.Weights = m.WeightsFingerprint()
	return id
}

// Compatible returns nil when a and b may exchange state, else an error
// wrapping ErrIncompatible that names every differing field.
func (a Identity) Compatible(b Identity) error {
	var diff []string
	add := func(name string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			diff = append(diff, fmt.Sprintf("%s %v vs %v", name, short(x), short(y)))
		}
	}
	add("protocol", a.Protocol, b.Protocol)
	if a.Config == "" || b.Config == "" {
		diff = append(diff, "no config fingerprint (a zero Identity, or ModelIdentity of a nil model)")
	}
	add("config", a.Config, b.Config)
	add("kv_layout", a.KVLayout, b.KVLayout)
	add("weights", a.Weights, b.Weights)
	add("layer_types", a.LayerTypes, b.LayerTypes)
	add("dtype", a.DType, b.DType)
	add("layout", a.Layout, b.Layout)
	add("vocab", a.Vocab, b.Vocab)
	if len(diff) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(diff, "; "))
}

func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 16 {
		return s[:12] + "…"
	}
	return s
}
