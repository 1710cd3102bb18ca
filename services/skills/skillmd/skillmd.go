// Package skillmd parses and checks SKILL.md files of the Agent Skills
// format. It is the one copy of the format's rules: the skills service loads
// skills with it (leniently: a violation that does not stop a skill from
// working is a warning) and `baagentctl skills validate` reports every
// violation with it (strictly). It depends on the standard library and the
// YAML parser only, so that any command can import it.
package skillmd

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Limits of the front matter fields. Name, description and compatibility
// come from the Agent Skills standard; the others bound what a skill author
// can make a service hold and show.
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
)

// Front matter keys. The first six are the Agent Skills standard's; the
// others are this platform's extensions, documented in docs/concepts/skills.md.
const (
	KeyName                   = "name"
	KeyDescription            = "description"
	KeyLicense                = "license"
	KeyCompatibility          = "compatibility"
	KeyAllowedTools           = "allowed-tools"
	KeyMetadata               = "metadata"
	KeyVersion                = "version"
	KeyTriggers               = "triggers"
	KeyDisableModelInvocation = "disable-model-invocation"
	KeyModel                  = "model"
)

// StandardKeys are the keys the Agent Skills standard defines.
var StandardKeys = []string{KeyName, KeyDescription, KeyLicense, KeyCompatibility, KeyAllowedTools, KeyMetadata}

// ExtensionKeys are the keys this platform adds to the standard.
var ExtensionKeys = []string{KeyVersion, KeyTriggers, KeyDisableModelInvocation, KeyModel}

// Violation is one broken rule. Lenient violations do not stop a skill from
// working: a loader may load the skill and show the violation as a warning
// (an over-long description, an unknown key, a name that differs from its
// folder only in case). The others make the skill unsafe or ambiguous and
// refuse it.
type Violation struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Lenient bool   `json:"lenient"`
}

func (v Violation) String() string { return v.Field + ": " + v.Message }

// Skill is a parsed SKILL.md. Fields hold what the file says, normalised:
// the name lowercased when only its case was wrong, lists deduplicated.
type Skill struct {
	Name          string
	Description   string
	License       string
	Compatibility string
	// AllowedTools is the front matter allow-list; RestrictsTools tells an
	// absent key (no restriction) from an empty list (no tools).
	AllowedTools           []string
	RestrictsTools         bool
	Metadata               map[string]string
	Version                string
	Triggers               []string
	DisableModelInvocation bool
	Model                  string
	// Extra holds keys neither the standard nor the platform defines, as
	// JSON text.
	Extra map[string]string
	// Body is the Markdown after the front matter, surrounding blank lines
	// trimmed.
	Body string
}

// Refuses reports whether vs holds a violation that is not lenient.
func Refuses(vs []Violation) bool {
	for _, v := range vs {
		if !v.Lenient {
			return true
		}
	}
	return false
}

// Parse parses a SKILL.md found in a folder named folder and checks it
// against the Agent Skills standard and the platform's extensions. It
// returns every violation found; the skill is nil only when the file cannot
// be read as a SKILL.md at all (no front matter, invalid YAML).
func Parse(data []byte, folder string) (*Skill, []Violation) {
	fm, body, err := Split(data)
	if err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		return nil, []Violation{{Field: field, Message: msg}}
	}
	m, err := ParseYAMLMapping(fm)
	if err != nil {
		return nil, []Violation{{Field: "front matter", Message: err.Error()}}
	}
	c := checker{s: &Skill{Body: body}}
	c.fields(m)
	c.name(folder)
	return c.s, c.vs
}

// checker collects the violations of one front matter.
type checker struct {
	s  *Skill
	vs []Violation
	// extraDropped is set once the unknown keys over MaxExtraKeys are
	// reported.
	extraDropped bool
}

