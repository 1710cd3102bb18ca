package extract

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
)

// Caps on one episode's result and on its strings (in runes).
const (
	MaxEntities        = 50
	MaxRelations       = 30
	MaxAttributes      = 20
	maxNameRunes       = 200
	maxSummaryRunes    = 1000
	maxFactRunes       = 500
	maxAttrKeyRunes    = 64
	maxAttrValueRunes  = 500
	maxRelTypeRunes    = 64
	defaultConfidence  = 0.5
	minConfidence      = 0.01
	defaultRelation    = "RELATED_TO"
	maxParseInputBytes = 4 << 20
)

// EntityTypes are the types an entity may have; anything else becomes
// Other.
var EntityTypes = []string{"Person", "Organization", "Location", "Product", "ProductCategory", "Metric", "Dataset", "Table", "Column", "TimePeriod", "Event", "Concept", "Other"}

var entityTypeByLower = func() map[string]string {
	m := map[string]string{}
	for _, t := range EntityTypes {
		m[strings.ToLower(t)] = t
	}
	return m
}()

var schemaDescriptions = map[string]string{
	SchemaExtraction: "Entities and relations found in a text.",
	SchemaReflexion:  "Entities (and their relations) that a first extraction pass missed.",
}

// extractionSchema is the strict JSON schema of both passes' answers.
// Attributes are key/value pairs because strict mode allows no open maps.
const extractionSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["entities", "relations"],
  "properties": {
    "entities": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "type", "summary", "attributes"],
        "properties": {
          "name": {"type": "string", "description": "The entity's canonical name as written in the text."},
          "type": {"type": "string", "enum": ["Person", "Organization", "Location", "Product", "ProductCategory", "Metric", "Dataset", "Table", "Column", "TimePeriod", "Event", "Concept", "Other"]},
          "summary": {"type": "string", "description": "One or two sentences on what the text says about the entity."},
          "attributes": {
            "type": "array",
            "items": {
              "type": "object",
              "additionalProperties": false,
              "required": ["key", "value"],
              "properties": {"key": {"type": "string"}, "value": {"type": "string"}}
            }
          }
        }
      }
    },
    "relations": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["source", "target", "type", "fact", "confidence"],
        "properties": {
          "source": {"type": "string", "description": "Name of an entity of this answer."},
          "target": {"type": "string", "description": "Name of an entity of this answer."},
          "type": {"type": "string", "description": "UPPER_SNAKE_CASE verb phrase, e.g. IN_CATEGORY."},
          "fact": {"type": "string", "description": "The fact, as one self-contained sentence."},
          "confidence": {"type": "number", "description": "How sure the text makes the fact, in (0, 1]."}
        }
      }
    }
  }
}`

const extractionPrompt = `You build a business-analytics knowledge graph. From the user's text (a question, its answer and key observations of an analysis, or a note) extract the entities and the relations between them.

Entity types:
- Person: a named person.
- Organization: a company, customer account, team or other organisation.
- Location: a country, city, sales region or other place.
- Product: a product or service that is sold.
- ProductCategory: a category or family of products.
- Metric: a measure such as revenue, margin or average order value.
- Dataset: a data source or collection of tables or files.
- Table: a database table or tabular file.
- Column: a column of a table; name it table.column when the table is known.
- TimePeriod: a year, quarter, month or date range (write quarters as "Q3 2026").
- Event: something that happened at a time (a launch, an outage, a campaign).
- Concept: another business notion (a customer segment, a KPI definition).
- Other: anything else worth remembering.

