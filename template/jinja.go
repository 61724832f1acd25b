package template

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Limits of the Jinja renderer (JinjaOptions zero values pick these).
const (
	// DefaultMaxSteps bounds loop iterations plus macro calls in one render.
	DefaultMaxSteps = 5_000_000
	// DefaultMaxDuration bounds one render's wall-clock time.
	DefaultMaxDuration = 10 * time.Second
	// MaxRange is the largest range() a template may build; it is the
	// limit of jinja2's sandbox (MAX_RANGE), which HF renders in.
	MaxRange = 100_000
	// maxStackFrames bounds Go call depth (macro recursion) during a render.
	maxStackFrames = 20_000
)

// JinjaOptions bound and parameterize a Jinja template. The zero value is
// usable.
type JinjaOptions struct {
	// MaxOutputBytes bounds the rendered text (0: DefaultMaxOutputBytes).
	MaxOutputBytes int
	// MaxValueBytes bounds every value the template builds while
	// rendering (strings by their bytes, lists and dicts by their
	// elements' sizes plus 16 bytes per element): the results of ~, +, *,
	// %, filters, and method, function and macro calls (0: the effective
	// MaxOutputBytes). Over it, Render fails with ErrLimit.
	MaxValueBytes int
	// MaxAllocBytes bounds the sum of the sizes of all values one render
	// builds, which bounds what it can keep alive in variables, namespaces
	// and macro frames (0: DefaultAllocFactor x the value bound).
	MaxAllocBytes int64
	// MaxSteps bounds loop iterations and macro calls (0: DefaultMaxSteps).
	MaxSteps int
	// MaxDuration bounds render time (0: DefaultMaxDuration); the
	// context passed to Render may cut it shorter.
	MaxDuration time.Duration
	// Now is the clock of strftime_now (nil: time.Now).
	Now func() time.Time
}

// Jinja is a compiled Hugging Face chat template. It renders in HF's
// environment (transformers chat_template_utils): trim_blocks and
// lstrip_blocks on, loop controls, the {% generation %} block, globals
// raise_exception and
// strftime_now, a tojson filter that prints like Python json.dumps
// (ensure_ascii=False, ", "/": " separators, key order kept, no HTML
// escaping; ensure_ascii, indent, separators and sort_keys honoured), dicts
// iterated in insertion order, and Python's str.strip/lstrip/rstrip/split/
// replace semantics. It is safe for concurrent use.
//
// The engine is github.com/nikolalohinski/gonja/v2: a maintained pure-Go
// Jinja. Its gaps against Python jinja2 are closed through its extension
// points (replaced filters, tests, method sets, globals and a pass over
// the parsed template), not a fork: JSON null is Python None (prints
// "None", is defined, survives default()), lists and dicts print as
// Python's repr, and *, **, %, /, //, ~ follow Python. Known remaining
// differences: string indexing s[i] counts bytes, + with None or numbers
// and strings concatenates where Python raises TypeError, and undefined
// attributes of undefined values render empty where jinja2 raises.
type Jinja struct {
	tmpl *exec.Template
	opts JinjaOptions
}

// budgetKey names the per-render budget in the template context; templates
// cannot spell a name with a NUL byte.
const budgetKey = "\x00budget"

type budget struct {
	ctx      context.Context
	steps    int
	maxSteps int
	maxOut   int
	maxValue int   // bound on one built value, bytes
	maxAlloc int64 // bound on all built values together, bytes
	alloc    int64 // built so far
	err      error
	lastErr  error // the last error one of this package's filters returned
}

