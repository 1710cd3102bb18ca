package toolrunner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Selectors pick a value out of a composition's input or out of an earlier
// step's result (docs/concepts/tool-composition.md):
//
//	$input.path             the composition's arguments
//	$steps[0].data.rows[2]  step 0's result document
//	$.success               (predicates only) the previous step's result
//
// After the root come any number of `.key` (letters, digits, `_`, `-`),
// `["any key"]` (a Go/JSON quoted string) and `[n]` (a list index).

// selectorRoot is what a selector starts from.
type selectorRoot int

const (
	rootInput    selectorRoot = iota + 1 // $input
	rootStep                             // $steps[n]
	rootPrevious                         // $
)

// maxSelectorLen bounds a selector's text (and so its parse).
const maxSelectorLen = 512

// pathElem is one `.key`, `["key"]` or `[n]`.
type pathElem struct {
	key   string
	index int
	isIdx bool
}

type selector struct {
	text string
	root selectorRoot
	step int // rootStep
	path []pathElem
}

// parseSelector parses a selector's text.
func parseSelector(s string) (selector, error) {
	sel := selector{text: s}
	if len(s) > maxSelectorLen {
		return sel, fmt.Errorf("longer than %d bytes", maxSelectorLen)
	}
	rest := s
	switch {
	case strings.HasPrefix(rest, "$input"):
		sel.root, rest = rootInput, rest[len("$input"):]
	case strings.HasPrefix(rest, "$steps["):
		rest = rest[len("$steps["):]
		n, r, err := parseIndex(rest)
		if err != nil {
			return sel, fmt.Errorf("$steps[...]: %w", err)
		}
		sel.root, sel.step, rest = rootStep, n, r
	case strings.HasPrefix(rest, "$"):
		sel.root, rest = rootPrevious, rest[1:]
	default:
		return sel, errors.New(`must start with "$input", "$steps[n]" or "$"`)
	}
	// A name right after the root ($inputs, $foo) is not a root.
	if rest != "" && rest[0] != '.' && rest[0] != '[' {
		return sel, fmt.Errorf("unknown root in %q: use $input, $steps[n] or $", s)
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			n := 0
			for n < len(rest) && isKeyByte(rest[n]) {
				n++
			}
			if n == 0 {
				return sel, fmt.Errorf("empty key after '.' at offset %d", len(s)-len(rest))
			}
			sel.path = append(sel.path, pathElem{key: rest[:n]})
			rest = rest[n:]
		case '[':
			rest = rest[1:]
			if rest != "" && rest[0] == '"' {
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					return sel, fmt.Errorf("bad quoted key at offset %d", len(s)-len(rest))
				}
				k, err := strconv.Unquote(q)
				if err != nil {
					return sel, fmt.Errorf("bad quoted key at offset %d", len(s)-len(rest))
				}
				rest = rest[len(q):]
				if !strings.HasPrefix(rest, "]") {
					return sel, fmt.Errorf("missing ']' at offset %d", len(s)-len(rest))
				}
				sel.path = append(sel.path, pathElem{key: k})
				rest = rest[1:]
				continue
			}
			n, r, err := parseIndex(rest)
			if err != nil {
				return sel, fmt.Errorf("at offset %d: %w", len(s)-len(rest), err)
			}
			sel.path = append(sel.path, pathElem{index: n, isIdx: true})
			rest = r
		default:
			return sel, fmt.Errorf("unexpected %q at offset %d: use .key, [\"key\"] or [n]", rest[0], len(s)-len(rest))
		}
	}
	return sel, nil
}

// parseIndex reads `n]` (a non-negative decimal of at most 6 digits).
func parseIndex(s string) (int, string, error) {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 || n > 6 || !strings.HasPrefix(s[n:], "]") {
		return 0, s, errors.New("an index is [n] with n a number of up to 6 digits")
	}
	v, _ := strconv.Atoi(s[:n])
	return v, s[n+1:], nil
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// String is the selector's text.
func (s selector) String() string { return s.text }

// eval follows the selector's path from doc (the root's value); an error
// names the part of the path that is missing.
func (s selector) eval(doc any) (any, error) {
	v := doc
	for i, p := range s.path {
		switch {
		case p.isIdx:
			l, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s is %s, not a list", s.text, s.prefix(i), kindOf(v))
			}
			if p.index >= len(l) {
				return nil, fmt.Errorf("%s: %s has %d items, no index %d", s.text, s.prefix(i), len(l), p.index)
			}
			v = l[p.index]
		default:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s is %s, not an object", s.text, s.prefix(i), kindOf(v))
			}
			x, ok := m[p.key]
			if !ok {
				return nil, fmt.Errorf("%s: %s has no key %q", s.text, s.prefix(i), p.key)
			}
			v = x
		}
	}
	return v, nil
}

// prefix renders the root and the first n path elements.
func (s selector) prefix(n int) string {
	var b strings.Builder
	switch s.root {
	case rootInput:
		b.WriteString("$input")
	case rootStep:
		fmt.Fprintf(&b, "$steps[%d]", s.step)
	default:
		b.WriteString("$")
	}
	for _, p := range s.path[:n] {
		switch {
		case p.isIdx:
			fmt.Fprintf(&b, "[%d]", p.index)
		case isKeyName(p.key):
			b.WriteString("." + p.key)
		default:
			b.WriteString("[" + strconv.Quote(p.key) + "]")
		}
	}
	return b.String()
}

func isKeyName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isKeyByte(k[i]) {
			return false
		}
	}
	return true
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// selectorOf reports whether a string argument is a selector: it starts
// with `$`, and not with `$$` (the escape for a literal starting with `$`,
// which loses one `$`).
func selectorOf(s string) (text string, literal string, isSel bool) {
	if strings.HasPrefix(s, "$$") {
		return "", s[1:], false
	}
	if strings.HasPrefix(s, "$") {
		return s, "", true
	}
	return "", s, false
}

// walkArgs calls f for every selector in an argument template (a JSON-like
// tree of maps, lists and scalars) with its field path.
func walkArgs(v any, field string, f func(field string, text string)) {
	switch x := v.(type) {
	case string:
		if text, _, ok := selectorOf(x); ok {
			f(field, text)
		}
	case map[string]any:
		for k, e := range x {
			walkArgs(e, field+"."+k, f)
		}
	case []any:
		for i, e := range x {
			walkArgs(e, fmt.Sprintf("%s[%d]", field, i), f)
		}
	}
}

// mapArgs builds the arguments of a call from a template: selectors are
// replaced by the values they select (via lookup), everything else is
// copied.
func mapArgs(v any, lookup func(selector) (any, error)) (any, error) {
	switch x := v.(type) {
	case string:
		text, lit, ok := selectorOf(x)
		if !ok {
			return lit, nil
		}
		sel, err := parseSelector(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", text, err)
		}
		return lookup(sel)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			m, err := mapArgs(e, lookup)
			if err != nil {
				return nil, err
			}
			out[k] = m
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			m, err := mapArgs(e, lookup)
			if err != nil {
				return nil, err
			}
			out[i] = m
		}
		return out, nil
	default:
		return v, nil
	}
}
