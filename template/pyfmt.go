package template

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python value formatting for the Jinja environment: repr/str of values,
// printf-style "%" formatting, tuples, and the numeric operators whose
// gonja versions differ from Python (/, //, %).

// pyTuple is a Python tuple (printed with parentheses).
type pyTuple []any

// String prints the tuple as Python's repr does.
func (t pyTuple) String() string {
	parts := make([]string, len(t))
	for i, e := range t {
		parts[i] = pyRepr(e)
	}
	if len(t) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// pyRepr is Python's repr for template values.
func pyRepr(v any) string {
	if xv, ok := v.(*exec.Value); ok {
		if xv == nil || xv.IsNil() {
			return "None"
		}
		v = xv.Interface()
	}
	switch t := v.(type) {
	case nil, *pyNoneT:
		return "None"
	case string:
		return pyStrRepr(t)
	case bool:
		if t {
			return "True"
		}
		return "False"
	case float64:
		return pyFloatRepr(t)
	case float32:
		return pyFloatRepr(float64(t))
	case pyTuple:
		return t.String()
	case *exec.Dict:
		parts := make([]string, len(t.Pairs))
		for i, p := range t.Pairs {
			parts[i] = pyRepr(p.Key) + ": " + pyRepr(p.Value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		keys := sortedKeys(t)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyStrRepr(k) + ": " + pyRepr(t[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && !(rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8) {
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = pyRepr(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return exec.ToValue(v).String()
}

// isContainer reports whether a value prints as a Python list or dict.
func isContainer(v *exec.Value) bool {
	if v == nil || v.IsNil() || v.IsString() {
		return false
	}
	switch v.Interface().(type) {
	case pyTuple:
		return true
	}
	return v.IsList() || v.IsDict()
}

// pyStrRepr quotes s as Python's repr(str) does.
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && !unicode.IsPrint(r):
			switch {
			case r < 0x100:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyPercent is Python's printf-style format % args (no mapping keys).
func pyPercent(format string, args []*exec.Value) (string, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		if format[i] == '%' {
			b.WriteByte('%')
			continue
		}
		if format[i] == '(' {
			return "", fmt.Errorf("format requires a mapping")
		}
		start := i
		for i < len(format) && strings.IndexByte("-+ 0#", format[i]) >= 0 {
			i++
		}
		flags := format[start:i]
		ws := i
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			i++
		}
		width, _ := strconv.Atoi(format[ws:i])
		prec := -1
		if i < len(format) && format[i] == '.' {
			i++
			ps := i
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
			prec, _ = strconv.Atoi(format[ps:i])
		}
		if width > maxWidthArg || prec > maxWidthArg {
			return "", fmt.Errorf("%w: format width", ErrLimit)
		}
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		if next >= len(args) {
			return "", fmt.Errorf("not enough arguments for format string")
		}
		a := args[next]
		next++
		var s string
		switch conv := format[i]; conv {
		case 's':
			s = jinjaStr(a)
			if prec >= 0 && prec < len([]rune(s)) {
				s = string([]rune(s)[:prec])
			}
		case 'r', 'a':
			s = pyRepr(a)
		case 'd', 'i', 'u':
			if !a.IsNumber() && !a.IsBool() {
				return "", fmt.Errorf("%%%c format: a real number is required", conv)
			}
			n, _ := pyIntOf(a)
			if a.IsFloat() {
				n = int(a.Float())
			}
			s = strconv.Itoa(n)
			if strings.Contains(flags, "+") && n >= 0 {
				s = "+" + s
			} else if strings.Contains(flags, " ") && n >= 0 {
				s = " " + s
			}
		case 'f', 'F', 'e', 'E', 'g', 'G':
			if !a.IsNumber() && !a.IsBool() {
				return "", fmt.Errorf("%%%c format: a real number is required", conv)
			}
			p := prec
			if p < 0 {
				p = 6
			}
			f := a.Float()
			switch conv {
			case 'f', 'F':
				s = strconv.FormatFloat(f, 'f', p, 64)
			case 'e', 'E':
				s = pyExp(strconv.FormatFloat(f, 'e', p, 64))
			default:
				if p == 0 {
					p = 1
				}
				s = pyExp(strconv.FormatFloat(f, 'g', p, 64))
			}
			if conv == 'E' || conv == 'G' || conv == 'F' {
				s = strings.ToUpper(s)
			}
			if strings.Contains(flags, "+") && f >= 0 {
				s = "+" + s
			}
		case 'x', 'X', 'o':
			n, ok := pyIntOf(a)
			if !ok {
				return "", fmt.Errorf("%%%c format: an integer is required", conv)
			}
			base := 16
			if conv == 'o' {
				base = 8
			}
			s = strconv.FormatInt(int64(n), base)
			if conv == 'X' {
				s = strings.ToUpper(s)
			}
		case 'c':
			if n, ok := pyIntOf(a); ok {
				s = string(rune(n))
			} else {
				s = a.String()
			}
		default:
			return "", fmt.Errorf("unsupported format character %q", conv)
		}
		if pad := width - len([]rune(s)); pad > 0 {
			switch {
			case strings.Contains(flags, "-"):
				s += strings.Repeat(" ", pad)
			case strings.Contains(flags, "0") && strings.IndexByte("diufFeEgGxXo", format[i]) >= 0:
				sign := ""
				if s != "" && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
					sign, s = s[:1], s[1:]
				}
				s = sign + strings.Repeat("0", pad) + s
			default:
				s = strings.Repeat(" ", pad) + s
			}
		}
		b.WriteString(s)
	}
	if next < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// pyExp rewrites Go's exponent (e+06 is fine; Go prints e+06 too) and
// keeps at least two exponent digits as Python does.
func pyExp(s string) string {
	i := strings.IndexAny(s, "eE")
	if i < 0 || i+2 >= len(s) {
		return s
	}
	exp := s[i+2:]
	if len(exp) < 2 {
		exp = "0" + exp
	}
	return s[:i+2] + exp
}

// filterMod is Python's a % b: printf-style formatting for a string left
// operand, otherwise the modulo with the sign of the divisor.
func filterMod(ev *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	if a.IsString() {
		// A tuple (or tuple literal) supplies several arguments.
		var args []*exec.Value
		switch b.Interface().(type) {
		case pyTuple, exec.ValuesList:
			for i := range b.Len() {
				args = append(args, b.Index(i))
			}
		default:
			args = []*exec.Value{b}
		}
		s, err := pyPercent(a.String(), args)
		if err != nil {
			return opErr(ev, err)
		}
		return exec.AsValue(s)
	}
	ai, aInt := pyIntOf(a)
	bi, bInt := pyIntOf(b)
	switch {
	case aInt && bInt:
		if bi == 0 {
			return exec.AsValue(fmt.Errorf("integer modulo by zero"))
		}
		r := ai % bi
		if r != 0 && (r < 0) != (bi < 0) {
			r += bi
		}
		return exec.AsValue(r)
	case (a.IsNumber() || aInt) && (b.IsNumber() || bInt):
		x, y := a.Float(), b.Float()
		if y == 0 {
			return exec.AsValue(fmt.Errorf("float modulo"))
		}
		r := math.Mod(x, y)
		if r != 0 && (r < 0) != (y < 0) {
			r += y
		}
		return exec.AsValue(r)
	}
	return exec.AsValue(fmt.Errorf("unsupported operand type(s) for %%"))
}

// filterDiv is Python's a / b (true division; zero is an error).
func filterDiv(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	if !(a.IsNumber() || a.IsBool()) || !(b.IsNumber() || b.IsBool()) {
		return exec.AsValue(fmt.Errorf("unsupported operand type(s) for /"))
	}
	if b.Float() == 0 {
		return exec.AsValue(fmt.Errorf("division by zero"))
	}
	return exec.AsValue(a.Float() / b.Float())
}

// filterFloorDiv is Python's a // b (floor; int for ints).
func filterFloorDiv(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	ai, aInt := pyIntOf(a)
	bi, bInt := pyIntOf(b)
	switch {
	case aInt && bInt:
		if bi == 0 {
			return exec.AsValue(fmt.Errorf("integer division or modulo by zero"))
		}
		q := ai / bi
		if (ai%bi != 0) && ((ai < 0) != (bi < 0)) {
			q--
		}
		return exec.AsValue(q)
	case (a.IsNumber() || aInt) && (b.IsNumber() || bInt):
		if b.Float() == 0 {
			return exec.AsValue(fmt.Errorf("float floor division by zero"))
		}
		return exec.AsValue(math.Floor(a.Float() / b.Float()))
	}
	return exec.AsValue(fmt.Errorf("unsupported operand type(s) for //"))
}

// filterFormat is jinja2's format filter: Python printf-style formatting.
func filterFormat(ev *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.KwArgs) > 0 {
		return exec.AsValue(fmt.Errorf("format: keyword arguments are not supported"))
	}
	s, err := pyPercent(in.String(), params.Args)
	if err != nil {
		return opErr(ev, err)
	}
	return exec.AsValue(s)
}

// filterItems is jinja2's items filter: (key, value) tuples in order.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if !in.IsDict() {
		return exec.AsValue(fmt.Errorf("items requires a mapping"))
	}
	out := []any{}
	for _, p := range orderedPairs(nil, in) {
		out = append(out, pyTuple{p[0], p[1]})
	}
	return exec.AsValue(out)
}

// filterDictSort is jinja2's dictsort(case_sensitive=False, by='key',
// reverse=False): (key, value) tuples sorted by key or value.
func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if !in.IsDict() {
		return exec.AsValue(fmt.Errorf("dictsort requires a mapping"))
	}
	names := []string{"case_sensitive", "by", "reverse"}
	opt := map[string]*exec.Value{}
	for i, a := range params.Args {
		if i < len(names) {
			opt[names[i]] = a
		}
	}
	for k, v := range params.KwArgs {
		opt[k] = v
	}
	cs := opt["case_sensitive"] != nil && opt["case_sensitive"].IsTrue()
	rev := opt["reverse"] != nil && opt["reverse"].IsTrue()
	pos := 0
	if by := opt["by"]; by != nil {
		switch by.String() {
		case "key":
		case "value":
			pos = 1
		default:
			return exec.AsValue(fmt.Errorf("You can only sort by either 'key' or 'value'"))
		}
	}
	pairs := orderedPairs(nil, in)
	key := func(x any) (float64, string, bool) {
		v := exec.ToValue(x)
		if v.IsNumber() || v.IsBool() {
			return v.Float(), "", true
		}
		s := v.String()
		if !cs {
			s = strings.ToLower(s)
		}
		return 0, s, false
	}
	less := func(i, j int) bool {
		fi, si, ni := key(pairs[i][pos])
		fj, sj, nj := key(pairs[j][pos])
		switch {
		case ni && nj:
			return fi < fj
		case !ni && !nj:
			return si < sj
		}
		return ni
	}
	sort.SliceStable(pairs, func(i, j int) bool {
		if rev {
			return less(j, i)
		}
		return less(i, j)
	})
	out := []any{}
	for _, p := range pairs {
		out = append(out, pyTuple{p[0], p[1]})
	}
	return exec.AsValue(out)
}