// check is called once per loop iteration and macro call.
func (b *budget) check(r *exec.Renderer) error {
	if b.err != nil {
		return b.err
	}
	b.steps++
	switch {
	case b.steps > b.maxSteps:
		b.err = fmt.Errorf("%w: more than %d loop iterations and macro calls", ErrLimit, b.maxSteps)
	case b.steps&15 == 0 && b.ctx.Err() != nil:
		b.err = fmt.Errorf("%w: render stopped: %v", ErrLimit, context.Cause(b.ctx))
	case b.steps&15 == 0 && deeperThan(maxStackFrames):
		b.err = fmt.Errorf("%w: template recursion deeper than the stack bound", ErrLimit)
	}
	if b.err == nil {
		// Macro bodies and recursive loops render into their own buffers.
		switch w := r.Output.(type) {
		case *strings.Builder:
			if w.Len() > b.maxOut {
				b.err = fmt.Errorf("%w: output longer than %d bytes", ErrLimit, b.maxOut)
			}
		case *bytes.Buffer:
			if w.Len() > b.maxOut {
				b.err = fmt.Errorf("%w: output longer than %d bytes", ErrLimit, b.maxOut)
			}
		}
	}
	return b.err
}

func deeperThan(frames int) bool {
	var pc [1]uintptr
	return runtime.Callers(frames, pc[:]) > 0
}

// budgetNode is injected at the head of every block body of a parsed
// template, so each loop iteration and macro call spends budget.
type budgetNode struct{ tok *tokens.Token }

func (n *budgetNode) Position() *tokens.Token { return n.tok }
func (n *budgetNode) String() string          { return "budget" }

// Execute spends one step of the render's budget.
func (n *budgetNode) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	v, ok := r.Environment.Context.Get(budgetKey)
	if !ok {
		return nil
	}
	b, ok := v.(*budget)
	if !ok {
		return nil
	}
	return b.check(r)
}

// Names of the filters the AST pass routes `*` and `**` through; a
// template cannot spell them (NUL byte).
const (
	mulFilter      = "\x00mul"
	powFilter      = "\x00pow"
	modFilter      = "\x00mod"
	divFilter      = "\x00div"
	floorDivFilter = "\x00floordiv"
)

var outputType = reflect.TypeFor[*nodes.Output]()

