package scripted

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"go.yaml.in/yaml/v3"
)

// The structured-output schemas the memory service's extraction and
// community summaries ask for (services/memory/extract and
// services/memory/community). The scripted model answers requests naming
// them from a gazetteer file instead of a scenario.
const (
	SchemaExtraction = "memory_extraction"
	SchemaReflexion  = "memory_reflexion"
	SchemaCommunity  = "memory_community"
)

// GazetteerKind is the `kind` of a gazetteer file.
const GazetteerKind = "memory-extraction"

// Markers of the request texts (see the README): a reflexion request lists
// what the first pass found after alreadyMarker; a community request lists
// its members as "- Name (Type): summary" lines and its facts after
// factsMarker.
const (
	alreadyMarker = "already extracted:"
	factsMarker   = "facts:"
)

// Limits of a gazetteer and of one answer (the caps the extraction prompt
// asks a model to keep).
const (
	maxGazetteerEntities  = 10000
	maxGazetteerRelations = 50000
	maxAnswerEntities     = 50
	maxAnswerRelations    = 30
	maxCommunityFacts     = 5
	// maxHits bounds the name occurrences one text is searched for.
	maxHits = 4096
)

// EntityTypes are the entity types extraction knows.
var EntityTypes = []string{"Person", "Organization", "Location", "Product", "ProductCategory", "Metric", "Dataset", "Table", "Column", "TimePeriod", "Event", "Concept", "Other"}

var relationTypePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

type gazetteerFile struct {
	Kind        string              `yaml:"kind"`
	Name        string              `yaml:"name"`
	Description string              `yaml:"description"`
	Entities    []gazetteerEntity   `yaml:"entities"`
	Relations   []gazetteerRelation `yaml:"relations"`
}

type gazetteerEntity struct {
	Name       string            `yaml:"name"`
	Type       string            `yaml:"type"`
	Summary    string            `yaml:"summary"`
	Aliases    []string          `yaml:"aliases"`
	Attributes map[string]string `yaml:"attributes"`
}

type gazetteerRelation struct {
	Source string `yaml:"source"`
	Target string `yaml:"target"`
	Type   string `yaml:"type"`
	Fact   string `yaml:"fact"`
}

// Gazetteer is a validated gazetteer file, immutable after loading.
type Gazetteer struct {
	Name string
	File string

	entities  []gazetteerEntity
	relations []gazetteerRelation
	// terms are the lower-cased names and aliases, longest first, each
	// with its entity's index.
	terms []term
	// byName indexes entities by lower-cased name.
	byName map[string]int
}

type term struct {
	text   string
	entity int
}

// Entities is the number of entities.
func (g *Gazetteer) Entities() int { return len(g.entities) }

// Relations is the number of relations.
func (g *Gazetteer) Relations() int { return len(g.relations) }

// fileKind reads the `kind` of a scenarios-directory file ("" for a
// scenario, which has none).
func fileKind(data []byte) string {
	var k struct {
		Kind string `yaml:"kind"`
	}
	if yaml.Unmarshal(data, &k) != nil {
		return ""
	}
	return k.Kind
}