Rules:
- Extract only what the text states; never invent entities, numbers or facts.
- Use the most complete name the text gives, once per entity; do not list an entity twice.
- The summary says what the text tells about the entity, with its figures.
- Attributes are short key/value facts about one entity (for example list_price_usd = 349.00).
- A relation links two entities of your answer, by their exact names; its type is an UPPER_SNAKE_CASE verb phrase (IN_CATEGORY, LOCATED_IN, HAS_COLUMN, MEASURED_FOR, PART_OF); its fact is one self-contained sentence with the figures; confidence is in (0, 1].
- At most 50 entities and 30 relations; prefer the most important.
- Ignore personal data (email addresses, phone numbers) and secrets.`

const reflexionPrompt = `You check an extraction for a business-analytics knowledge graph. The user gives a text and the entities already extracted from it. Which entities did the first pass miss? Answer only entities of the text that are not in the list (same types and rules as an extraction: Person, Organization, Location, Product, ProductCategory, Metric, Dataset, Table, Column, TimePeriod, Event, Concept, Other), and the relations that link them to each other or to the listed entities, naming entities exactly. Never invent anything; answer empty lists when nothing was missed.`

// The answers' JSON.
type wireAttribute struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type wireEntity struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Summary    string          `json:"summary"`
	Attributes []wireAttribute `json:"attributes"`
}

type wireRelation struct {
	Source     string   `json:"source"`
	Target     string   `json:"target"`
	Type       string   `json:"type"`
	Fact       string   `json:"fact"`
	Confidence *float64 `json:"confidence"`
}

type wireResult struct {
	Entities  []wireEntity   `json:"entities"`
	Relations []wireRelation `json:"relations"`
}

// Parse decodes and validates a model's answer (see Result): entity names
// trimmed and non-empty, unknown types mapped to Other, names unique per
// type (case-insensitively; a repeat fills in a missing summary and
// attributes), at most MaxEntities entities, MaxAttributes attributes each;
// relations only between entities of the result (by name,
// case-insensitively), their types in UPPER_SNAKE_CASE, confidence clamped
// into (0, 1], repeats merged, at most MaxRelations; every string capped.
func Parse(content string) (*Result, error) {
	w, err := decode(content)
	if err != nil {
		return nil, err
	}
	return validate(w, nil), nil
}

// parseRaw is Parse keeping the wire form, for merging a reflexion answer.
func parseRaw(content string) (*wireResult, error) { return decode(content) }

func decode(content string) (*wireResult, error) {
	if len(content) > maxParseInputBytes {
		return nil, fmt.Errorf("answer larger than %d bytes", maxParseInputBytes)
	}
	s := strings.TrimSpace(content)
	// Some OpenAI-compatible servers wrap JSON in a Markdown fence.
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	if s == "" {
		return nil, errors.New("empty answer")
	}
	var w wireResult
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		return nil, fmt.Errorf("answer is not the schema's JSON: %w", err)
	}
	if w.Entities == nil && w.Relations == nil {
		var probe map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &probe) != nil || (probe["entities"] == nil && probe["relations"] == nil) {
			return nil, errors.New("answer has neither entities nor relations")
		}
	}
	return &w, nil
}

// validate builds a Result from wire answers: base first, then more.
func validate(base *wireResult, more *wireResult) *Result {
	res := &Result{}
	index := map[string]int{}  // lower(type)+"\x00"+lower(name) → entity
	byName := map[string]int{} // lower(name) → first entity of that name
	addEntities := func(w *wireResult) {
		for _, we := range w.Entities {
			name := clean(we.Name, maxNameRunes)
			if name == "" {
				continue
			}
			typ := entityTypeByLower[strings.ToLower(strings.TrimSpace(we.Type))]
			if typ == "" {
				typ = "Other"
			}
			key := strings.ToLower(typ) + "\x00" + strings.ToLower(name)
			summary := clean(we.Summary, maxSummaryRunes)
			if i, dup := index[key]; dup {
				e := &res.Entities[i]
				if e.Summary == "" {
					e.Summary = summary
				}
				addAttributes(e, we.Attributes)
				continue
			}
			if len(res.Entities) >= MaxEntities {
				continue
			}
			e := Entity{Name: name, Type: typ, Summary: summary}
			addAttributes(&e, we.Attributes)
			index[key] = len(res.Entities)
			if _, ok := byName[strings.ToLower(name)]; !ok {
				byName[strings.ToLower(name)] = len(res.Entities)
			}
			res.Entities = append(res.Entities, e)
		}
	}
	addEntities(base)
	if more != nil {
		addEntities(more)
	}
	relIndex := map[string]int{}
	addRelations := func(w *wireResult) {
		for _, wr := range w.Relations {
			si, ok1 := byName[strings.ToLower(clean(wr.Source, maxNameRunes))]
			ti, ok2 := byName[strings.ToLower(clean(wr.Target, maxNameRunes))]
			if !ok1 || !ok2 || si == ti {
				continue
			}
			r := Relation{
				Source:     res.Entities[si].Name,
				Target:     res.Entities[ti].Name,
				Type:       relationType(wr.Type),
				Fact:       clean(wr.Fact, maxFactRunes),
				Confidence: clampConfidence(wr.Confidence),
			}
			key := strings.ToLower(r.Source) + "\x00" + strings.ToLower(r.Target) + "\x00" + r.Type
			if i, dup := relIndex[key]; dup {
				if r.Confidence > res.Relations[i].Confidence {
					res.Relations[i].Confidence = r.Confidence
				}
				if res.Relations[i].Fact == "" {
					res.Relations[i].Fact = r.Fact
				}
				continue
			}
			if len(res.Relations) >= MaxRelations {
				continue
			}
			relIndex[key] = len(res.Relations)
			res.Relations = append(res.Relations, r)
		}
	}
	addRelations(base)
	if more != nil {
		addRelations(more)
	}
	return res
}

// merge adds a reflexion answer to a validated first-pass result.
func merge(first *Result, more *wireResult) *Result {
	base := &wireResult{}
	for _, e := range first.Entities {
		we := wireEntity{Name: e.Name, Type: e.Type, Summary: e.Summary}
		for k, v := range e.Attributes {
			we.Attributes = append(we.Attributes, wireAttribute{Key: k, Value: v})
		}
		base.Entities = append(base.Entities, we)
	}
	for _, r := range first.Relations {
		c := r.Confidence
		base.Relations = append(base.Relations, wireRelation{Source: r.Source, Target: r.Target, Type: r.Type, Fact: r.Fact, Confidence: &c})
	}
	return validate(base, more)
}

func addAttributes(e *Entity, attrs []wireAttribute) {
	for _, a := range attrs {
		k := clean(a.Key, maxAttrKeyRunes)
		v := clean(a.Value, maxAttrValueRunes)
		if k == "" || v == "" {
			continue
		}
		if e.Attributes == nil {
			e.Attributes = map[string]string{}
		}
		if _, ok := e.Attributes[k]; ok || len(e.Attributes) >= MaxAttributes {
			continue
		}
		e.Attributes[k] = v
	}
}

// clean trims s, collapses control characters to spaces and caps it at n
// runes.
func clean(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	t, _ := truncateRunes(s, n)
	return strings.TrimSpace(t)
}

// relationType turns "in category" or "inCategory" into IN_CATEGORY.
func relationType(s string) string {
	var b strings.Builder
	prevLower := false
	pendingSep := false
	for _, r := range strings.TrimSpace(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if r < 128 {
				if (pendingSep || (prevLower && unicode.IsUpper(r))) && b.Len() > 0 {
					b.WriteByte('_')
				}
				pendingSep = false
				b.WriteRune(unicode.ToUpper(r))
				prevLower = unicode.IsLower(r)
			} else {
				pendingSep = true
			}
		default:
			pendingSep = true
			prevLower = false
		}
		if b.Len() >= maxRelTypeRunes {
			break
		}
	}
	t := strings.Trim(b.String(), "_")
	if len(t) > maxRelTypeRunes {
		t = strings.TrimRight(t[:maxRelTypeRunes], "_")
	}
	if t == "" || !(t[0] >= 'A' && t[0] <= 'Z') {
		return defaultRelation
	}
	return t
}

func clampConfidence(c *float64) float64 {
	if c == nil || math.IsNaN(*c) {
		return defaultConfidence
	}
	return math.Min(1, math.Max(minConfidence, *c))
}