// instrument rewrites a parsed template in place:
//   - a budget node is prepended to every *nodes.Wrapper (loop bodies,
//     macro bodies, if branches, ...), so each iteration and call spends
//     budget;
//   - dict(k=v, ...) becomes a dict literal with the keys in source order
//     (gonja's dict() sees its keyword arguments as a Go map);
//   - the value of every {% set obj.attr = value %} passes nsGuardFilter(obj), so that a
//     namespace cannot be made to contain itself (nsguard.go);
//   - the operators *, **, %, / and // become a filter over the pair
//     [a, b] that computes them with Python semantics and bounded size
//     (gonja would allocate 'x' * 10**12, turns 2 ** 10 into a float,
//     panics on 'x%s' % y and truncates -7 // 2 toward zero).
//
// It reports false when the tree is deeper than maxWalkDepth: a node it did
// not reach would render without budget or guards, so the template must be
// refused.
func instrument(root *nodes.Template) bool {
	complete := true
	seen := map[uintptr]bool{}
	wrappedCalls := map[*nodes.Call]bool{}
	wrapperType := reflect.TypeFor[*nodes.Wrapper]()
	exprType := reflect.TypeFor[nodes.Expression]()
	rewrite := func(v reflect.Value) {
		if !v.IsValid() || v.Kind() != reflect.Interface || v.IsNil() || !v.CanInterface() {
			return
		}
		if n, ok := v.Interface().(*nodes.None); ok {
			// The literal none evaluates to the None sentinel (see pynone.go).
			if v.CanSet() && v.Type() == exprType {
				tok := &tokens.Token{Type: tokens.Name, Val: noneName}
				if n.Location != nil {
					tok.Pos, tok.Line, tok.Col = n.Location.Pos, n.Location.Line, n.Location.Col
				}
				v.Set(reflect.ValueOf(nodes.Expression(&nodes.Name{Name: tok})))
			}
			return
		}
		if call, ok := v.Interface().(*nodes.Call); ok {
			if d := orderedDictCall(call); d != nil && v.CanSet() && v.Type() == exprType {
				v.Set(reflect.ValueOf(nodes.Expression(d)))
				return
			}
			// Every other call's result is charged to the value budget.
			if !wrappedCalls[call] && call.Location != nil && v.CanSet() && v.Type() == exprType {
				wrappedCalls[call] = true
				v.Set(reflect.ValueOf(nodes.Expression(&nodes.FilteredExpression{
					Expression: call,
					Filters:    []*nodes.FilterCall{{Token: call.Location, Name: callFilter, Kwargs: map[string]nodes.Expression{}}},
				})))
			}
			return
		}
		be, ok := v.Interface().(*nodes.BinaryExpression)
		if !ok || be.Operator == nil || be.Operator.Token == nil {
			return
		}
		name := ""
		switch be.Operator.Token.Type {
		case tokens.Multiply:
			name = mulFilter
		case tokens.Power:
			name = powFilter
		case tokens.Modulo:
			name = modFilter
		case tokens.Division:
			name = divFilter
		case tokens.FloorDivision:
			name = floorDivFilter
		case tokens.Tilde:
			name = concatFilter
		case tokens.Addition:
			name = addFilter
		default:
			return
		}
		fe := &nodes.FilteredExpression{
			Expression: &nodes.List{Location: be.Operator.Token, Val: []nodes.Expression{be.Left, be.Right}},
			Filters:    []*nodes.FilterCall{{Token: be.Operator.Token, Name: name, Kwargs: map[string]nodes.Expression{}}},
		}
		if v.CanSet() && v.Type() == exprType {
			v.Set(reflect.ValueOf(nodes.Expression(fe)))
		}
	}
	var walk func(v reflect.Value, depth int)
	walk = func(v reflect.Value, depth int) {
		if !v.IsValid() {
			return
		}
		if depth > maxWalkDepth {
			complete = false
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			p := v.Pointer()
			if seen[p] {
				return
			}
			seen[p] = true
			if v.Type() == outputType && v.CanInterface() {
				o := v.Interface().(*nodes.Output)
				wrap := func(e nodes.Expression) nodes.Expression {
					if e == nil {
						return nil
					}
					return &nodes.FilteredExpression{Expression: e, Filters: []*nodes.FilterCall{{Token: o.Start, Name: printFilter, Kwargs: map[string]nodes.Expression{}}}}
				}
				o.Expression, o.Alternative = wrap(o.Expression), wrap(o.Alternative)
			}
			if setStatement(v) {
				guardNamespaceSet(v.Elem())
			}
			if fcs, ok := interfaceOf(v).(*controlStructures.ForControlStructure); ok && fcs.ObjectEvaluator != nil {
				tok := fcs.ObjectEvaluator.Position()
				if tok == nil {
					tok = &tokens.Token{}
				}
				fcs.ObjectEvaluator = &nodes.FilteredExpression{
					Expression: fcs.ObjectEvaluator,
					Filters:    []*nodes.FilterCall{{Token: tok, Name: iterFilter, Kwargs: map[string]nodes.Expression{}}},
				}
			}
			if v.Type() == wrapperType && v.CanInterface() {
				w := v.Interface().(*nodes.Wrapper)
				tok := w.Location
				if tok == nil {
					tok = &tokens.Token{}
				}
				w.Nodes = append([]nodes.Node{&nodes.ControlStructureBlock{Location: tok, Name: "budget", ControlStructure: &budgetNode{tok: tok}}}, w.Nodes...)
			}
			walk(v.Elem(), depth+1)
		case reflect.Interface:
			rewrite(v)
			walk(v.Elem(), depth+1)
		case reflect.Struct:
			if v.Type().PkgPath() == "github.com/nikolalohinski/gonja/v2/tokens" {
				return
			}
			for i := range v.NumField() {
				f := v.Field(i)
				if !f.CanSet() && f.CanAddr() {
					// gonja keeps some control structures' expressions
					// and bodies (set, with, filter, ...) in unexported
					// fields; they are rewritten like the others.
					f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
				}
				walk(f, depth+1)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), depth+1)
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				e := it.Value()
				if v.CanInterface() && e.Kind() == reflect.Interface && e.Type() == exprType && v.Type().Elem() == exprType {
					c := reflect.New(exprType).Elem()
					c.Set(e)
					rewrite(c)
					v.SetMapIndex(it.Key(), c)
					walk(c, depth+1)
					continue
				}
				walk(e, depth+1)
			}
		}
	}
	walk(reflect.ValueOf(root), 0)
	return complete
}

