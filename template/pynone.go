package template

import (
	"reflect"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python distinguishes None (a JSON null, tools=None) from an undefined
// name; gonja has one nil for both. JSON nulls are therefore given to
// templates as pyNone, a typed nil pointer: gonja sees it as nil (falsy,
// `is none`, prints nothing by itself), while this package's print,
// concatenation, defined/undefined, default, trim and string recognise it
// and behave as Python does ("None", defined, kept by default()).

type pyNoneT struct{}

var pyNone = (*pyNoneT)(nil)

// noneName is the global the AST pass turns the literal none into.
const noneName = "\x00none"

var pyNoneType = reflect.TypeFor[*pyNoneT]()

// isPyNone reports whether v holds the None sentinel.
func isPyNone(v *exec.Value) bool {
	return v != nil && v.Val.IsValid() && v.Val.Type() == pyNoneType
}

// printFilter is applied to every {{ ... }} output: None prints "None",
// lists and dicts print as Python's repr.
const printFilter = "\x00print"

func filterPrint(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	switch {
	case isPyNone(in):
		return exec.AsValue("None")
	case isContainer(in):
		return exec.AsValue(pyRepr(in))
	}
	return in
}

// concatFilter is Python/Jinja's a ~ b: str(a) + str(b), undefined as "".
const concatFilter = "\x00concat"

func filterConcat(ev *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	a, b, err := operands(in)
	if err != nil {
		return exec.AsValue(err)
	}
	as, bs := jinjaStr(a), jinjaStr(b)
	if bg, ok := budgetOf(ev); ok {
		if err := bg.fits("operator ~", len(as)+len(bs)); err != nil {
			return exec.AsValue(err)
		}
	}
	return exec.AsValue(as + bs)
}

// jinjaStr is what Jinja prints for a value: "" for undefined, Python's
// str() otherwise.
func jinjaStr(v *exec.Value) string {
	switch {
	case isPyNone(v):
		return "None"
	case v == nil || v.IsNil():
		return ""
	case v.IsFloat():
		return pyFloatRepr(v.Float())
	case isContainer(v):
		return pyRepr(v)
	}
	return v.String()
}

func testDefined(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return !in.IsError() && (!in.IsNil() || isPyNone(in)), nil
}

func testUndefined(c *exec.Context, in *exec.Value, va *exec.VarArgs) (bool, error) {
	d, err := testDefined(c, in, va)
	return !d, err
}

// filterDefault is jinja2's default(value, default_value="", boolean=False):
// only an undefined value (or, with boolean, a falsy one) is replaced.
func filterDefault(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	def := exec.AsValue("")
	if len(params.Args) > 0 {
		def = params.Args[0]
	} else if v, ok := params.KwArgs["default_value"]; ok {
		def = v
	}
	boolean := false
	if len(params.Args) > 1 {
		boolean = params.Args[1].IsTrue()
	} else if v, ok := params.KwArgs["boolean"]; ok {
		boolean = v.IsTrue()
	}
	if in.IsError() || (in.IsNil() && !isPyNone(in)) || (boolean && !in.IsTrue()) {
		return def
	}
	return in
}

// filterTrim is jinja2's trim(value, chars=None) = str(value).strip(chars).
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	s := jinjaStr(in)
	if len(params.Args) > 0 && params.Args[0].IsString() {
		return exec.AsValue(strings.Trim(s, params.Args[0].String()))
	}
	return exec.AsValue(strings.TrimFunc(s, pyIsSpace))
}

// filterString is jinja2's string filter: str(value).
func filterString(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsString() {
		return in
	}
	return exec.AsValue(jinjaStr(in))
}
