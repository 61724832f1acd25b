package template

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// This file closes the gaps between gonja's defaults and the environment
// transformers renders chat templates in (jinja2's ImmutableSandboxedEnvironment
// plus HF's tojson/raise_exception/strftime_now).

// filterToJSON is HF's tojson(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False) = json.dumps with those arguments.
func filterToJSON(ev *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	args := map[string]*exec.Value{}
	if len(params.Args) > len(names) {
		return exec.AsValue(fmt.Errorf("tojson() takes at most %d arguments", len(names)))
	}
	for i, a := range params.Args {
		args[names[i]] = a
	}
	for k, v := range params.KwArgs {
		found := false
		for _, n := range names {
			if n == k {
				found = true
			}
		}
		if !found {
			return exec.AsValue(fmt.Errorf("tojson() got an unexpected keyword argument %q", k))
		}
		if _, dup := args[k]; dup {
			return exec.AsValue(fmt.Errorf("tojson() got multiple values for argument %q", k))
		}
		args[k] = v
	}
	o := &dumpOptions{}
	if v := args["ensure_ascii"]; v != nil {
		o.EnsureASCII = v.IsTrue()
	}
	if v := args["sort_keys"]; v != nil {
		o.SortKeys = v.IsTrue()
	}
	if v := args["indent"]; v != nil && !v.IsNil() {
		var ind string
		switch {
		case v.IsString():
			ind = v.String()
		case v.IsBool():
			if v.Bool() {
				ind = " "
			}
		case v.IsInteger():
			if n := v.Integer(); n > 0 {
				if n > 1024 {
					return exec.AsValue(fmt.Errorf("%w: tojson indent %d", ErrLimit, n))
				}
				ind = strings.Repeat(" ", n)
			}
		default:
			return exec.AsValue(fmt.Errorf("tojson: indent must be an int or a string"))
		}
		o.Indent = &ind
	}
	if v := args["separators"]; v != nil && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 || !v.Index(0).IsString() || !v.Index(1).IsString() {
			return exec.AsValue(fmt.Errorf("tojson: separators must be a pair of strings"))
		}
		o.ItemSep, o.KeySep = v.Index(0).String(), v.Index(1).String()
		o.SepsSet = true
	}
	val, err := gonjaToOrdered(in, 0)
	var s string
	if err == nil {
		s, err = dumpWith(val, o)
	}
	if err != nil {
		// gonja flattens error chains; keep the typed error for Render.
		if e, ok := budgetOf(ev); ok && e.err == nil {
			e.err = err
		}
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(s)
}

// pyRange is jinja2's sandboxed range: Python's range, refusing more than
// MaxRange items.
func pyRange(va *exec.VarArgs) ([]int, error) {
	var start, stop, step int = 0, 0, 1
	for _, a := range va.Args {
		if !a.IsInteger() {
			return nil, fmt.Errorf("range() arguments must be integers")
		}
	}
	switch len(va.Args) {
	case 1:
		stop = va.Args[0].Integer()
	case 2:
		start, stop = va.Args[0].Integer(), va.Args[1].Integer()
	case 3:
		start, stop, step = va.Args[0].Integer(), va.Args[1].Integer(), va.Args[2].Integer()
	default:
		return nil, fmt.Errorf("range expected 1 to 3 arguments, got %d", len(va.Args))
	}
	if step == 0 {
		return nil, fmt.Errorf("range() arg 3 must not be zero")
	}
	var n int
	switch {
	case step > 0 && stop > start:
		n = int((int64(stop) - int64(start) + int64(step) - 1) / int64(step))
	case step < 0 && stop < start:
		n = int((int64(start) - int64(stop) - int64(step) - 1) / -int64(step))
	}
	if n > MaxRange || n < 0 {
		return nil, fmt.Errorf("%w: range of %d items (the sandbox allows %d)", ErrLimit, n, MaxRange)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = start + i*step
	}
	return out, nil
}