// parseGazetteer reads and validates a gazetteer file. Errors name the file
// and the field.
func parseGazetteer(file string, data []byte) (*Gazetteer, error) {
	var f gazetteerFile
	if err := decodeFile(file, data, &f); err != nil {
		return nil, err
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(file+": "+format, args...)) }
	if f.Kind != GazetteerKind {
		bad("kind: %q, want %q", f.Kind, GazetteerKind)
	}
	if !namePattern.MatchString(f.Name) {
		bad("name: %q must match %s", f.Name, namePattern)
	}
	if len(f.Entities) == 0 {
		bad("entities: at least one entity is required")
	}
	if len(f.Entities) > maxGazetteerEntities {
		bad("entities: at most %d, got %d", maxGazetteerEntities, len(f.Entities))
	}
	if len(f.Relations) > maxGazetteerRelations {
		bad("relations: at most %d, got %d", maxGazetteerRelations, len(f.Relations))
	}
	g := &Gazetteer{Name: f.Name, File: file, entities: f.Entities, relations: f.Relations, byName: map[string]int{}}
	termOwner := map[string]int{}
	for i, e := range f.Entities {
		field := fmt.Sprintf("entities[%d]", i)
		if strings.TrimSpace(e.Name) == "" {
			bad("%s.name: empty", field)
			continue
		}
		if !slices.Contains(EntityTypes, e.Type) {
			bad("%s.type: %q is not one of %s", field, e.Type, strings.Join(EntityTypes, ", "))
		}
		if strings.TrimSpace(e.Summary) == "" {
			bad("%s.summary: empty", field)
		}
		key := strings.ToLower(e.Name)
		if _, dup := g.byName[key]; dup {
			bad("%s.name: %q is already used", field, e.Name)
			continue
		}
		g.byName[key] = i
		for j, t := range append([]string{e.Name}, e.Aliases...) {
			lt := strings.ToLower(strings.TrimSpace(t))
			if lt == "" {
				bad("%s.aliases[%d]: empty", field, j-1)
				continue
			}
			if prev, dup := termOwner[lt]; dup && prev != i {
				bad("%s: %q also names %q", field, t, f.Entities[prev].Name)
				continue
			}
			if _, dup := termOwner[lt]; !dup {
				termOwner[lt] = i
				g.terms = append(g.terms, term{text: lt, entity: i})
			}
		}
	}
	for i, r := range f.Relations {
		field := fmt.Sprintf("relations[%d]", i)
		if _, ok := g.byName[strings.ToLower(r.Source)]; !ok {
			bad("%s.source: %q is not an entity of the file", field, r.Source)
		}
		if _, ok := g.byName[strings.ToLower(r.Target)]; !ok {
			bad("%s.target: %q is not an entity of the file", field, r.Target)
		}
		if !relationTypePattern.MatchString(r.Type) {
			bad("%s.type: %q must match %s", field, r.Type, relationTypePattern)
		}
		if strings.TrimSpace(r.Fact) == "" {
			bad("%s.fact: empty", field)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortStableFunc(g.terms, func(a, b term) int { return len(b.text) - len(a.text) })
	return g, nil
}

// find returns the indexes of the entities named in text, in order of
// first occurrence. Names match case-insensitively as whole words; where
// two names overlap the longer wins ("Analytics Suite Pro" is not also
// "Analytics Suite").
func (g *Gazetteer) find(text string) []int {
	lower := strings.ToLower(text)
	type hit struct{ start, end, entity int }
	var taken []hit
	overlaps := func(a, b int) bool {
		for _, h := range taken {
			if a < h.end && h.start < b {
				return true
			}
		}
		return false
	}
	for _, t := range g.terms {
		from := 0
		for {
			i := strings.Index(lower[from:], t.text)
			if i < 0 {
				break
			}
			a, b := from+i, from+i+len(t.text)
			from = a + 1
			if !wordBoundary(lower, a, b) || overlaps(a, b) {
				continue
			}
			taken = append(taken, hit{a, b, t.entity})
			if len(taken) >= maxHits {
				break
			}
		}
	}
	slices.SortFunc(taken, func(x, y hit) int { return x.start - y.start })
	var out []int
	seen := map[int]bool{}
	for _, h := range taken {
		if !seen[h.entity] {
			seen[h.entity] = true
			out = append(out, h.entity)
		}
	}
	return out
}

func wordBoundary(s string, a, b int) bool {
	if a > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:a])
		if isWordRune(r) {
			return false
		}
	}
	if b < len(s) {
		r, _ := utf8.DecodeRuneInString(s[b:])
		if isWordRune(r) {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// The answers' JSON, as the schemas of services/memory/extract and
// services/memory/community describe it.
type memAttribute struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type memEntity struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Summary    string         `json:"summary"`
	Attributes []memAttribute `json:"attributes"`
}

type memRelation struct {
	Source     string  `json:"source"`
	Target     string  `json:"target"`
	Type       string  `json:"type"`
	Fact       string  `json:"fact"`
	Confidence float64 `json:"confidence"`
}

type memExtraction struct {
	Entities  []memEntity   `json:"entities"`
	Relations []memRelation `json:"relations"`
}

type memCommunity struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// scriptedConfidence is the confidence of every gazetteer relation: they
// are facts of the sample data, but found by string matching.
const scriptedConfidence = 0.9

func (g *Gazetteer) entityJSON(i int) memEntity {
	e := g.entities[i]
	m := memEntity{Name: e.Name, Type: e.Type, Summary: e.Summary, Attributes: []memAttribute{}}
	keys := make([]string, 0, len(e.Attributes))
	for k := range e.Attributes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m.Attributes = append(m.Attributes, memAttribute{Key: k, Value: e.Attributes[k]})
	}
	return m
}

// extraction answers memory_extraction: the entities named in text and the
// relations among them.
func (g *Gazetteer) extraction(text string) memExtraction {
	found := g.find(text)
	if len(found) > maxAnswerEntities {
		found = found[:maxAnswerEntities]
	}
	in := map[int]bool{}
	out := memExtraction{Entities: []memEntity{}, Relations: []memRelation{}}
	for _, i := range found {
		in[i] = true
		out.Entities = append(out.Entities, g.entityJSON(i))
	}
	out.Relations = g.relationsAmong(in, nil)
	return out
}

