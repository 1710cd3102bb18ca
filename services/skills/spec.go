package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Limits of the front matter fields. Name, description and compatibility
// come from the Agent Skills standard; the others bound what a skill author
// can make the service hold and show.
const (
	MaxNameChars          = 64
	MaxDescriptionChars   = 1024
	MaxCompatibilityChars = 500
	MaxLicenseChars       = 1024
	MaxMetadataEntries    = 64
	MaxMetadataKeyBytes   = 128
	MaxMetadataValueBytes = 1024
	MaxTriggers           = 64
	MaxTriggerChars       = 256
	MaxExtraKeys          = 64
	maxProblems           = 16
)

// Front matter keys the service understands. Everything else is kept in
// skill.extra as JSON text (the standard lets tools add keys).
const (
	keyName                   = "name"
	keyDescription            = "description"
	keyLicense                = "license"
	keyCompatibility          = "compatibility"
	keyAllowedTools           = "allowed-tools"
	keyMetadata               = "metadata"
	keyVersion                = "version"
	keyTriggers               = "triggers"
	keyDisableModelInvocation = "disable-model-invocation"
	keyModel                  = "model"
)

// skill is one loaded, valid skill. It is immutable once loaded and shared
// by every snapshot reader.
type skill struct {
	name          string
	description   string
	license       string
	compatibility string
	// allowedTools is the front matter allow-list; restrictsTools tells an
	// absent key (no restriction) from an empty list (no tools).
	allowedTools           []string
	restrictsTools         bool
	metadata               map[string]string
	version                string
	triggers               []string
	disableModelInvocation bool
	model                  string
	extra                  map[string]string
	body                   string

	// Filled by the loader.
	scope baagentv1.SkillScope
	// dir is the skill folder relative to the skills root, slash separated.
	dir string
	// resources are the files of the folder other than SKILL.md, relative to
	// the folder, sorted.
	resources []string
	// catalogLine is the skill's level-1 catalog entry, catalogTokens its
	// EstimateTokens (model independent; GetCatalog counts per model).
	catalogLine   string
	catalogTokens int64
}

// parseSkillMD parses a SKILL.md found in folder and checks it against the
// Agent Skills standard (plus `version` and `triggers`). The error
// lists every problem found as `field: what is wrong`, separated by "; ".
func parseSkillMD(data []byte, folder string) (*skill, error) {
	fm, body, err := splitSkillMD(data)
	if err != nil {
		return nil, err
	}
	m, err := parseYAMLMapping(fm)
	if err != nil {
		return nil, fmt.Errorf("front matter: %w", err)
	}
	c := checker{s: &skill{body: body}}
	c.fields(m)
	c.s.checkName(&c, folder)
	if c.errs.Len() > 0 {
		return nil, c.err()
	}
	return c.s, nil
}

// checker collects the problems of one front matter.
type checker struct {
	s    *skill
	errs validate.Errors
}

func (c *checker) add(field, format string, args ...any) { c.errs.Addf(field, format, args...) }

func (c *checker) err() error {
	var b strings.Builder
	for i, v := range c.errs.Violations() {
		if i == maxProblems {
			fmt.Fprintf(&b, "; and %d more", c.errs.Len()-maxProblems)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.GetField())
		b.WriteString(": ")
		b.WriteString(v.GetDescription())
	}
	return errors.New(b.String())
}

// fields decodes each key of the front matter mapping m (nil when empty).
func (c *checker) fields(m *yaml.Node) {
	seen := map[string]bool{}
	var content []*yaml.Node
	if m != nil {
		content = m.Content
	}
	for i := 0; i+1 < len(content); i += 2 {
		k, v := content[i], content[i+1]
		if k.Kind != yaml.ScalarNode {
			c.add("front matter", "keys must be strings (line %d)", k.Line)
			continue
		}
		key := k.Value
		if seen[key] {
			c.add("front matter", "duplicate key %q (line %d)", clip(key, 64), k.Line)
			continue
		}
		seen[key] = true
		switch key {
		case keyName:
			c.s.name, _ = c.scalar(key, v)
		case keyDescription:
			c.description(v)
		case keyLicense:
			if s, ok := c.scalar(key, v); ok {
				c.s.license = strings.TrimSpace(s)
				c.maxChars(key, c.s.license, MaxLicenseChars)
				c.noControl(key, c.s.license, false)
			}
		case keyCompatibility:
			c.compatibility(v)
		case keyAllowedTools:
			c.allowedTools(v)
		case keyMetadata:
			c.metadata(v)
		case keyVersion:
			if s, ok := c.scalar(key, v); ok && s != "" {
				c.s.version = s
				validate.Version(&c.errs, key, s)
			}
		case keyTriggers:
			c.triggers(v)
		case keyDisableModelInvocation:
			c.boolean(key, v, &c.s.disableModelInvocation)
		case keyModel:
			if s, ok := c.scalar(key, v); ok && s != "" {
				c.s.model = s
				validate.Model(&c.errs, key, s)
			}
		default:
			c.extra(key, v)
		}
	}
	if !seen[keyName] {
		c.add(keyName, "required")
	}
	if !seen[keyDescription] {
		c.add(keyDescription, "required")
	}
}

