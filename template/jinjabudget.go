package template

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Value-size accounting of a Jinja render. Every operation that can build a
// value larger than its inputs (the operators ~ + * %, filters, method and
// function calls) is checked: no single value may be larger than
// JinjaOptions.MaxValueBytes, and the values built during one render may
// not add up to more than JinjaOptions.MaxAllocBytes (which bounds what a
// template can keep alive in variables, namespaces, lists and macro frames).
// Operations whose result size is known beforehand (repetition, joins,
// replace, indent, expandtabs, split, list(str)) are refused before they
// allocate.

// DefaultAllocFactor is MaxAllocBytes' default as a multiple of the value
// bound.
const DefaultAllocFactor = 16

// elemOverhead is what one list element or dict pair is counted for on
// top of its own size (a Go interface or *exec.Value plus slice slot).
const elemOverhead = 16

// methodValueCap bounds the results of str methods that are refused
// before they allocate (methods cannot see the render's own bound; the
// call's result is then checked against it).
const methodValueCap = DefaultMaxOutputBytes

// limitValue reports a value over the per-value bound.
func limitValue(what string, n, max int) error {
	return fmt.Errorf("%w: %s would build a value of %d bytes (at most %d)", ErrLimit, what, n, max)
}

// fits checks, before allocating, that a value of n bytes is allowed.
func (b *budget) fits(what string, n int) error {
	if b.err != nil {
		return b.err
	}
	if n > b.maxValue || n < 0 {
		b.err = limitValue(what, n, b.maxValue)
		return b.err
	}
	if b.ctx.Err() != nil {
		b.err = fmt.Errorf("%w: render stopped: %v", ErrLimit, context.Cause(b.ctx))
		return b.err
	}
	return nil
}

// spend counts n loop steps (items a for loop walks before its body).
func (b *budget) spend(n int) error {
	if b.err != nil {
		return b.err
	}
	b.steps += n
	if b.steps > b.maxSteps {
		b.err = fmt.Errorf("%w: more than %d loop iterations and macro calls", ErrLimit, b.maxSteps)
		return b.err
	}
	if b.ctx.Err() != nil {
		b.err = fmt.Errorf("%w: render stopped: %v", ErrLimit, context.Cause(b.ctx))
	}
	return b.err
}

// charge counts a built value of n bytes against both bounds.
func (b *budget) charge(what string, n int) error {
	if err := b.fits(what, n); err != nil {
		return err
	}
	b.alloc += int64(n)
	if b.alloc > b.maxAlloc {
		b.err = fmt.Errorf("%w: values built by the template add up to more than %d bytes", ErrLimit, b.maxAlloc)
	}
	return b.err
}

// valueSize is the approximate memory of a template value: string bytes
// plus elemOverhead per list element and dict pair, counted once per
// reference (a shared string counts each time it is referenced, as it
// would print). Counting stops past limit.
func valueSize(v any, limit int) int {
	size, _ := measure(v, limit)
	return size
}