// interfaceOf is v.Interface(), or nil where reflection forbids it.
func interfaceOf(v reflect.Value) any {
	if !v.CanInterface() {
		return nil
	}
	return v.Interface()
}

// orderedDictCall returns the dict literal equivalent to a call
// dict(k1=v1, k2=v2, ...) with keys in source order, or nil.
func orderedDictCall(call *nodes.Call) *nodes.Dict {
	name, ok := call.Func.(*nodes.Name)
	if !ok || name.Name == nil || name.Name.Val != "dict" || len(call.Args) > 0 || len(call.Kwargs) == 0 || call.Location == nil {
		return nil
	}
	keys := make([]string, 0, len(call.Kwargs))
	for k := range call.Kwargs {
		keys = append(keys, k)
	}
	pos := func(k string) int {
		if t := call.Kwargs[k].Position(); t != nil {
			return t.Pos
		}
		return 0
	}
	sort.SliceStable(keys, func(a, b int) bool { return pos(keys[a]) < pos(keys[b]) })
	d := &nodes.Dict{Token: call.Location}
	for _, k := range keys {
		tok := &tokens.Token{Type: tokens.String, Val: k, Pos: call.Location.Pos, Line: call.Location.Line, Col: call.Location.Col}
		d.Pairs = append(d.Pairs, &nodes.Pair{Key: &nodes.String{Location: tok, Val: k}, Value: call.Kwargs[k]})
	}
	return d
}

var (
	envOnce sync.Once
	hfEnv   *exec.Environment
)

// builtinFilterNames are gonja's filters (and jinja2's that it may add),
// each wrapped by boundFilter.
var builtinFilterNames = []string{
	"abs", "attr", "batch", "capitalize", "center", "default", "d", "dictsort",
	"e", "escape", "filesizeformat", "first", "float", "forceescape", "format",
	"groupby", "indent", "int", "join", "items", "last", "length", "count",
	"list", "lower", "map", "max", "min", "pprint", "random", "rejectattr",
	"reject", "replace", "reverse", "round", "safe", "selectattr", "select",
	"slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim",
	"truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
	"wordwrap", "xmlattr",
}