// strftime formats t with Python's strftime directives (the C-locale
// ones: %a %A %b %B %c %d %e %H %I %j %m %M %p %S %y %Y %z %Z %%, and
// glibc's %-d style no-padding flag).
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		noPad := false
		if format[i] == '-' && i+1 < len(format) {
			noPad = true
			i++
		}
		pad := func(n, w int) string {
			s := strconv.Itoa(n)
			if noPad {
				return s
			}
			for len(s) < w {
				s = "0" + s
			}
			return s
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			b.WriteString(pad(t.Day(), 2))
		case 'e':
			b.WriteString(fmt.Sprintf("%2d", t.Day()))
		case 'H':
			b.WriteString(pad(t.Hour(), 2))
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			b.WriteString(pad(h, 2))
		case 'j':
			b.WriteString(pad(t.YearDay(), 3))
		case 'm':
			b.WriteString(pad(int(t.Month()), 2))
		case 'M':
			b.WriteString(pad(t.Minute(), 2))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'S':
			b.WriteString(pad(t.Second(), 2))
		case 'y':
			b.WriteString(pad(t.Year()%100, 2))
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if noPad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// optString reads an optional str-or-None positional/keyword argument.
func optString(va *exec.VarArgs, pos int, name string) (s string, set bool, err error) {
	var v *exec.Value
	if pos < len(va.Args) {
		v = va.Args[pos]
	}
	if kv, ok := va.KwArgs[name]; ok {
		v = kv
	}
	if v == nil || v.IsNil() {
		return "", false, nil
	}
	if !v.IsString() {
		return "", false, fmt.Errorf("%s must be str or None", name)
	}
	return v.String(), true, nil
}

func optInt(va *exec.VarArgs, pos int, name string, def int) (int, error) {
	var v *exec.Value
	if pos < len(va.Args) {
		v = va.Args[pos]
	}
	if kv, ok := va.KwArgs[name]; ok {
		v = kv
	}
	if v == nil || v.IsNil() {
		return def, nil
	}
	if !v.IsInteger() {
		return 0, fmt.Errorf("%s must be an integer", name)
	}
	return v.Integer(), nil
}

func stripMethod(left, right bool) exec.Method[string] {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		if len(va.Args) > 1 {
			return nil, fmt.Errorf("strip expected at most 1 argument")
		}
		chars, set, err := optString(va, 0, "chars")
		if err != nil {
			return nil, err
		}
		f := pyIsSpace
		if set {
			f = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		if left {
			self = strings.TrimLeftFunc(self, f)
		}
		if right {
			self = strings.TrimRightFunc(self, f)
		}
		return self, nil
	}
}

// pySplit is Python's str.split(sep=None, maxsplit=-1).
func pySplit(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
	sep, set, err := optString(va, 0, "sep")
	if err != nil {
		return nil, err
	}
	maxsplit, err := optInt(va, 1, "maxsplit", -1)
	if err != nil {
		return nil, err
	}
	if set {
		if sep == "" {
			return nil, fmt.Errorf("empty separator")
		}
		return strings.SplitN(self, sep, maxsplitN(maxsplit)), nil
	}
	// Whitespace runs; leading/trailing whitespace ignored.
	out := []string{}
	s := strings.TrimLeftFunc(self, pyIsSpace)
	for s != "" {
		if maxsplit >= 0 && len(out) == maxsplit {
			out = append(out, s)
			break
		}
		i := strings.IndexFunc(s, pyIsSpace)
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		s = strings.TrimLeftFunc(s[i:], pyIsSpace)
	}
	return out, nil
}

func maxsplitN(maxsplit int) int {
	if maxsplit < 0 {
		return -1
	}
	return maxsplit + 1
}

// pyReplace is Python's str.replace(old, new, count=-1).
func pyReplace(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
	if len(va.Args) < 2 {
		return nil, fmt.Errorf("replace expected at least 2 arguments")
	}
	if !va.Args[0].IsString() || !va.Args[1].IsString() {
		return nil, fmt.Errorf("replace arguments must be str")
	}
	count, err := optInt(va, 2, "count", -1)
	if err != nil {
		return nil, err
	}
	old, nw := va.Args[0].String(), va.Args[1].String()
	k := strings.Count(self, old)
	if count >= 0 {
		k = min(k, count)
	}
	if n := len(self) + k*max(len(nw)-len(old), 0); len(nw) > len(old) && (k > methodValueCap || n > methodValueCap) {
		return nil, limitValue("str.replace", n, methodValueCap)
	}
	return strings.Replace(self, old, nw, count), nil
}

// strMethodNames are gonja's built-in str methods kept as they are.
var strMethodNames = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode",
	"expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii",
	"isdecimal", "isdigit", "islower", "isnumeric", "isprintable", "isspace", "istitle",
	"isupper", "join", "ljust", "lower", "partition", "removeprefix", "removesuffix",
	"rfind", "rjust", "rpartition", "rsplit", "splitlines", "swapcase",
	"title", "upper", "zfill",
}