// scalar returns the text of a scalar as written (`version: 1.10` stays
// "1.10", not the float 1.1). A null value is "" with ok true; a list or a
// mapping is reported.
func (c *checker) scalar(field string, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		c.add(field, "must be a string, not a %s", kindName(v))
		return "", false
	}
	if v.Tag == "!!null" {
		return "", true
	}
	return v.Value, true
}

// strings returns a list of strings; a single scalar is a list of one.
func (c *checker) stringList(field string, v *yaml.Node, max int) ([]string, bool) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil, true
		}
		return []string{v.Value}, true
	case yaml.SequenceNode:
		if len(v.Content) > max {
			c.add(field, "must have at most %d entries, got %d", max, len(v.Content))
			return nil, false
		}
		out := make([]string, 0, len(v.Content))
		ok := true
		for i, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				c.add(validate.Index(field, i), "must be a string")
				ok = false
				continue
			}
			out = append(out, e.Value)
		}
		return out, ok
	default:
		c.add(field, "must be a string or a list of strings, not a %s", kindName(v))
		return nil, false
	}
}

// checkName applies the standard's name rule. The messages say which part
// of the rule failed, so an author can fix it without reading the standard.
func (s *skill) checkName(c *checker, folder string) {
	n := s.name
	switch {
	case n == "":
		if !hasField(c, keyName) { // missing or not a string: already said
			c.add(keyName, "must not be empty")
		}
		return
	case utf8.RuneCountInString(n) > MaxNameChars:
		c.add(keyName, "must be at most %d characters, got %d", MaxNameChars, utf8.RuneCountInString(n))
		return
	case n[0] == '-':
		c.add(keyName, "must not start with a hyphen")
		return
	case n[len(n)-1] == '-':
		c.add(keyName, "must not end with a hyphen")
		return
	case strings.Contains(n, "--"):
		c.add(keyName, "must not contain two hyphens in a row")
		return
	}
	for i, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			c.add(keyName, "may contain only lowercase letters, digits and hyphens; found %q at position %d", r, i+1)
			return
		}
	}
	if n != folder {
		c.add(keyName, "%q must equal the skill's folder name %q", n, clip(folder, 64))
	}
}

func hasField(c *checker, field string) bool {
	for _, v := range c.errs.Violations() {
		if v.GetField() == field {
			return true
		}
	}
	return false
}

func (c *checker) description(v *yaml.Node) {
	s, ok := c.scalar(keyDescription, v)
	if !ok {
		return
	}
	// Block scalars (`description: |`) end with a newline; the text is
	// what counts.
	s = strings.TrimSpace(s)
	c.s.description = s
	switch {
	case s == "":
		c.add(keyDescription, "must not be empty")
	case utf8.RuneCountInString(s) > MaxDescriptionChars:
		c.add(keyDescription, "must be at most %d characters, got %d", MaxDescriptionChars, utf8.RuneCountInString(s))
	case strings.ContainsAny(s, "<>"):
		// The standard forbids them: the description is shown to the model
		// inside the <available_skills> XML block.
		c.add(keyDescription, "must not contain '<' or '>'")
	default:
		c.noControl(keyDescription, s, true)
	}
}

// compatibility is a string in the standard; some skills write a
// list of models, which is accepted and joined with ", ".
func (c *checker) compatibility(v *yaml.Node) {
	list, ok := c.stringList(keyCompatibility, v, MaxCompatibilityChars)
	if !ok {
		return
	}
	s := strings.TrimSpace(strings.Join(list, ", "))
	c.s.compatibility = s
	c.maxChars(keyCompatibility, s, MaxCompatibilityChars)
	c.noControl(keyCompatibility, s, true)
}