// hfEnvironment builds (once) the gonja environment that mirrors HF's.
// gonja's package-level defaults are never modified.
func hfEnvironment() *exec.Environment {
	envOnce.Do(func() {
		gonja.SetLoggerOutput(io.Discard)
		filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
		_ = filters.Replace("tojson", filterToJSON)
		for _, n := range []string{"center", "indent", "wordwrap", "truncate", "filesizeformat", "batch", "slice"} {
			if f, ok := filters.Get(n); ok {
				_ = filters.Replace(n, boundedFilter(f, n))
			}
		}
		_ = filters.Register(mulFilter, filterMul)
		_ = filters.Register(powFilter, filterPow)
		_ = filters.Register(modFilter, filterMod)
		_ = filters.Register(divFilter, filterDiv)
		_ = filters.Register(floorDivFilter, filterFloorDiv)
		_ = filters.Replace("format", filterFormat)
		_ = filters.Register(printFilter, filterPrint)
		_ = filters.Register(concatFilter, filterConcat)
		_ = filters.Replace("default", filterDefault)
		_ = filters.Replace("d", filterDefault)
		_ = filters.Replace("trim", filterTrim)
		_ = filters.Replace("string", filterString)
		_ = filters.Replace("items", filterItems)
		_ = filters.Replace("dictsort", filterDictSort)
		_ = filters.Register(addFilter, filterAdd)
		_ = filters.Register(callFilter, filterCall)
		_ = filters.Register(iterFilter, filterIter)
		_ = filters.Register(nsGuardFilter, filterNSGuard)
		for _, n := range append(builtinFilterNames, mulFilter, powFilter, modFilter, divFilter, floorDivFilter, printFilter, concatFilter, addFilter, nsGuardFilter) {
			if f, ok := filters.Get(n); ok {
				_ = filters.Replace(n, boundFilter(f, n))
			}
		}
		tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
		_ = tests.Replace("defined", testDefined)
		_ = tests.Replace("undefined", testUndefined)
		cs := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
		_ = cs.Register("generation", generationParser)
		globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
		globals.Set("range", pyRange)
		globals.Set("raise_exception", raiseException)
		globals.Set("lipsum", lipsum)
		globals.Set(noneName, pyNone)
		globals.Set("none", pyNone) // gonja parses lowercase none as a name
		hfEnv = &exec.Environment{
			Context:           globals,
			Filters:           filters,
			Tests:             tests,
			ControlStructures: cs,
			Methods:           hfMethods(),
		}
	})
	return hfEnv
}

func hfConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	c.AutoEscape = false
	c.StrictUndefined = false
	return c
}

// ParseJinja compiles a chat template (the "chat_template" string of a
// tokenizer_config.json). Errors wrap ErrSyntax, or ErrLimit for a source
// over MaxTemplateBytes, blocks or brackets nested deeper than
// MaxTemplateNesting, or an expression nested deeper than
// 2 x MaxTemplateNesting nodes (operators, filters, calls, attributes and
// items). opts may be nil.
func ParseJinja(src string, opts *JinjaOptions) (j *Jinja, err error) {
	defer func() {
		if r := recover(); r != nil {
			j, err = nil, fmt.Errorf("%w: parser panic: %v", ErrSyntax, r)
		}
	}()
	if err := checkTemplateSource(src); err != nil {
		return nil, err
	}
	t, err := exec.NewTemplate("/chat_template", hfConfig(), &sourceLoader{src: src}, hfEnvironment())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, trimSource(err, src))
	}
	if err := checkTreeDepth(t.Root()); err != nil {
		return nil, err
	}
	if !instrument(t.Root()) {
		return nil, fmt.Errorf("%w: template nested deeper than %d", ErrLimit, MaxTemplateNesting)
	}
	j = &Jinja{tmpl: t}
	if opts != nil {
		j.opts = *opts
	}
	return j, nil
}

// trimSource drops the template source that gonja quotes in parse errors.
func trimSource(err error, src string) string {
	s := err.Error()
	if src != "" {
		s = strings.ReplaceAll(s, src, "<template>")
	}
	return s
}

type limitedWriter struct {
	b   strings.Builder
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, fmt.Errorf("%w: output longer than %d bytes", ErrLimit, w.max)
	}
	return w.b.Write(p)
}