// measure returns valueSize and the number of indent strings
// json.dumps(indent=...) writes for v (the sum over its items of their
// nesting depth). Counting stops once either passes limit.
func measure(v any, limit int) (size, indents int) {
	var walk func(v any, depth int)
	over := func() bool { return size > limit || indents > limit }
	container := func(items, depth int) { indents += (depth + 1) * (items + 1) }
	walk = func(v any, depth int) {
		if over() || depth > maxJSONDepth+8 {
			return
		}
		if xv, ok := v.(*exec.Value); ok {
			if xv == nil {
				return
			}
			v = xv.Interface()
		}
		switch t := v.(type) {
		case nil, bool, int, int64, float64, *pyNoneT:
			return
		case string:
			size += len(t)
			return
		case *exec.Dict:
			container(len(t.Pairs), depth)
			for _, p := range t.Pairs {
				size += 2 * elemOverhead
				walk(p.Key, depth+1)
				walk(p.Value, depth+1)
				if over() {
					return
				}
			}
			return
		}
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.String:
			size += rv.Len()
		case reflect.Slice, reflect.Array:
			if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
				size += rv.Len()
				return
			}
			container(rv.Len(), depth)
			size += elemOverhead * rv.Len()
			switch rv.Type().Elem().Kind() {
			case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Bool:
				return
			case reflect.String:
				for i := range rv.Len() {
					size += rv.Index(i).Len()
					if size > limit {
						return
					}
				}
				return
			}
			for i := range rv.Len() {
				if over() {
					return
				}
				walk(rv.Index(i).Interface(), depth+1)
			}
		case reflect.Map:
			container(rv.Len(), depth)
			size += 2 * elemOverhead * rv.Len()
			it := rv.MapRange()
			for it.Next() {
				if over() {
					return
				}
				if it.Key().CanInterface() {
					walk(it.Key().Interface(), depth+1)
				}
				if it.Value().CanInterface() {
					walk(it.Value().Interface(), depth+1)
				}
			}
		case reflect.Pointer:
			if !rv.IsNil() && rv.Elem().Kind() == reflect.Struct && rv.Elem().CanInterface() {
				// A namespace or other object: count its exported fields.
				e := rv.Elem()
				for i := range e.NumField() {
					if e.Field(i).CanInterface() {
						walk(e.Field(i).Interface(), depth+1)
					}
				}
			}
		}
	}
	walk(v, 0)
	return size, indents
}

// sameBacking reports whether a result is its input (or shares its
// backing memory from the start), so that pass-through filters such as
// default or first are not counted as building anything.
func sameBacking(in, out *exec.Value) bool {
	if in == nil || out == nil || !in.Val.IsValid() || !out.Val.IsValid() {
		return false
	}
	a, b := reflect.ValueOf(in.Interface()), reflect.ValueOf(out.Interface())
	if !a.IsValid() || !b.IsValid() || a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case reflect.String:
		as, bs := a.String(), b.String()
		return len(bs) <= len(as) && (len(bs) == 0 || unsafe.StringData(as) == unsafe.StringData(bs))
	case reflect.Slice:
		return a.Len() == b.Len() && a.Pointer() == b.Pointer()
	case reflect.Map, reflect.Pointer:
		return a.Pointer() == b.Pointer()
	}
	return false
}

// resultCheck charges a filter's or call's result to the render's budget.
// An error result is kept as the render's last error (gonja flattens it
// into text), and a limit error stops the render.
func resultCheck(ev *exec.Evaluator, what string, in, out *exec.Value) *exec.Value {
	b, ok := budgetOf(ev)
	if out == nil || !ok {
		return out
	}
	if out.IsError() {
		// Only the first (innermost) error is kept: errors travel outwards
		// and each level wraps the one below.
		if e, isErr := out.Interface().(error); isErr && b.lastErr == nil && (in == nil || !in.IsError()) {
			b.lastErr = e
			if errors.Is(e, ErrLimit) && b.err == nil {
				b.err = e
			}
		}
		return out
	}
	if sameBacking(in, out) {
		return out
	}
	if err := b.charge(what, valueSize(out, b.maxValue)); err != nil {
		return exec.AsValue(err)
	}
	return out
}

// callFilter is applied by the AST pass to every function and method
// call: it charges the call's result.
const callFilter = "\x00call"

func filterCall(ev *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	return resultCheck(ev, "a call", nil, in)
}

