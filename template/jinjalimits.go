package template

import (
	"fmt"
	"regexp"
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
)

var (
	tagRe       = regexp.MustCompile(`(?s)\{[{%](.*?)[}%]\}`)
	blockOpenRe = regexp.MustCompile(`^\s*-?\s*(if|for|macro|call|filter|with|block|generation|autoescape|trans)\b`)
	blockEndRe  = regexp.MustCompile(`^\s*-?\s*end[a-z]+\b`)
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
				blocks--
			case blockOpenRe.MatchString(body):
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