// Render renders the template with vars as its top-level variables.
// Values may be json.RawMessage (decoded with key order kept), strings,
// booleans, numbers, nil, or any value encoding/json can marshal (maps
// then come out key-sorted). Errors: ErrRender (including
// raise_exception, whose message is kept), ErrLimit (output size, steps,
// recursion depth, time, the size of a built value or of all of them;
// ctx cancellation), ErrUnserializable. Messages name the cause and the
// template line ("division by zero at line 3").
func (j *Jinja) Render(ctx context.Context, vars map[string]any) (out string, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	maxDur := j.opts.MaxDuration
	if maxDur <= 0 {
		maxDur = DefaultMaxDuration
	}
	ctx, cancel := context.WithTimeoutCause(ctx, maxDur, fmt.Errorf("render took longer than %v", maxDur))
	defer cancel()
	maxOut := j.opts.MaxOutputBytes
	if maxOut <= 0 {
		maxOut = DefaultMaxOutputBytes
	}
	maxSteps := j.opts.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	data := map[string]any{}
	for k, v := range vars {
		gv, err := toGonja(v)
		if err != nil {
			return "", fmt.Errorf("%w: variable %q: %v", ErrRender, k, err)
		}
		data[k] = gv
	}
	maxValue := j.opts.MaxValueBytes
	if maxValue <= 0 {
		maxValue = maxOut
	}
	maxAlloc := j.opts.MaxAllocBytes
	if maxAlloc <= 0 {
		maxAlloc = DefaultAllocFactor * int64(maxValue)
	}
	b := &budget{ctx: ctx, maxSteps: maxSteps, maxOut: maxOut, maxValue: maxValue, maxAlloc: maxAlloc}
	data[budgetKey] = b
	now := j.opts.Now
	if now == nil {
		now = time.Now
	}
	data["strftime_now"] = func(format string) string { return strftime(now(), format) }
	data["raise_exception"] = func(msg string) (string, error) {
		_, err := raiseException(msg)
		b.lastErr = err // gonja flattens errors into text; keep its type
		return "", err
	}
	data["range"] = func(va *exec.VarArgs) ([]int, error) {
		r, err := pyRange(va)
		if err != nil && errors.Is(err, ErrLimit) && b.err == nil {
			b.err = err
		}
		return r, err
	}

	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w: panic: %v", ErrRender, r)
		}
	}()
	w := &limitedWriter{max: maxOut}
	if err := j.tmpl.Execute(w, exec.NewContext(data)); err != nil {
		return "", classifyRenderError(err, b)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrLimit, context.Cause(ctx))
	}
	return w.b.String(), nil
}

// raisedError is what raise_exception returns; its text is the template's.
type raisedError struct{ msg string }

func (e *raisedError) Error() string { return e.msg }

func raiseException(msg string) (string, error) {
	return "", &raisedError{msg: msg}
}

// classifyRenderError maps a gonja render error onto this package's
// sentinels with a short message: the innermost cause and the template
// line ("division by zero at line 3"), without gonja's node and token
// dumps.
func classifyRenderError(err error, b *budget) error {
	full := err.Error()
	where := ""
	if m := tokenLineRe.FindAllStringSubmatch(full, -1); len(m) > 0 {
		where = " at line " + m[len(m)-1][1]
	} else if m := atLineRe.FindAllStringSubmatch(full, -1); len(m) > 0 {
		where = " at line " + m[len(m)-1][1]
	}
	if b.err != nil {
		return fmt.Errorf("%w%s", b.err, where)
	}
	var re *raisedError
	if errors.As(err, &re) || (errors.As(b.lastErr, &re) && strings.Contains(full, re.msg)) {
		return fmt.Errorf("%w: raise_exception: %s", ErrRender, re.msg)
	}
	cause := err
	for {
		var next error
		if u, ok := cause.(interface{ Unwrap() error }); ok {
			next = u.Unwrap()
		} else if c, ok := cause.(interface{ Cause() error }); ok {
			next = c.Cause()
		}
		if next == nil {
			break
		}
		cause = next
	}
	if _, ok := cause.(*raisedError); ok {
		return fmt.Errorf("%w: raise_exception: %s", ErrRender, cause.Error())
	}
	// gonja flattens the errors filters and methods return into text; the
	// filters of this package keep the last one with its type, and the
	// sentinels' texts are recognised.
	for _, sentinel := range []error{ErrLimit, ErrUnserializable} {
		if i := strings.LastIndex(full, sentinel.Error()+": "); i >= 0 && !errors.Is(cause, sentinel) {
			rest := full[i+len(sentinel.Error())+2:]
			if j := strings.Index(rest, " &{<Token"); j >= 0 {
				rest = rest[:j]
			}
			return fmt.Errorf("%w: %s%s", sentinel, strings.TrimSuffix(strings.TrimSpace(rest), ":"), where)
		}
	}
	if b.lastErr != nil && strings.Contains(full, b.lastErr.Error()) {
		cause = b.lastErr
	}
	switch {
	case errors.Is(cause, ErrLimit) || errors.Is(err, ErrLimit):
		return fmt.Errorf("%w%s", cause, where)
	case errors.Is(cause, ErrUnserializable) || errors.Is(err, ErrUnserializable):
		return fmt.Errorf("%w%s", cause, where)
	case cause == b.lastErr:
		return fmt.Errorf("%w: %v%s", ErrRender, cause, where)
	}
	return fmt.Errorf("%w: %s%s", ErrRender, shortGonjaMessage(cause.Error()), where)
}