// preFilterSize estimates, before a filter runs, the size of its result
// for the filters whose result can be much larger than their input; -1
// when there is nothing to check beforehand.
func preFilterSize(name string, in *exec.Value, va *exec.VarArgs) int {
	arg := func(pos int, kw string) *exec.Value {
		if v, ok := va.KwArgs[kw]; ok {
			return v
		}
		if pos < len(va.Args) {
			return va.Args[pos]
		}
		return nil
	}
	switch name {
	case "join":
		sep := ""
		if d := arg(0, "d"); d != nil && !d.IsNil() {
			sep = d.String()
		}
		if !in.IsList() && !in.IsDict() {
			return -1
		}
		n := in.Len()
		return valueSize(in, 1<<62) + len(sep)*max(n-1, 0)
	case "indent":
		width := indentWidth(arg(0, "width"), 4)
		s := in.String()
		return len(s) + width*(strings.Count(s, "\n")+1)
	case "list":
		if in.IsString() {
			return (elemOverhead + 4) * utf8.RuneCountInString(in.String())
		}
	case "replace":
		old, nw := arg(0, "old"), arg(1, "new")
		if old == nil || nw == nil {
			return -1
		}
		s, o := in.String(), old.String()
		k := strings.Count(s, o)
		if c := arg(2, "count"); c != nil && c.IsInteger() && c.Integer() >= 0 {
			k = min(k, c.Integer())
		}
		return len(s) + k*max(len(nw.String())-len(o), 0)
	case "batch", "slice", "map", "select", "reject", "selectattr", "rejectattr", "unique", "sort", "groupby":
		if in.IsString() {
			return 2 * (elemOverhead + 4) * utf8.RuneCountInString(in.String())
		}
		if in.IsList() {
			return valueSize(in, 1<<62) + elemOverhead*in.Len()
		}
	case "tojson":
		ind := indentWidth(arg(1, "indent"), 0)
		// Strings may grow when escaped; the indentation is exact.
		size, indents := measure(in, 1<<40)
		return 2*size + (ind+1)*indents
	case "wordwrap", "escape", "e", "forceescape", "urlize", "urlencode", "xmlattr":
		// At most six bytes per input byte (&quot;), plus breaks.
		return 6 * len(in.String())
	}
	return -1
}

// indentWidth is the length of the indent an indent or tojson argument
// asks for (an int count, a string, or true for one space).
func indentWidth(v *exec.Value, def int) int {
	switch {
	case v == nil || v.IsNil():
		return def
	case v.IsInteger():
		return max(v.Integer(), 0)
	case v.IsString():
		return len(v.String())
	case v.IsBool() && v.Bool():
		return 1
	}
	return 0
}

// boundFilter wraps a filter so that its result is checked against the
// render's value budget (and, where the result's size is known first,
// refused before it is built).
func boundFilter(f exec.FilterFunction, name string) exec.FilterFunction {
	what := "filter " + name
	if strings.HasPrefix(name, "\x00") {
		what = "operator " + strings.TrimPrefix(name, "\x00")
	}
	return func(ev *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
		if b, ok := budgetOf(ev); ok && in != nil && !in.IsError() {
			if n := preFilterSize(name, in, va); n >= 0 {
				if err := b.fits(what, n); err != nil {
					return exec.AsValue(err)
				}
			}
			if iteratingFilters[name] && in.IsString() {
				// gonja indexes a string by converting it to runes for
				// every item (quadratic); hand it the characters instead.
				chars := filterIter(ev, in, nil)
				if chars.IsError() {
					return chars
				}
				in = chars
			}
		}
		return resultCheck(ev, what, in, f(ev, in, va))
	}
}

// preMethodSize bounds the str methods whose result can be much larger
// than self, before they run.
func preMethodSize(name, self string, va *exec.VarArgs) int {
	switch name {
	case "join":
		if len(va.Args) != 1 {
			return -1
		}
		it := va.Args[0]
		if !it.IsList() && !it.IsDict() && !it.IsString() {
			return -1
		}
		n := it.Len()
		return valueSize(it, 1<<62) + len(self)*max(n-1, 0)
	case "expandtabs":
		size := 8
		if len(va.Args) > 0 && va.Args[0].IsInteger() {
			size = max(va.Args[0].Integer(), 0)
		}
		return len(self) + size*strings.Count(self, "\t")
	case "split", "rsplit", "splitlines":
		sep := " "
		if len(va.Args) > 0 && va.Args[0].IsString() && va.Args[0].String() != "" {
			sep = va.Args[0].String()
		}
		return len(self) + elemOverhead*(strings.Count(self, sep)+strings.Count(self, "\n")+1)
	case "format", "format_map":
		for _, m := range fmtFieldRe.FindAllString(self, -1) {
			for _, d := range digitsRe.FindAllString(m, -1) {
				if w, err := strconv.Atoi(d); err != nil || w > maxWidthArg {
					return 1 << 62
				}
			}
		}
	}
	return -1
}