// reflexion answers memory_reflexion: the entities named in the text part
// that the "Already extracted:" list misses, and the relations that link
// them to the text's entities.
func (g *Gazetteer) reflexion(msg string) memExtraction {
	text, already := splitMarker(msg, alreadyMarker)
	known := map[string]bool{}
	for _, line := range listLines(already) {
		name, _, _ := strings.Cut(line, " (")
		known[strings.ToLower(strings.TrimSpace(name))] = true
	}
	out := memExtraction{Entities: []memEntity{}, Relations: []memRelation{}}
	in, fresh := map[int]bool{}, map[int]bool{}
	for _, i := range g.find(text) {
		in[i] = true
		if !known[strings.ToLower(g.entities[i].Name)] && len(fresh) < maxAnswerEntities {
			fresh[i] = true
			out.Entities = append(out.Entities, g.entityJSON(i))
		}
	}
	out.Relations = g.relationsAmong(in, fresh)
	return out
}

// relationsAmong lists the relations between entities of in (touching one
// of fresh when fresh is not nil), in file order, at most
// maxAnswerRelations.
func (g *Gazetteer) relationsAmong(in, fresh map[int]bool) []memRelation {
	out := []memRelation{}
	for _, r := range g.relations {
		s, t := g.byName[strings.ToLower(r.Source)], g.byName[strings.ToLower(r.Target)]
		if !in[s] || !in[t] || (fresh != nil && !fresh[s] && !fresh[t]) {
			continue
		}
		out = append(out, memRelation{Source: g.entities[s].Name, Target: g.entities[t].Name, Type: r.Type, Fact: r.Fact, Confidence: scriptedConfidence})
		if len(out) == maxAnswerRelations {
			break
		}
	}
	return out
}

// community answers memory_community from the member lines ("- Name
// (Type): summary") and facts of the request: a name from the first
// members and a summary, labelled as scripted, listing members and facts.
func community(msg string) memCommunity {
	membersPart, factsPart := splitMarker(msg, factsMarker)
	type member struct{ name, typ string }
	var members []member
	for _, line := range listLines(membersPart) {
		head, _, _ := strings.Cut(line, ":")
		name, typ := head, ""
		if i := strings.LastIndex(head, " ("); i > 0 && strings.HasSuffix(head, ")") {
			name, typ = head[:i], head[i+2:len(head)-1]
		}
		if name = strings.TrimSpace(name); name != "" {
			members = append(members, member{name, typ})
		}
	}
	facts := listLines(factsPart)
	if len(members) == 0 {
		return memCommunity{Name: "Unnamed community", Summary: "[scripted model] The request listed no members, so there is nothing to summarise."}
	}
	var name string
	switch len(members) {
	case 1:
		name = members[0].name
	case 2:
		name = members[0].name + " and " + members[1].name
	default:
		name = fmt.Sprintf("%s, %s and %d more", members[0].name, members[1].name, len(members)-2)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[scripted model: no language model wrote this] A group of %d related entities: ", len(members))
	for i, m := range members {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.name)
		if m.typ != "" {
			b.WriteString(" (" + m.typ + ")")
		}
	}
	b.WriteString(".")
	if len(facts) > 0 {
		b.WriteString(" Facts: ")
		for i, f := range facts[:min(len(facts), maxCommunityFacts)] {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(strings.TrimSpace(f))
		}
	}
	return memCommunity{Name: truncate(120, name), Summary: truncate(2000, b.String())}
}

// splitMarker splits msg at the first line that is marker (case-insensitive,
// trimmed): the text before and the lines after.
func splitMarker(msg, marker string) (before, after string) {
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		if strings.EqualFold(strings.TrimSpace(l), marker) {
			return strings.Join(lines[:i], "\n"), strings.Join(lines[i+1:], "\n")
		}
	}
	return msg, ""
}

// listLines returns the items of "- item" lines.
func listLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if item, ok := strings.CutPrefix(l, "- "); ok && strings.TrimSpace(item) != "" {
			out = append(out, strings.TrimSpace(item))
		}
	}
	return out
}

// memorySchema reports which memory schema a request's response_format
// names ("" for none).
func memorySchema(rf *openai.ChatCompletionResponseFormat) string {
	if rf == nil || rf.Type != openai.ChatCompletionResponseFormatTypeJSONSchema || rf.JSONSchema == nil {
		return ""
	}
	switch rf.JSONSchema.Name {
	case SchemaExtraction, SchemaReflexion, SchemaCommunity:
		return rf.JSONSchema.Name
	}
	return ""
}