func (c *checker) add(field, format string, args ...any) {
	c.vs = append(c.vs, Violation{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) warn(field, format string, args ...any) {
	c.vs = append(c.vs, Violation{Field: field, Message: fmt.Sprintf(format, args...), Lenient: true})
}

func (c *checker) has(field string) bool {
	for _, v := range c.vs {
		if v.Field == field {
			return true
		}
	}
	return false
}

// Index names element i of a list field (`triggers[2]`).
func Index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

// Key names entry k of a map field (`metadata["owner"]`).
func Key(field, k string) string { return field + "[" + strconv.Quote(k) + "]" }

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
			c.add("front matter", "duplicate key %q (line %d)", Clip(key, 64), k.Line)
			continue
		}
		seen[key] = true
		switch key {
		case KeyName:
			c.s.Name, _ = c.scalar(key, v)
		case KeyDescription:
			c.description(v)
		case KeyLicense:
			if s, ok := c.scalar(key, v); ok {
				c.s.License = strings.TrimSpace(s)
				c.maxChars(key, c.s.License, MaxLicenseChars, false)
				c.noControl(key, c.s.License, false)
			}
		case KeyCompatibility:
			c.compatibility(v)
		case KeyAllowedTools:
			c.allowedTools(v)
		case KeyMetadata:
			c.metadata(v)
		case KeyVersion:
			if s, ok := c.scalar(key, v); ok {
				c.s.Version = s
			}
		case KeyTriggers:
			c.triggers(v)
		case KeyDisableModelInvocation:
			c.boolean(key, v, &c.s.DisableModelInvocation)
		case KeyModel:
			if s, ok := c.scalar(key, v); ok {
				c.s.Model = s
			}
		default:
			c.extra(key, v)
		}
	}
	if !seen[KeyName] {
		c.add(KeyName, "required")
	}
	if !seen[KeyDescription] {
		c.add(KeyDescription, "required")
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

// stringList returns a list of strings; a single scalar is a list of one.
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
				c.add(Index(field, i), "must be a string")
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

// CheckName applies the standard's name rule to n and returns the first
// part of it that fails, or "". The messages say which part failed, so an
// author can fix it without reading the standard.
func CheckName(n string) string {
	switch {
	case n == "":
		return "must not be empty"
	case utf8.RuneCountInString(n) > MaxNameChars:
		return fmt.Sprintf("must be at most %d characters, got %d", MaxNameChars, utf8.RuneCountInString(n))
	case n[0] == '-':
		return "must not start with a hyphen"
	case n[len(n)-1] == '-':
		return "must not end with a hyphen"
	case strings.Contains(n, "--"):
		return "must not contain two hyphens in a row"
	}
	for i, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Sprintf("may contain only lowercase letters, digits and hyphens; found %q at position %d", r, i+1)
		}
	}
	return ""
}

// name applies the name rule and the folder rule. A name that breaks them
// only by case (`Sales-Report` in `sales-report/`, or `sales-report` in
// `Sales-Report/`) is unambiguous: the skill is named in lowercase and the
// violation is lenient. Any other mismatch refuses the skill, since the
// folder and the file would disagree on which skill it is.
func (c *checker) name(folder string) {
	n := c.s.Name
	if n == "" {
		if !c.has(KeyName) { // missing or not a string: already said
			c.add(KeyName, "must not be empty")
		}
		return
	}
	lower := strings.ToLower(n)
	if msg := CheckName(n); msg != "" {
		if lower == n || CheckName(lower) != "" || !strings.EqualFold(lower, folder) {
			c.add(KeyName, "%s", msg)
			return
		}
		c.warn(KeyName, "%q must be lowercase; the skill is named %q", n, lower)
		c.s.Name = lower
	}
	switch {
	case c.s.Name == folder:
	case strings.EqualFold(c.s.Name, folder):
		c.warn(KeyName, "%q must equal the skill's folder name %q (it differs in case only)", c.s.Name, Clip(folder, 64))
	default:
		c.add(KeyName, "%q must equal the skill's folder name %q", c.s.Name, Clip(folder, 64))
	}
}

func (c *checker) description(v *yaml.Node) {
	s, ok := c.scalar(KeyDescription, v)
	if !ok {
		return
	}
	// Block scalars (`description: |`) end with a newline; the text is
	// what counts.
	s = strings.TrimSpace(s)
	c.s.Description = s
	switch {
	case s == "":
		c.add(KeyDescription, "must not be empty")
	case strings.ContainsAny(s, "<>"):
		// The description is shown to the model inside the
		// <available_skills> XML block.
		c.add(KeyDescription, "must not contain '<' or '>'")
	default:
		// Over-long is lenient: a catalog shows the first
		// MaxDescriptionChars characters.
		c.maxChars(KeyDescription, s, MaxDescriptionChars, true)
		c.noControl(KeyDescription, s, true)
	}
}

