package template

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/nikolalohinski/gonja/v2/loaders"
)

// errNoLoader is what {% include %}, {% extends %}, {% import %} and {% from %} meet: a chat
// template is rendered from a string with no loader (jinja2's from_string in transformers),
// so there are no other templates to load, and the template itself may not be loaded again.
// Before, the loader served the chat template to every load, so {% include "/chat_template" %}
// or {% extends "/chat_template" %} recursed until a fatal stack overflow, and an imported
// copy rendered without the budget and guards of instrument.
var errNoLoader = errors.New("a chat template cannot include, extend or import templates")

// sourceLoader serves the chat template's source to its first read only (the parse of the
// template itself) and refuses every other load.
type sourceLoader struct {
	src  string
	read atomic.Bool
}

var _ loaders.Loader = (*sourceLoader)(nil)

// Read implements loaders.Loader.
func (l *sourceLoader) Read(string) (io.Reader, error) {
	if l.read.Swap(true) {
		return nil, errNoLoader
	}
	return strings.NewReader(l.src), nil
}

// Resolve implements loaders.Loader.
func (l *sourceLoader) Resolve(path string) (string, error) { return path, nil }

// Inherit implements loaders.Loader.
func (l *sourceLoader) Inherit(string) (loaders.Loader, error) { return l, nil }