var (
	tokenLineRe = regexp.MustCompile(`<Token\[[^\]]*\] Val='(?:[^'\\]|\\.)*' Pos=\d+ Line=(\d+)`)
	atLineRe    = regexp.MustCompile(`\bat line (\d+)`)
	tokenDumpRe = regexp.MustCompile(`&\{<Token\[[^\]]*\][^}]*\}`)
	filterErrRe = regexp.MustCompile(`invalid call to filter '[^']*': `)
)

// shortGonjaMessage keeps the last, most specific part of a gonja error
// text ("Unable to evaluate x: Unable to evaluate x.y: Can't use Getitem
// on None" -> "Can't use Getitem on None").
func shortGonjaMessage(s string) string {
	if locs := filterErrRe.FindAllStringIndex(s, -1); len(locs) > 0 {
		s = s[locs[len(locs)-1][1]:]
	}
	s = tokenDumpRe.ReplaceAllString(s, "")
	parts := strings.Split(s, ": ")
	for i := len(parts) - 1; i >= 0; i-- {
		if p := strings.TrimSpace(parts[i]); p != "" {
			return p
		}
	}
	return strings.TrimSpace(s)
}

// JinjaInput holds what transformers' apply_chat_template passes to a
// chat template.
type JinjaInput struct {
	// Messages is the JSON array of message objects (key order kept).
	Messages json.RawMessage
	// Tools is the JSON array of tool schemas, or empty for None.
	Tools json.RawMessage
	// Documents is the JSON array of documents, or empty for None.
	Documents json.RawMessage
	// AddGenerationPrompt asks the template to open an assistant turn.
	AddGenerationPrompt bool
	// SpecialTokens are the tokenizer's special tokens by name
	// (bos_token, eos_token, pad_token, unk_token, ...).
	SpecialTokens map[string]string
	// Kwargs are extra template variables (chat_template_kwargs), as JSON.
	Kwargs map[string]json.RawMessage
}