// compatibility is a string in the standard; some skills write a
// list of models, which is accepted and joined with ", ".
func (c *checker) compatibility(v *yaml.Node) {
	list, ok := c.stringList(KeyCompatibility, v, MaxCompatibilityChars)
	if !ok {
		return
	}
	s := strings.TrimSpace(strings.Join(list, ", "))
	c.s.Compatibility = s
	c.maxChars(KeyCompatibility, s, MaxCompatibilityChars, true)
	c.noControl(KeyCompatibility, s, true)
}

// allowedTools accepts the standard's space-separated string
// (`allowed-tools: file_read sql_query`), a comma-separated one, or a YAML
// list. An empty value (`allowed-tools:` or `[]`) allows no tools: a key
// written without tools fails closed. Whether each entry names a tool a
// deployment can honour is the deployment's rule, not the format's.
func (c *checker) allowedTools(v *yaml.Node) {
	const max = 256
	list, ok := c.stringList(KeyAllowedTools, v, max)
	if !ok {
		return
	}
	if v.Kind == yaml.ScalarNode {
		list = strings.FieldsFunc(strings.Join(list, " "), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	}
	if len(list) > max {
		c.add(KeyAllowedTools, "must have at most %d entries, got %d", max, len(list))
		return
	}
	c.s.RestrictsTools = true
	seen := make(map[string]bool, len(list))
	c.s.AllowedTools = make([]string, 0, len(list))
	for i, t := range list {
		t = strings.TrimSpace(t)
		if t == "" {
			c.add(Index(KeyAllowedTools, i), "must not be empty")
			continue
		}
		if !seen[t] {
			seen[t] = true
			c.s.AllowedTools = append(c.s.AllowedTools, t)
		}
	}
}

func (c *checker) metadata(v *yaml.Node) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return
	}
	if v.Kind != yaml.MappingNode {
		c.add(KeyMetadata, "must be a mapping of strings to strings, not a %s", kindName(v))
		return
	}
	if len(v.Content)/2 > MaxMetadataEntries {
		c.add(KeyMetadata, "must have at most %d entries, got %d", MaxMetadataEntries, len(v.Content)/2)
		return
	}
	c.s.Metadata = make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			c.add(KeyMetadata, "keys must be non-empty strings (line %d)", k.Line)
			continue
		}
		field := Key(KeyMetadata, Clip(k.Value, MaxMetadataKeyBytes))
		if len(k.Value) > MaxMetadataKeyBytes {
			c.add(field, "key must be at most %d bytes", MaxMetadataKeyBytes)
			continue
		}
		if _, dup := c.s.Metadata[k.Value]; dup {
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
		c.s.Metadata[k.Value] = s
	}
}

func (c *checker) triggers(v *yaml.Node) {
	list, ok := c.stringList(KeyTriggers, v, MaxTriggers)
	if !ok {
		return
	}
	for i, t := range list {
		t = strings.TrimSpace(t)
		f := Index(KeyTriggers, i)
		switch {
		case t == "":
			c.add(f, "must not be empty")
		case utf8.RuneCountInString(t) > MaxTriggerChars:
			c.add(f, "must be at most %d characters", MaxTriggerChars)
		case strings.IndexFunc(t, unicode.IsControl) >= 0:
			c.add(f, "must not contain control characters")
		default:
			c.s.Triggers = append(c.s.Triggers, t)
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

// extra keeps a key neither the standard nor the platform defines as JSON
// text, with a lenient violation: other tools add keys of their own. Keys
// are bounded so that a front matter cannot fill the map; the rest are
// dropped, said in one more warning.
func (c *checker) extra(key string, v *yaml.Node) {
	key = strings.ToValidUTF8(key, "\uFFFD")
	if len(c.s.Extra) >= MaxExtraKeys {
		if !c.extraDropped {
			c.extraDropped = true
			c.warn("front matter", "more than %d unknown keys; the rest are dropped", MaxExtraKeys)
		}
		return
	}
	if c.s.Extra == nil {
		c.s.Extra = map[string]string{}
	}
	c.warn("front matter", "unknown key %q is not part of the Agent Skills standard; it is ignored", Clip(key, 64))
	c.s.Extra[key] = nodeJSON(v)
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

func (c *checker) maxChars(field, s string, max int, lenient bool) {
	if n := utf8.RuneCountInString(s); n > max {
		c.vs = append(c.vs, Violation{Field: field, Message: fmt.Sprintf("must be at most %d characters, got %d", max, n), Lenient: lenient})
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

// Clip shortens s to at most max bytes at a rune boundary, for messages.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
