package template

import (
	"fmt"
	"reflect"
	"unsafe"

	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// Self-referential namespaces.
//
// Lists and dicts cannot be mutated in the sandbox (append, update, ... are unsafe, as in HF's
// ImmutableSandboxedEnvironment), so the only way a template can build a value that contains
// itself is attribute assignment on a namespace: {% set ns.me = ns %}. Python allows it; every
// later print, comparison or membership test of such a value recurses without end, which in
// Go is a fatal stack overflow that no recover catches (found by FuzzJinja). The AST pass
// therefore routes the value of every {% set obj.attr = value %} through nsGuardFilter, which
// refuses (ErrLimit) a value from which obj can be reached.

// nsGuardFilter is the filter name the AST pass applies; a template cannot spell it (NUL byte).
const nsGuardFilter = "\x00nsguard"

// maxGuardDepth bounds the walk of filterNSGuard (values are also bounded by the budgets).
const maxGuardDepth = 10_000

// filterNSGuard returns in, or an ErrLimit error value when the object to be assigned into
// (the filter's one argument) can be reached from in.
func filterNSGuard(_ *exec.Evaluator, in *exec.Value, va *exec.VarArgs) *exec.Value {
	if in == nil || in.IsError() || va == nil || len(va.Args) != 1 || va.Args[0] == nil {
		return in
	}
	target := containerPointer(reflect.ValueOf(va.Args[0].Interface()))
	if target == 0 {
		return in
	}
	if reaches(reflect.ValueOf(in.Interface()), target, map[uintptr]bool{}, 0) {
		return exec.AsValue(fmt.Errorf("%w: a namespace cannot be stored inside itself", ErrLimit))
	}
	return in
}

// containerPointer identifies a map, slice or pointer value (0 for anything else).
func containerPointer(v reflect.Value) uintptr {
	switch v.Kind() {
	case reflect.Map, reflect.Pointer:
		if !v.IsNil() {
			return v.Pointer()
		}
	case reflect.Slice:
		if v.Len() > 0 {
			return v.Pointer()
		}
	}
	return 0
}

// reaches reports whether the container target can be reached from v.
func reaches(v reflect.Value, target uintptr, seen map[uintptr]bool, depth int) bool {
	if !v.IsValid() || depth > maxGuardDepth {
		return false
	}
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.CanInterface() {
		switch t := v.Interface().(type) {
		case *exec.Value:
			if t == nil {
				return false
			}
			return reaches(reflect.ValueOf(t.Interface()), target, seen, depth+1)
		case *exec.Dict:
			if t == nil || seen[v.Pointer()] {
				return false
			}
			seen[v.Pointer()] = true
			for _, p := range t.Pairs {
				if p != nil && (reaches(reflect.ValueOf(p.Key), target, seen, depth+1) || reaches(reflect.ValueOf(p.Value), target, seen, depth+1)) {
					return true
				}
			}
			return false
		}
	}
	if p := containerPointer(v); p != 0 {
		if p == target {
			return true
		}
		key := p ^ uintptr(v.Kind()) // a slice and its first element's pointer differ by kind
		if seen[key] {
			return false
		}
		seen[key] = true
	}
	switch v.Kind() {
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if reaches(it.Value(), target, seen, depth+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if reaches(v.Index(i), target, seen, depth+1) {
				return true
			}
		}
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() != reflect.Struct {
			return reaches(v.Elem(), target, seen, depth+1)
		}
	}
	return false
}

// guardNamespaceSet wraps the value expressions of s, a {% set obj.attr = value %} statement,
// in nsGuardFilter(obj). s is the addressable SetControlStructure; its fields are unexported.
func guardNamespaceSet(s reflect.Value) {
	field := func(name string) reflect.Value {
		f := s.FieldByName(name)
		if !f.IsValid() || !f.CanAddr() {
			return reflect.Value{}
		}
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	t := field("target")
	if !t.IsValid() || t.IsNil() {
		return
	}
	ga, ok := t.Interface().(*nodes.GetAttribute)
	if !ok || ga == nil {
		return
	}
	obj, ok := ga.Node.(nodes.Expression)
	if !ok || obj == nil {
		return
	}
	tok := ga.Location
	for _, name := range []string{"expression", "alternative"} {
		f := field(name)
		if !f.IsValid() || f.IsNil() || f.Type() != reflect.TypeFor[nodes.Expression]() {
			continue
		}
		e := f.Interface().(nodes.Expression)
		if tok == nil {
			tok = e.Position()
		}
		f.Set(reflect.ValueOf(nodes.Expression(&nodes.FilteredExpression{
			Expression: e,
			Filters:    []*nodes.FilterCall{{Token: tok, Name: nsGuardFilter, Args: []nodes.Expression{obj}, Kwargs: map[string]nodes.Expression{}}},
		})))
	}
}

// setStatement reports whether p (a pointer value met by the AST walk) is a set statement.
func setStatement(p reflect.Value) bool {
	_, ok := interfaceOf(p).(*controlStructures.SetControlStructure)
	return ok
}