// RenderChat renders a conversation as transformers'
// tokenizer.apply_chat_template(messages, tools=..., tokenize=False,
// add_generation_prompt=..., **kwargs) does.
func (j *Jinja) RenderChat(ctx context.Context, in *JinjaInput) (string, error) {
	vars := map[string]any{}
	for k, v := range in.SpecialTokens {
		vars[k] = v
	}
	for k, v := range in.Kwargs {
		vars[k] = v
	}
	raw := func(r json.RawMessage) any {
		if len(bytes.TrimSpace(r)) == 0 {
			return pyNone // HF passes tools=None, documents=None
		}
		return r
	}
	if in.Messages == nil {
		return "", fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	vars["messages"] = in.Messages
	vars["tools"] = raw(in.Tools)
	vars["documents"] = raw(in.Documents)
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	return j.Render(ctx, vars)
}

// bigInt is an integer beyond int64 (Python ints are unbounded): it prints
// and serializes exactly.
type bigInt struct{ text string }

func (b bigInt) String() string          { return b.text }
func (b bigInt) toOrdered() (any, error) { return pyInt{b.text}, nil }

// toGonja converts a variable for the template: JSON becomes *exec.Dict
// (ordered), []any, string, int, float64, bool or nil.
func toGonja(v any) (any, error) {
	switch t := v.(type) {
	case json.RawMessage:
		o, err := decodeOrdered(t)
		if err != nil {
			return nil, err
		}
		return orderedToGonja(o), nil
	case []byte:
		return toGonja(json.RawMessage(t))
	case *pyNoneT:
		return t, nil
	case nil, string, bool, int, int64, float64:
		return t, nil
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return toGonja(json.RawMessage(data))
	}
}

func orderedToGonja(v any) any {
	switch t := v.(type) {
	case *jsonObject:
		if len(t.Keys) == 0 {
			return map[string]any{} // falsy, like Python's {}
		}
		d := &exec.Dict{Pairs: make([]*exec.Pair, len(t.Keys))}
		for i, k := range t.Keys {
			d.Pairs[i] = &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(orderedToGonja(t.Values[i]))}
		}
		return d
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = orderedToGonja(e)
		}
		return out
	case pyInt:
		var n int64
		if _, err := fmt.Sscan(t.text, &n); err == nil && fmt.Sprint(n) == t.text {
			return int(n)
		}
		return bigInt{t.text}
	case pyFloat:
		return float64(t)
	case nil:
		return pyNone
	}
	return v
}

// gonjaToOrdered converts a template value back to the ordered JSON model
// for tojson; unsupported types are ErrUnserializable (Python's TypeError).
func gonjaToOrdered(v any, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("%w: value nested deeper than %d", ErrUnserializable, maxJSONDepth)
	}
	switch t := v.(type) {
	case *exec.Value:
		if t == nil || t.IsNil() {
			return nil, nil
		}
		return gonjaToOrdered(t.Interface(), depth+1)
	case nil, string, bool, pyInt, pyFloat:
		return t, nil
	case *pyNoneT:
		return nil, nil
	case bigInt:
		return pyInt{t.text}, nil
	case int:
		return pyInt{fmt.Sprint(t)}, nil
	case int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return pyInt{fmt.Sprint(t)}, nil
	case float32:
		return pyFloat(t), nil
	case float64:
		return pyFloat(t), nil
	case *exec.Dict:
		return dictToOrdered(t, depth)
	case exec.Dict:
		return dictToOrdered(&t, depth)
	case map[string]any:
		o := &jsonObject{}
		for _, k := range sortedKeys(t) {
			e, err := gonjaToOrdered(t[k], depth+1)
			if err != nil {
				return nil, err
			}
			o.set(k, e)
		}
		return o, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			break
		}
		out := make([]any, rv.Len())
		for i := range rv.Len() {
			e, err := gonjaToOrdered(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	}
	return nil, fmt.Errorf("%w: object of type %T is not JSON serializable", ErrUnserializable, v)
}

func dictToOrdered(d *exec.Dict, depth int) (any, error) {
	o := &jsonObject{}
	for _, p := range d.Pairs {
		var key string
		k := p.Key
		switch {
		case k == nil || k.IsNil():
			key = "null"
		case k.IsString():
			key = k.String()
		case k.IsBool():
			key = map[bool]string{true: "true", false: "false"}[k.Bool()]
		case k.IsInteger():
			key = fmt.Sprint(k.Integer())
		case k.IsFloat():
			key = pyFloatJSON(k.Float())
		default:
			return nil, fmt.Errorf("%w: keys must be str, int, float, bool or None", ErrUnserializable)
		}
		e, err := gonjaToOrdered(p.Value, depth+1)
		if err != nil {
			return nil, err
		}
		o.set(key, e)
	}
	return o, nil
}