func unsafeMethod[T any](typ, name string) exec.Method[T] {
	return func(T, *exec.Value, *exec.VarArgs) (any, error) {
		return nil, fmt.Errorf("access to attribute '%s' of '%s' object is unsafe", name, typ)
	}
}

// orderedPairs returns the (key, value) pairs of a dict value in Python's
// order: insertion order for *exec.Dict, sorted keys for a Go map.
func orderedPairs(self map[string]any, v *exec.Value) [][2]any {
	un := func(x any) any {
		if xv, ok := x.(*exec.Value); ok {
			return xv.Interface()
		}
		return x
	}
	var out [][2]any
	if v != nil {
		switch d := v.Interface().(type) {
		case *exec.Dict:
			for _, p := range d.Pairs {
				out = append(out, [2]any{un(p.Key), un(p.Value)})
			}
			return out
		case exec.Dict:
			for _, p := range d.Pairs {
				out = append(out, [2]any{un(p.Key), un(p.Value)})
			}
			return out
		}
	}
	if self == nil && v != nil {
		self, _ = v.Interface().(map[string]any)
	}
	for _, k := range sortedKeys(self) {
		out = append(out, [2]any{k, self[k]})
	}
	return out
}

func hfMethods() exec.Methods {
	str := map[string]exec.Method[string]{}
	for _, n := range strMethodNames {
		if m, ok := builtins.Methods.Str.Get(n); ok {
			str[n] = m
		}
	}
	for _, n := range []string{"center", "ljust", "rjust", "zfill", "expandtabs"} {
		if m, ok := str[n]; ok {
			str[n] = boundedMethod(m, n)
		}
	}
	str["strip"] = stripMethod(true, true)
	str["lstrip"] = stripMethod(true, false)
	str["rstrip"] = stripMethod(false, true)
	str["split"] = pySplit
	str["startswith"] = affixMethod(strings.HasPrefix, "startswith")
	str["endswith"] = affixMethod(strings.HasSuffix, "endswith")
	str["replace"] = pyReplace
	for n, m := range str {
		str[n] = boundStrMethod(m, n)
	}

	dict := map[string]exec.Method[map[string]any]{
		"keys": func(self map[string]any, v *exec.Value, va *exec.VarArgs) (any, error) {
			var out []any
			for _, p := range orderedPairs(self, v) {
				out = append(out, p[0])
			}
			return append([]any{}, out...), nil
		},
		"values": func(self map[string]any, v *exec.Value, va *exec.VarArgs) (any, error) {
			out := []any{}
			for _, p := range orderedPairs(self, v) {
				out = append(out, p[1])
			}
			return out, nil
		},
		"items": func(self map[string]any, v *exec.Value, va *exec.VarArgs) (any, error) {
			out := []any{}
			for _, p := range orderedPairs(self, v) {
				out = append(out, pyTuple{p[0], p[1]})
			}
			return out, nil
		},
		"get": func(self map[string]any, v *exec.Value, va *exec.VarArgs) (any, error) {
			if len(va.Args) < 1 || len(va.Args) > 2 {
				return nil, fmt.Errorf("get expected 1 or 2 arguments")
			}
			key := va.Args[0]
			for _, p := range orderedPairs(self, v) {
				if exec.ToValue(p[0]).EqualValueTo(key) {
					return p[1], nil
				}
			}
			if len(va.Args) == 2 {
				return va.Args[1].Interface(), nil
			}
			return nil, nil
		},
		"copy": func(self map[string]any, v *exec.Value, va *exec.VarArgs) (any, error) {
			d := &exec.Dict{}
			for _, p := range orderedPairs(self, v) {
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.ToValue(p[0]), Value: exec.ToValue(p[1])})
			}
			return d, nil
		},
	}
	for _, n := range []string{"pop", "popitem", "setdefault", "update", "clear"} {
		dict[n] = unsafeMethod[map[string]any]("dict", n)
	}

	list := map[string]exec.Method[[]any]{
		"copy": func(self []any, _ *exec.Value, _ *exec.VarArgs) (any, error) {
			return append([]any{}, self...), nil
		},
		"index": func(self []any, _ *exec.Value, va *exec.VarArgs) (any, error) {
			if len(va.Args) != 1 {
				return nil, fmt.Errorf("index expected 1 argument")
			}
			for i, e := range self {
				if exec.ToValue(e).EqualValueTo(va.Args[0]) {
					return i, nil
				}
			}
			return nil, fmt.Errorf("%s is not in list", va.Args[0].String())
		},
		"count": func(self []any, _ *exec.Value, va *exec.VarArgs) (any, error) {
			if len(va.Args) != 1 {
				return nil, fmt.Errorf("count expected 1 argument")
			}
			n := 0
			for _, e := range self {
				if exec.ToValue(e).EqualValueTo(va.Args[0]) {
					n++
				}
			}
			return n, nil
		},
	}
	for _, n := range []string{"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"} {
		list[n] = unsafeMethod[[]any]("list", n)
	}
	return exec.Methods{
		Bool:  builtins.Methods.Bool,
		Int:   builtins.Methods.Int,
		Float: builtins.Methods.Float,
		Str:   exec.NewMethodSet(str),
		Dict:  exec.NewMethodSet(dict),
		List:  exec.NewMethodSet(list),
	}
}