// allowedTools accepts the standard's space-separated string
// (`allowed-tools: file_read sql_query`), a comma-separated one, or a YAML
// list. Each entry must be a tool name or glob the toolrunner understands; an
// entry it could not honour (`Bash(git:*)`) refuses the skill rather than
// granting something else. An empty value (`allowed-tools:` or `[]`) allows
// no tools: a key written without tools fails closed.
func (c *checker) allowedTools(v *yaml.Node) {
	list, ok := c.stringList(keyAllowedTools, v, validate.MaxAllowedTools)
	if !ok {
		return
	}
	if v.Kind == yaml.ScalarNode {
		list = strings.FieldsFunc(strings.Join(list, " "), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	}
	if len(list) > validate.MaxAllowedTools {
		c.add(keyAllowedTools, "must have at most %d entries, got %d", validate.MaxAllowedTools, len(list))
		return
	}
	c.s.restrictsTools = true
	seen := make(map[string]bool, len(list))
	c.s.allowedTools = make([]string, 0, len(list))
	for i, t := range list {
		t = strings.TrimSpace(t)
		validate.ToolPattern(&c.errs, validate.Index(keyAllowedTools, i), t)
		if !seen[t] {
			seen[t] = true
			c.s.allowedTools = append(c.s.allowedTools, t)
		}
	}
}

func (c *checker) metadata(v *yaml.Node) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return
	}
	if v.Kind != yaml.MappingNode {
		c.add(keyMetadata, "must be a mapping of strings to strings, not a %s", kindName(v))
		return
	}
	if len(v.Content)/2 > MaxMetadataEntries {
		c.add(keyMetadata, "must have at most %d entries, got %d", MaxMetadataEntries, len(v.Content)/2)
		return
	}
	c.s.metadata = make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			c.add(keyMetadata, "keys must be non-empty strings (line %d)", k.Line)
			continue
		}
		field := validate.Key(keyMetadata, clip(k.Value, MaxMetadataKeyBytes))
		if len(k.Value) > MaxMetadataKeyBytes {
			c.add(field, "key must be at most %d bytes", MaxMetadataKeyBytes)
			continue
		}
		if _, dup := c.s.metadata[k.Value]; dup {
			c.add(field, "duplicate key")
			continue
		}
		s, ok := c.scalar(field, val)
		if !ok {
			continue
		}
		if len(s) > MaxMetadataValueBytes {
			c.add(field, "must be at most %d bytes", MaxMetadataValueBytes)
			continue
		}
		c.s.metadata[k.Value] = s
	}
}

func (c *checker) triggers(v *yaml.Node) {
	list, ok := c.stringList(keyTriggers, v, MaxTriggers)
	if !ok {
		return
	}
	for i, t := range list {
		t = strings.TrimSpace(t)
		f := validate.Index(keyTriggers, i)
		switch {
		case t == "":
			c.add(f, "must not be empty")
		case utf8.RuneCountInString(t) > MaxTriggerChars:
			c.add(f, "must be at most %d characters", MaxTriggerChars)
		default:
			c.noControl(f, t, false)
			c.s.triggers = append(c.s.triggers, t)
		}
	}
}

func (c *checker) boolean(field string, v *yaml.Node, dst *bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
		c.add(field, "must be true or false")
		return
	}
	b, err := strconv.ParseBool(strings.ToLower(v.Value))
	if err != nil { // YAML 1.1 spellings (yes/on) are not !!bool in yaml.v3
		c.add(field, "must be true or false")
		return
	}
	*dst = b
}

// extra keeps an unknown key as JSON text, as the contract's
// SkillMetadata.extra says. Keys are bounded so that a front matter cannot
// fill the map.
func (c *checker) extra(key string, v *yaml.Node) {
	if len(c.s.extra) >= MaxExtraKeys {
		c.add("front matter", "more than %d keys the standard does not define", MaxExtraKeys)
		return
	}
	if c.s.extra == nil {
		c.s.extra = map[string]string{}
	}
	c.s.extra[strings.ToValidUTF8(key, "\uFFFD")] = nodeJSON(v)
}

// nodeJSON renders a (checked, alias-free) YAML node as JSON text. Scalars
// keep their YAML type where JSON has one; values JSON cannot express
// (.inf, .nan, timestamps) keep their YAML text.
func nodeJSON(n *yaml.Node) string {
	b, err := json.Marshal(nodeValue(n))
	if err != nil {
		b, _ = json.Marshal(n.Value)
	}
	return string(b)
}

func nodeValue(n *yaml.Node) any {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 1 {
			return nodeValue(n.Content[0])
		}
		return nil
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = nodeValue(c)
		}
		return out
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = nodeValue(n.Content[i+1])
		}
		return out
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil
		// strconv rather than Node.Decode, which costs a deferred recover
		// per call: a front matter may hold thousands of scalars.
		case "!!bool":
			return strings.EqualFold(n.Value, "true")
		case "!!int":
			if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				return i
			}
		case "!!float":
			if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return f
			}
		}
		return n.Value
	}
	return nil
}

func (c *checker) maxChars(field, s string, max int) {
	if n := utf8.RuneCountInString(s); n > max {
		c.add(field, "must be at most %d characters, got %d", max, n)
	}
}

// noControl refuses control characters, which would garble logs and prompts.
// Multi-line fields may hold newlines and tabs.
func (c *checker) noControl(field, s string, multiline bool) {
	if strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r'))
	}) >= 0 {
		c.add(field, "must not contain control characters")
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.ScalarNode:
		return "scalar"
	}
	return "YAML node"
}

// clip shortens s to at most max bytes at a rune boundary, for messages.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
