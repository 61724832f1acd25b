package template

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/nodes"
)

// Limits on template sources, checked before gonja parses them: its parser
// is recursive, so nesting must be bounded to keep the stack bounded.
const (
	// MaxTemplateBytes bounds a chat template's source (1 MiB; real chat
	// templates are a few KiB).
	MaxTemplateBytes = 1 << 20
	// MaxTemplateNesting bounds bracket nesting inside tags and the
	// nesting of block statements ({% if %}, {% for %}, ...).
	MaxTemplateNesting = 256
	// maxExprDepth bounds the nesting of expression nodes between two
	// statement bodies of the parsed template (a[b].c ~ d is 4 deep). On
	// an error, gonja wraps it once per level with the text of that
	// level's whole subexpression, so an error under a chain of n
	// operators costs O(n^3) time and O(n^2) memory that no context can
	// stop: {{ x.a.a... }} with 100,000 links exhausted memory.
	maxExprDepth = 2 * MaxTemplateNesting
	// maxWalkDepth bounds the reflection depth of the parsed template's
	// tree; instrument must see every node of it (budget, namespace guard).
	maxWalkDepth = 10_000
)

var (
	tagRe       = regexp.MustCompile(`(?s)\{[{%](.*?)[}%]\}`)
	blockOpenRe = regexp.MustCompile(`^\s*[-+]?\s*(if|for|macro|call|filter|with|block|generation|autoescape|trans|raw)\b`)
	// setBlockRe matches {% set x %}...{% endset %}; a set with = is no block.
	setBlockRe = regexp.MustCompile(`^\s*[-+]?\s*set\b[^=]*$`)
	blockEndRe = regexp.MustCompile(`^\s*[-+]?\s*end[a-z]+\b`)
)

// checkTemplateSource rejects sources too large or too deeply nested to
// parse safely. Errors wrap ErrLimit.
func checkTemplateSource(src string) error {
	if len(src) > MaxTemplateBytes {
		return fmt.Errorf("%w: template of %d bytes (at most %d)", ErrLimit, len(src), MaxTemplateBytes)
	}
	blocks := 0
	for _, m := range tagRe.FindAllStringSubmatch(src, -1) {
		body := m[1]
		if m[0][1] == '%' {
			switch {
			case blockEndRe.MatchString(body):
				if blocks > 0 {
					blocks--
				}
			case blockOpenRe.MatchString(body) || setBlockRe.MatchString(body):
				blocks++
				if blocks > MaxTemplateNesting {
					return fmt.Errorf("%w: blocks nested deeper than %d", ErrLimit, MaxTemplateNesting)
				}
			}
		}
		depth := 0
		for i := 0; i < len(body); i++ {
			switch body[i] {
			case '(', '[', '{':
				depth++
				if depth > MaxTemplateNesting {
					return fmt.Errorf("%w: brackets nested deeper than %d", ErrLimit, MaxTemplateNesting)
				}
			case ')', ']', '}':
				depth--
			}
		}
	}
	return nil
}

// checkTreeDepth rejects (ErrLimit) a parsed template whose tree is deeper
// than instrument walks, or whose expressions nest deeper than maxExprDepth
// nodes. The source check above is a heuristic ({% raw %} sections can hide
// block tags from it); this one sees the tree gonja built.
func checkTreeDepth(root *nodes.Template) error {
	nodesPkg := reflect.TypeFor[nodes.Template]().PkgPath()
	wrapperType := reflect.TypeFor[*nodes.Wrapper]()
	seen := map[uintptr]bool{}
	var err error
	var walk func(v reflect.Value, depth, expr int)
	walk = func(v reflect.Value, depth, expr int) {
		if err != nil || !v.IsValid() {
			return
		}
		if depth > maxWalkDepth {
			err = fmt.Errorf("%w: template nested deeper than %d", ErrLimit, MaxTemplateNesting)
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			switch {
			case v.Type() == wrapperType:
				expr = 0
			case v.Type().Elem().PkgPath() == nodesPkg:
				expr++
				if expr > maxExprDepth {
					err = fmt.Errorf("%w: expression nested deeper than %d operators, filters, calls, attributes and items", ErrLimit, maxExprDepth)
					return
				}
			}
			walk(v.Elem(), depth+1, expr)
		case reflect.Interface:
			walk(v.Elem(), depth+1, expr)
		case reflect.Struct:
			if strings.HasSuffix(v.Type().PkgPath(), "/tokens") {
				return
			}
			for i := range v.NumField() {
				f := v.Field(i)
				if !f.CanInterface() && f.CanAddr() {
					f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
				}
				walk(f, depth+1, expr)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), depth+1, expr)
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Value(), depth+1, expr)
			}
		}
	}
	walk(reflect.ValueOf(root), 0, 0)
	return err
}