var (
	fmtFieldRe = regexp.MustCompile(`\{[^{}]*\}`)
	digitsRe   = regexp.MustCompile(`[0-9]+`)
)

// boundStrMethod refuses a str method call whose result would be over
// methodValueCap before it runs (the call's result is charged to the
// render's budget by callFilter afterwards).
func boundStrMethod(m exec.Method[string], name string) exec.Method[string] {
	return func(self string, v *exec.Value, va *exec.VarArgs) (any, error) {
		if n := preMethodSize(name, self, va); n > methodValueCap {
			if name == "format" || name == "format_map" {
				return nil, fmt.Errorf("%w: str.%s field width over %d", ErrLimit, name, maxWidthArg)
			}
			return nil, limitValue("str."+name, n, methodValueCap)
		}
		out, err := m(self, v, va)
		if rv := reflect.ValueOf(out); err == nil && rv.Kind() == reflect.String && rv.Type() != reflect.TypeFor[string]() {
			out = rv.String() // gonja's pystring results behave as str
		}
		return out, err
	}
}

// addFilter is a + b, routed through the AST pass so that list and
// string concatenation are bounded; the semantics are gonja's (list +
// list, numbers, and str(a) + str(b) when either is a string).
const addFilter = "\x00add"

func filterAdd(ev *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	if a.IsError() {
		return a
	}
	if b.IsError() {
		return b
	}
	if a.IsList() {
		if !b.IsList() {
			return exec.AsValue(fmt.Errorf("can only concatenate list (not %q) to list", b.String()))
		}
		if bg, ok := budgetOf(ev); ok {
			if err := bg.fits("operator +", valueSize(a, bg.maxValue)+valueSize(b, bg.maxValue)); err != nil {
				return exec.AsValue(err)
			}
		}
		out := make([]any, 0, a.Len()+b.Len())
		for i := range a.Len() {
			out = append(out, a.Index(i).Interface())
		}
		for i := range b.Len() {
			out = append(out, b.Index(i).Interface())
		}
		return exec.AsValue(out)
	}
	if a.IsFloat() || b.IsFloat() {
		return exec.AsValue(a.Float() + b.Float())
	}
	if a.IsString() || b.IsString() {
		as, bs := a.String(), b.String()
		if bg, ok := budgetOf(ev); ok {
			if err := bg.fits("operator +", len(as)+len(bs)); err != nil {
				return exec.AsValue(err)
			}
		}
		return exec.AsValue(as + bs)
	}
	return exec.AsValue(a.Integer() + b.Integer())
}

// iteratingFilters are the filters that iterate over their input; a
// string input is handed to them as a list of its characters.
var iteratingFilters = map[string]bool{
	"batch": true, "slice": true, "map": true, "select": true, "reject": true,
	"selectattr": true, "rejectattr": true, "unique": true, "sort": true,
	"groupby": true, "sum": true, "min": true, "max": true, "join": true, "list": true,
}

// iterFilter is applied by the AST pass to the iterable of every for
// loop: gonja first walks all items (evaluating the loop's if clause),
// so the items are counted as steps up front; a string becomes the list
// of its characters (charged to the budget), other values pass through.
const iterFilter = "\x00iter"

func filterIter(ev *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in == nil || in.IsError() || isPyNone(in) {
		return in
	}
	if b, ok := budgetOf(ev); ok && va != nil && (in.IsList() || in.IsDict()) {
		if err := b.spend(in.Len()); err != nil {
			return exec.AsValue(err)
		}
	}
	if !in.IsString() {
		return in
	}
	s := in.String()
	n := utf8.RuneCountInString(s)
	if b, ok := budgetOf(ev); ok {
		if err := b.charge("iterating a string", (elemOverhead+4)*n); err != nil {
			return exec.AsValue(err)
		}
	}
	out := make([]string, 0, n)
	for _, r := range s {
		out = append(out, string(r))
	}
	return exec.AsValue(out)
}