// affixMethod is Python's str.startswith/endswith(affix[, start[, end]]),
// affix a str or a tuple of str; start/end count code points.
func affixMethod(test func(s, affix string) bool, name string) exec.Method[string] {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		if len(va.Args) < 1 || len(va.Args) > 3 {
			return nil, fmt.Errorf("%s expected 1 to 3 arguments", name)
		}
		r := []rune(self)
		start, end := 0, len(r)
		norm := func(i int) int {
			if i < 0 {
				i += len(r)
			}
			return max(0, min(i, len(r)))
		}
		if len(va.Args) > 1 && !va.Args[1].IsNil() {
			start = norm(va.Args[1].Integer())
		}
		if len(va.Args) > 2 && !va.Args[2].IsNil() {
			end = norm(va.Args[2].Integer())
		}
		if start > end {
			return false, nil
		}
		sub := string(r[start:end])
		a := va.Args[0]
		switch {
		case a.IsString():
			return test(sub, a.String()), nil
		case a.IsList():
			for i := range a.Len() {
				e := a.Index(i)
				if !e.IsString() {
					return nil, fmt.Errorf("%s: tuple for %s must only contain str", name, name)
				}
				if test(sub, e.String()) {
					return true, nil
				}
			}
			return false, nil
		}
		return nil, fmt.Errorf("%s first arg must be str or a tuple of str", name)
	}
}