// answerMemory answers a structured-output request of the memory service.
func (s *Server) answerMemory(schema string, req *openai.ChatCompletionRequest) (*reply, error) {
	if err := validateResponseFormat(req.ResponseFormat); err != nil {
		return nil, err
	}
	c, err := analyze(req.Messages)
	if err != nil {
		return nil, err
	}
	// The content is the latest user message.
	content := c.userRequest
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == openai.ChatMessageRoleUser {
			content = text(&req.Messages[i])
			break
		}
	}
	var v any
	switch schema {
	case SchemaCommunity:
		v = community(content)
	case SchemaReflexion:
		if s.gazetteer == nil {
			v = memExtraction{Entities: []memEntity{}, Relations: []memRelation{}}
		} else {
			v = s.gazetteer.reflexion(content)
		}
	default:
		if s.gazetteer == nil {
			v = memExtraction{Entities: []memEntity{}, Relations: []memRelation{}}
		} else {
			v = s.gazetteer.extraction(content)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &reply{label: schema, turn: 1, text: string(b)}, nil
}

// validateResponseFormat checks a json_schema response format the way the
// API does: a name of [a-zA-Z0-9_-]{1,64}, a schema, and in strict mode
// every object closed (additionalProperties: false) with every property
// required.
func validateResponseFormat(rf *openai.ChatCompletionResponseFormat) error {
	js := rf.JSONSchema
	if !toolNamePattern.MatchString(js.Name) {
		return &requestError{"response_format.json_schema.name", fmt.Sprintf("%q must match ^[a-zA-Z0-9_-]{1,64}$", js.Name)}
	}
	if js.Schema == nil {
		return &requestError{"response_format.json_schema.schema", "required"}
	}
	raw, err := js.Schema.MarshalJSON()
	if err != nil {
		return &requestError{"response_format.json_schema.schema", err.Error()}
	}
	var schema any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return &requestError{"response_format.json_schema.schema", "not a JSON object"}
	}
	root, ok := schema.(map[string]any)
	if !ok {
		return &requestError{"response_format.json_schema.schema", "not a JSON object"}
	}
	if !js.Strict {
		return nil
	}
	if root["type"] != "object" {
		return &requestError{"response_format", fmt.Sprintf("Invalid schema for response_format '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: %v'.", js.Name, root["type"])}
	}
	if msg := checkStrict(root, nil, 0); msg != "" {
		return &requestError{"response_format", fmt.Sprintf("Invalid schema for response_format '%s': %s", js.Name, msg)}
	}
	return nil
}

// maxSchemaDepth is the nesting the API allows (5 levels of objects; the
// walk counts every keyword level, so allow more).
const maxSchemaDepth = 32

// checkStrict walks a schema for the strict-mode rules; it returns the
// first violation, in the API's words, or "".
func checkStrict(node map[string]any, path []string, depth int) string {
	if depth > maxSchemaDepth {
		return "In context=" + schemaContext(path) + ", the schema nests too deeply."
	}
	props, hasProps := node["properties"].(map[string]any)
	if node["type"] == "object" || hasProps {
		if ap, ok := node["additionalProperties"].(bool); !ok || ap {
			return "In context=" + schemaContext(path) + ", 'additionalProperties' is required to be supplied and to be false."
		}
		required := map[string]bool{}
		if req, ok := node["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !required[k] {
				return "In context=" + schemaContext(path) + ", 'required' is required to be supplied and to be an array including every key in properties. Missing '" + k + "'."
			}
		}
		for _, k := range keys {
			sub, ok := props[k].(map[string]any)
			if !ok {
				return "In context=" + schemaContext(append(path, "properties", k)) + ", schema must be an object."
			}
			if msg := checkStrict(sub, append(path, "properties", k), depth+1); msg != "" {
				return msg
			}
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		if msg := checkStrict(items, append(path, "items"), depth+1); msg != "" {
			return msg
		}
	}
	for _, kw := range []string{"anyOf", "$defs", "definitions"} {
		switch v := node[kw].(type) {
		case []any:
			for i, s := range v {
				if sub, ok := s.(map[string]any); ok {
					if msg := checkStrict(sub, append(path, kw, fmt.Sprint(i)), depth+1); msg != "" {
						return msg
					}
				}
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if sub, ok := v[k].(map[string]any); ok {
					if msg := checkStrict(sub, append(path, kw, k), depth+1); msg != "" {
						return msg
					}
				}
			}
		}
	}
	return ""
}

func schemaContext(path []string) string {
	if len(path) == 0 {
		return "()"
	}
	q := make([]string, len(path))
	for i, p := range path {
		q[i] = "'" + p + "'"
	}
	return "(" + strings.Join(q, ", ") + ")"
}
