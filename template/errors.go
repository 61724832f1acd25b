package template

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them,
// so callers can test with errors.Is; message-level problems come as a
// *MessageError (errors.As) that names the offending message.
var (
	// ErrUnknownRole: a message role the encoder does not know.
	ErrUnknownRole = errors.New("template: unknown role")
	// ErrInvalidMessage: a message that breaks the format's rules (a
	// developer message without content, an invalid task, a tool call
	// without a function name, ...).
	ErrInvalidMessage = errors.New("template: invalid message")
	// ErrToolResultWithoutCall: a tool message that answers no earlier
	// assistant tool call (none precedes it, or its tool_call_id matches
	// none of the calls).
	ErrToolResultWithoutCall = errors.New("template: tool result without a matching tool call")
	// ErrInvalidArguments: tool-call arguments that are not a JSON object.
	ErrInvalidArguments = errors.New("template: malformed tool-call arguments")
	// ErrInvalidOption: an unknown thinking mode or reasoning effort.
	ErrInvalidOption = errors.New("template: invalid option")
	// ErrInvalidRequest: an OpenAI chat-completions body that cannot be
	// mapped to messages.
	ErrInvalidRequest = errors.New("template: invalid chat request")
	// ErrSyntax: a Jinja template that does not parse.
	ErrSyntax = errors.New("template: Jinja syntax error")
	// ErrRender: a Jinja template that fails while rendering (including a
	// call to raise_exception, whose message is kept in the error text).
	ErrRender = errors.New("template: Jinja render error")
	// ErrUnserializable: a value that tojson cannot print.
	ErrUnserializable = errors.New("template: value is not JSON serializable")
	// ErrLimit: output size, loop iterations or render time over its bound.
	ErrLimit = errors.New("template: limit exceeded")
)

// MessageError reports a problem with one input message.
type MessageError struct {
	Index  int    // position in the input messages (0-based)
	Role   string // the message's role
	Err    error  // one of the sentinel errors above
	Detail string // what is wrong, for people
}

// Error implements error.
func (e *MessageError) Error() string {
	return fmt.Sprintf("%v: message %d (role %q): %s", e.Err, e.Index, e.Role, e.Detail)
}

// Unwrap returns the sentinel error.
func (e *MessageError) Unwrap() error { return e.Err }

func msgErr(index int, role string, err error, format string, args ...any) error {
	return &MessageError{Index: index, Role: role, Err: err, Detail: fmt.Sprintf(format, args...)}
}

// FieldError is a message whose JSON field has a value of the wrong kind
// (Message.UnmarshalJSON: content 5, an empty task). Decoding one message
// does not know its position; a caller that decoded a list adds it (the
// servers report param "messages[i].Field"). It wraps ErrInvalidMessage.
type FieldError struct {
	Field  string // the message's JSON field, e.g. "content"
	Detail string // what is wrong, e.g. "expected a string, null or an array of content parts, got number"
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidMessage, e.Field, e.Detail)
}

// Unwrap returns ErrInvalidMessage.
func (e *FieldError) Unwrap() error { return ErrInvalidMessage }