// budgetOf finds the render's budget from a filter's evaluator.
func budgetOf(ev *exec.Evaluator) (*budget, bool) {
	if ev == nil || ev.Environment == nil || ev.Environment.Context == nil {
		return nil, false
	}
	v, ok := ev.Environment.Context.Get(budgetKey)
	if !ok {
		return nil, false
	}
	b, ok := v.(*budget)
	return b, ok
}

// maxRepeatItems bounds list repetition ([x] * n).
const maxRepeatItems = 10 * MaxRange

// operands returns the two operands the AST pass packed for `*`/`**`.
func operands(in *exec.Value) (a, b *exec.Value, err error) {
	if !in.IsList() || in.Len() != 2 {
		return nil, nil, fmt.Errorf("internal: operator operands")
	}
	a, b = in.Index(0), in.Index(1)
	for _, v := range []*exec.Value{a, b} {
		if e, ok := v.Interface().(error); ok && v.IsError() {
			return nil, nil, e // an operand that failed: its error
		}
	}
	return a, b, nil
}

func opErr(ev *exec.Evaluator, err error) *exec.Value {
	if errors.Is(err, ErrLimit) {
		if b, ok := budgetOf(ev); ok && b.err == nil {
			b.err = err
		}
	}
	return exec.AsValue(err)
}

// maxValueOf is the render's bound on one value.
func maxValueOf(ev *exec.Evaluator) int {
	if b, ok := budgetOf(ev); ok {
		return b.maxValue
	}
	return DefaultMaxOutputBytes
}

// pyIntOf is Python's int value of an int or bool operand.
func pyIntOf(v *exec.Value) (int, bool) {
	switch {
	case v.IsBool():
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case v.IsInteger():
		return v.Integer(), true
	}
	return 0, false
}

// filterMul is Python's a * b for the types templates use: numbers,
// str * int, list * int (sizes bounded by the output limit).
func filterMul(ev *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	if n, ok := pyIntOf(b); ok && (a.IsString() || a.IsList()) {
		return repeat(ev, a, n)
	}
	if n, ok := pyIntOf(a); ok && (b.IsString() || b.IsList()) {
		return repeat(ev, b, n)
	}
	ai, aInt := pyIntOf(a)
	bi, bInt := pyIntOf(b)
	switch {
	case aInt && bInt:
		p := ai * bi
		if ai != 0 && (p/ai != bi || (ai == -1 && bi == math.MinInt)) {
			return exec.AsValue(float64(ai) * float64(bi)) // beyond int64: approximate
		}
		return exec.AsValue(p)
	case (a.IsNumber() || aInt) && (b.IsNumber() || bInt):
		return exec.AsValue(a.Float() * b.Float())
	}
	return exec.AsValue(fmt.Errorf("unsupported operand type(s) for *"))
}

func repeat(ev *exec.Evaluator, v *exec.Value, n int) *exec.Value {
	if n <= 0 {
		if v.IsString() {
			return exec.AsValue("")
		}
		return exec.AsValue([]any{})
	}
	maxV := maxValueOf(ev)
	if v.IsString() {
		s := v.String()
		if len(s) > 0 && n > maxV/len(s) {
			return opErr(ev, fmt.Errorf("%w: string repetition longer than %d bytes", ErrLimit, maxV))
		}
		return exec.AsValue(strings.Repeat(s, n))
	}
	l := v.Len()
	if l > 0 && n > maxRepeatItems/l {
		return opErr(ev, fmt.Errorf("%w: list repetition longer than %d items", ErrLimit, maxRepeatItems))
	}
	if size := valueSize(v, maxV); size > 0 && n > maxV/size {
		return opErr(ev, fmt.Errorf("%w: list repetition larger than %d bytes", ErrLimit, maxV))
	}
	out := make([]any, 0, l*n)
	for range n {
		for i := range l {
			out = append(out, v.Index(i).Interface())
		}
	}
	return exec.AsValue(out)
}

