package skillmd

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Size limits of a SKILL.md. The standard asks for bodies under 500 lines and
// front matter of about 100 tokens, so these are generous while still
// bounding what one file can cost the loader.
const (
	// MaxSkillFileBytes caps a SKILL.md (front matter and body).
	MaxSkillFileBytes = 256 << 10
	// MaxFrontMatterBytes caps the YAML front matter: fifty times what the
	// standard's fields need, and small enough that the slowest front
	// matter to parse (tens of thousands of flow-sequence nodes) costs
	// milliseconds, not tens of them, on every reload.
	MaxFrontMatterBytes = 16 << 10
	// maxYAMLDepth caps nesting in front matter; the standard's fields are at
	// most two levels deep (metadata), unknown keys get some slack.
	maxYAMLDepth = 32
	// maxYAMLNodes caps the nodes of a front matter document, so that a
	// pathological but small document cannot make the walk expensive. The
	// standard's fields at their limits need a few hundred; a tenant.yaml
	// at its entry limit about two thousand.
	maxYAMLNodes = 4096
)

// frontMatterDelimiter opens and closes the front matter, alone on its line.
const frontMatterDelimiter = "---"

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Split splits a SKILL.md into its YAML front matter and Markdown body.
// The file must start with a `---` line; the front matter ends at the next
// `---` line, which must come within MaxFrontMatterBytes. A UTF-8 byte order
// mark and CRLF line endings are accepted. The body is returned with
// surrounding blank lines trimmed.
func Split(data []byte) (frontMatter []byte, body string, err error) {
	if len(data) > MaxSkillFileBytes {
		return nil, "", fmt.Errorf("SKILL.md: larger than %d bytes", MaxSkillFileBytes)
	}
	// Everything here ends up in protobuf strings, which must be UTF-8.
	if !utf8.Valid(data) {
		return nil, "", errors.New("SKILL.md: not valid UTF-8")
	}
	data = bytes.TrimPrefix(data, utf8BOM)
	first, rest, found := bytes.Cut(data, []byte("\n"))
	if !isDelimiter(first) {
		return nil, "", errors.New("SKILL.md: must start with a '---' line that opens the YAML front matter")
	}
	if !found {
		return nil, "", errors.New("front matter: no closing '---' line")
	}
	for off := 0; off <= len(rest); {
		if off > MaxFrontMatterBytes {
			return nil, "", fmt.Errorf("front matter: longer than %d bytes", MaxFrontMatterBytes)
		}
		line, _, more := bytes.Cut(rest[off:], []byte("\n"))
		if isDelimiter(line) {
			if off > MaxFrontMatterBytes {
				return nil, "", fmt.Errorf("front matter: longer than %d bytes", MaxFrontMatterBytes)
			}
			b := ""
			if end := off + len(line) + 1; end < len(rest) {
				b = string(rest[end:])
			}
			return rest[:off], strings.TrimSpace(b), nil
		}
		if !more {
			break
		}
		off += len(line) + 1
	}
	return nil, "", errors.New("front matter: no closing '---' line")
}

func isDelimiter(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r")) == frontMatterDelimiter
}

// ParseYAMLMapping decodes a YAML document that must be a mapping (or empty)
// into its node tree, refusing aliases: an alias can expand exponentially
// ("billion laughs") when a consumer resolves it, and nothing in a skill's
// front matter needs one. It also bounds nesting and the number of nodes. An
// empty document yields a nil node and no error.
func ParseYAMLMapping(doc []byte) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if root.Kind == 0 { // empty document
		return nil, nil
	}
	if err := checkYAMLTree(&root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, errors.New("must be a single YAML document")
	}
	m := root.Content[0]
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil, nil
	}
	if m.Kind != yaml.MappingNode {
		return nil, errors.New("must be a YAML mapping of keys to values")
	}
	return m, nil
}

// checkYAMLTree walks the tree iteratively (no recursion, so depth cannot
// exhaust the stack) and refuses aliases, merge keys, deep nesting and
// oversized trees.
func checkYAMLTree(root *yaml.Node) error {
	type item struct {
		n     *yaml.Node
		depth int
	}
	stack := []item{{root, 0}}
	nodes := 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		nodes++
		if nodes > maxYAMLNodes {
			return fmt.Errorf("more than %d YAML nodes", maxYAMLNodes)
		}
		if it.depth > maxYAMLDepth {
			return fmt.Errorf("nested deeper than %d levels", maxYAMLDepth)
		}
		switch it.n.Kind {
		case yaml.AliasNode:
			return fmt.Errorf("YAML aliases are not allowed (*%s at line %d)", it.n.Value, it.n.Line)
		case yaml.ScalarNode:
			if it.n.Tag == "!!merge" {
				return fmt.Errorf("YAML merge keys are not allowed (line %d)", it.n.Line)
			}
		}
		for _, c := range it.n.Content {
			stack = append(stack, item{c, it.depth + 1})
		}
	}
	return nil
}
