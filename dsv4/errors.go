package dsv4

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by Load, ParseConfig and the weight
// accessors wraps one of these, so callers can test the class with errors.Is
// and get the details (file, tensor, field) with errors.As on the typed errors
// below.
var (
	// ErrConfig: config.json is missing, is not valid JSON, or has a field with
	// a missing, ill-typed or unsupported value.
	ErrConfig = errors.New("dsv4: invalid config")
	// ErrMissingTensor: a tensor the model needs is not in the checkpoint.
	ErrMissingTensor = errors.New("dsv4: missing tensor")
	// ErrUnexpectedTensor: the checkpoint holds a tensor the model does not use
	// (reported only with WithStrict).
	ErrUnexpectedTensor = errors.New("dsv4: unexpected tensor")
	// ErrTensorShape: a tensor has a shape other than the config implies.
	ErrTensorShape = errors.New("dsv4: wrong tensor shape")
	// ErrTensorDType: a tensor has a dtype that the loader cannot use there.
	ErrTensorDType = errors.New("dsv4: wrong tensor dtype")
	// ErrTensorValue: a tensor holds values the model cannot use, e.g. a
	// tid2eid expert id out of range or an NVFP4 global scale of 0.
	ErrTensorValue = errors.New("dsv4: bad tensor values")
	// ErrCheckpoint: the checkpoint files are malformed (bad safetensors header,
	// truncated file, bad index); wraps the safetensors error.
	ErrCheckpoint = errors.New("dsv4: malformed checkpoint")
	// ErrClosed: the Model or Checkpoint was used after Close.
	ErrClosed = errors.New("dsv4: use after Close")
)

// ConfigError reports one bad config.json field. It wraps ErrConfig.
type ConfigError struct {
	File     string // path of config.json ("" when parsed from bytes)
	Field    string // JSON key, e.g. "compress_ratios[3]"
	Value    string // the offending value as written (may be empty when missing)
	Expected string // what was expected, e.g. "one of 0, 4, 128"
}

// Error names the file, the field, the value and what was expected.
func (e *ConfigError) Error() string {
	where := "config"
	if e.File != "" {
		where = e.File
	}
	if e.Value == "" {
		return fmt.Sprintf("dsv4: %s: field %q: expected %s", where, e.Field, e.Expected)
	}
	return fmt.Sprintf("dsv4: %s: field %q = %s: expected %s", where, e.Field, e.Value, e.Expected)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// TensorError reports a problem with one tensor. Kind is one of
// ErrMissingTensor, ErrUnexpectedTensor, ErrTensorShape, ErrTensorDType,
// ErrTensorValue or ErrCheckpoint, and errors.Is(err, Kind) holds.
type TensorError struct {
	Kind   error  // the sentinel class
	Name   string // tensor name as written in the checkpoint (or the canonical name when missing)
	File   string // shard file, when known
	Detail string // e.g. "shape [16 32], want [32 32]"
	Err    error  // underlying cause, if any
}

// Error names the class, the tensor, the file and the detail.
func (e *TensorError) Error() string {
	msg := fmt.Sprintf("%v: %q", e.Kind, e.Name)
	if e.File != "" {
		msg += " in " + e.File
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the sentinel class and the underlying cause.
func (e *TensorError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// ValidationError collects every tensor problem found while binding a
// checkpoint, so that one Load reports all missing and unexpected tensors
// at once. errors.Is(err, ErrMissingTensor) etc. hold when any entry has
// that kind.
type ValidationError struct {
	Errs []*TensorError
}

// Error lists the problems (the first 20).
func (e *ValidationError) Error() string {
	const maxShown = 20
	s := fmt.Sprintf("dsv4: checkpoint validation failed (%d problems)", len(e.Errs))
	for i, te := range e.Errs {
		if i == maxShown {
			s += fmt.Sprintf("\n  ... and %d more", len(e.Errs)-maxShown)
			break
		}
		s += "\n  " + te.Error()
	}
	return s
}

// Unwrap returns the individual tensor errors.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Errs))
	for i, te := range e.Errs {
		out[i] = te
	}
	return out
}

// Missing lists the names of missing tensors.
func (e *ValidationError) Missing() []string { return e.names(ErrMissingTensor) }

// Unexpected lists the names of unexpected tensors.
func (e *ValidationError) Unexpected() []string { return e.names(ErrUnexpectedTensor) }

func (e *ValidationError) names(kind error) []string {
	var out []string
	for _, te := range e.Errs {
		if te.Kind == kind {
			out = append(out, te.Name)
		}
	}
	return out
}

// ContextLengthError is a request that does not fit the served context:
// its prompt alone (MaxTokens 0) or its prompt plus the max_tokens it
// asked for. It wraps ErrContextLength; its text is vLLM's for the same
// refusal (serving's input validation), so clients that read the limit out
// of the message read it here too.
type ContextLengthError struct {
	PromptTokens int // the prompt's tokens
	MaxTokens    int // the request's max_tokens (or max_completion_tokens); 0: the prompt alone is too long
	Context      int // the served context length in tokens
}

// Error is vLLM's message: for max_tokens, "'max_tokens' or
// 'max_completion_tokens' is too large: N. This model's maximum context
// length is C tokens and your request has P input tokens (N > C - P).
// (parameter=max_tokens, value=N)"; for the prompt alone, "This model's
// maximum context length is C tokens. However, your request has P input
// tokens. Please reduce the length of the input messages."
func (e *ContextLengthError) Error() string {
	if e.MaxTokens > 0 {
		return fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d). (parameter=max_tokens, value=%d)",
			e.MaxTokens, e.Context, e.PromptTokens, e.MaxTokens, e.Context, e.PromptTokens, e.MaxTokens)
	}
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
		e.Context, e.PromptTokens)
}

// Unwrap returns ErrContextLength.
func (e *ContextLengthError) Unwrap() error { return ErrContextLength }

// Param is the request field at fault, as vLLM names it: "max_tokens"
// when max_tokens does not fit, else "messages".
func (e *ContextLengthError) Param() string {
	if e.MaxTokens > 0 {
		return "max_tokens"
	}
	return "messages"
}