// filterPow is Python's a ** b: exact for ints with a non-negative
// exponent (when the result fits int64), float otherwise.
func filterPow(ev *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	ai, aInt := pyIntOf(a)
	bi, bInt := pyIntOf(b)
	if aInt && bInt && bi >= 0 {
		r, base, e := 1, ai, bi
		for e > 0 {
			if e&1 == 1 {
				if base != 0 && ((r*base)/base != r) {
					return exec.AsValue(math.Pow(float64(ai), float64(bi)))
				}
				r *= base
			}
			e >>= 1
			if e > 0 {
				if base != 0 && (base*base)/base != base {
					return exec.AsValue(math.Pow(float64(ai), float64(bi)))
				}
				base *= base
			}
		}
		return exec.AsValue(r)
	}
	if (a.IsNumber() || aInt) && (b.IsNumber() || bInt) {
		return exec.AsValue(math.Pow(a.Float(), b.Float()))
	}
	return exec.AsValue(fmt.Errorf("unsupported operand type(s) for **"))
}

// lipsum is jinja2's lorem-ipsum global with a bounded paragraph count.
func lipsum(va *exec.VarArgs) (string, error) {
	n := 5
	if len(va.Args) > 0 {
		if !va.Args[0].IsInteger() {
			return "", fmt.Errorf("lipsum: n must be an integer")
		}
		n = va.Args[0].Integer()
	}
	if n > 1000 {
		return "", fmt.Errorf("%w: lipsum(%d)", ErrLimit, n)
	}
	p := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua."
	out := make([]string, max(n, 0))
	for i := range out {
		out[i] = p
	}
	return strings.Join(out, "\n\n"), nil
}

// maxWidthArg bounds the width-like integer arguments of padding methods
// and filters (center, ljust, indent, ...), which allocate that much.
const maxWidthArg = 1 << 20

func widthErr(name string, va *exec.VarArgs) error {
	check := func(v *exec.Value) error {
		if v != nil && v.IsInteger() && v.Integer() > maxWidthArg {
			return fmt.Errorf("%w: %s width %d (at most %d)", ErrLimit, name, v.Integer(), maxWidthArg)
		}
		return nil
	}
	for _, a := range va.Args {
		if err := check(a); err != nil {
			return err
		}
	}
	for _, a := range va.KwArgs {
		if err := check(a); err != nil {
			return err
		}
	}
	return nil
}

func boundedMethod(m exec.Method[string], name string) exec.Method[string] {
	return func(self string, v *exec.Value, va *exec.VarArgs) (any, error) {
		if err := widthErr(name, va); err != nil {
			return nil, err
		}
		return m(self, v, va)
	}
}

func boundedFilter(f exec.FilterFunction, name string) exec.FilterFunction {
	return func(ev *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
		if err := widthErr(name, va); err != nil {
			return opErr(ev, err)
		}
		return f(ev, in, va)
	}
}

// generationBlock is HF's {% generation %}...{% endgeneration %} (the
// AssistantTracker extension that marks assistant tokens): it renders its
// body unchanged.
type generationBlock struct {
	Location *tokens.Token
	Body     *nodes.Wrapper
}

func (g *generationBlock) Position() *tokens.Token { return g.Location }
func (g *generationBlock) String() string          { return "generation" }

// Execute renders the body.
func (g *generationBlock) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	return r.ExecuteWrapper(g.Body)
}

func generationParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	g := &generationBlock{Location: p.Current()}
	if !args.End() {
		return nil, args.Error("generation takes no arguments", nil)
	}
	w, endargs, err := p.WrapUntil("endgeneration")
	if err != nil {
		return nil, err
	}
	if !endargs.End() {
		return nil, endargs.Error("Arguments not allowed here.", nil)
	}
	g.Body = w
	return g, nil
}
