package scripted

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func readCSV(t *testing.T, name string) []map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "examples", "data", name))
	if err != nil {
		t.Skipf("sample data: %v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

// The gazetteer's figures were computed from examples/data; this recomputes
// them so that a change of the data cannot leave the file stale.
func TestGazetteerMatchesTheSampleData(t *testing.T) {
	_, g, err := loadFiles("../../examples/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if g == nil {
		t.Fatal("no gazetteer shipped")
	}
	products, customers, orders := readCSV(t, "products.csv"), readCSV(t, "customers.csv"), readCSV(t, "orders.csv")
	category := map[string]string{}
	for _, p := range products {
		category[p["product_id"]] = p["category"]
	}
	segment := map[string]string{}
	for _, c := range customers {
		segment[c["customer_id"]] = c["segment"]
	}
	revenue := map[string]float64{}
	for _, o := range orders {
		q, _ := strconv.ParseFloat(o["quantity"], 64)
		p, _ := strconv.ParseFloat(o["unit_price"], 64)
		revenue[category[o["product_id"]]] += q * p
		revenue[o["region"]] += q * p
		revenue[segment[o["customer_id"]]] += q * p
	}
	for name, want := range revenue {
		i, ok := g.byName[strings.ToLower(name)]
		if !ok {
			t.Errorf("%s is not in the gazetteer", name)
			continue
		}
		got, err := strconv.ParseFloat(g.entities[i].Attributes["revenue_usd"], 64)
		if err != nil || math.Abs(got-want) > 0.01 {
			t.Errorf("%s: revenue_usd %q, the data says %.2f", name, g.entities[i].Attributes["revenue_usd"], want)
		}
	}
	inCategory := map[string]string{}
	for _, r := range g.relations {
		if r.Type == "IN_CATEGORY" {
			inCategory[r.Source] = r.Target
		}
	}
	for _, p := range products {
		i, ok := g.byName[strings.ToLower(p["name"])]
		if !ok || g.entities[i].Type != "Product" {
			t.Errorf("product %q missing", p["name"])
			continue
		}
		if inCategory[p["name"]] != p["category"] {
			t.Errorf("%s IN_CATEGORY %q, the data says %q", p["name"], inCategory[p["name"]], p["category"])
		}
	}
}

func TestGazetteerFindsWholeWordsLongestFirst(t *testing.T) {
	_, g, err := loadFiles("../../examples/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	names := func(text string) []string {
		var out []string
		for _, i := range g.find(text) {
			out = append(out, g.entities[i].Name)
		}
		return out
	}
	got := names("Analytics Suite Pro (annual) sold well in the north region during Q3 2026; Northwind is not a region. 2025-Q4 was weaker.")
	want := []string{"Analytics Suite Pro (annual)", "North", "Q3 2026", "Q4 2025"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("found %q, want %q", got, want)
	}
	ex := g.extraction("Revenue of Rack Server S10 (Hardware) in Q3 2026.")
	var rels []string
	for _, r := range ex.Relations {
		rels = append(rels, r.Source+" "+r.Type+" "+r.Target)
	}
	for _, w := range []string{"Rack Server S10 IN_CATEGORY Hardware", "revenue MEASURED_FOR Hardware", "revenue MEASURED_FOR Q3 2026"} {
		if !strings.Contains(strings.Join(rels, "\n"), w) {
			t.Errorf("relation %q missing from %q", w, rels)
		}
	}
	if ex.Entities[0].Name != "revenue" || len(ex.Entities[0].Attributes) == 0 {
		t.Errorf("first entity %+v", ex.Entities[0])
	}
}

func TestReflexionReturnsOnlyMissedEntities(t *testing.T) {
	_, g, err := loadFiles("../../examples/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	r := g.reflexion("Text:\nHardware revenue in the North region.\n\nAlready extracted:\n- Hardware (ProductCategory)\n- revenue (Metric)\n")
	if len(r.Entities) != 1 || r.Entities[0].Name != "North" {
		t.Fatalf("entities %+v", r.Entities)
	}
	for _, rel := range r.Relations {
		if rel.Source != "North" && rel.Target != "North" {
			t.Errorf("relation %+v does not touch the missed entity", rel)
		}
	}
	if len(r.Relations) == 0 {
		t.Error("no relation links North to the text's entities")
	}
}

func TestCommunityAnswerIsLabelled(t *testing.T) {
	c := community("Members:\n- Hardware (ProductCategory): servers and storage\n- Rack Server S10 (Product): a server\n- Rack Server S20 (Product)\n\nFacts:\n- Rack Server S10 is in the Hardware category.\n")
	if c.Name != "Hardware, Rack Server S10 and 1 more" {
		t.Errorf("name %q", c.Name)
	}
	if !strings.HasPrefix(c.Summary, "[scripted model") || !strings.Contains(c.Summary, "Rack Server S20 (Product)") || !strings.Contains(c.Summary, "is in the Hardware category") {
		t.Errorf("summary %q", c.Summary)
	}
	if e := community("nothing"); !strings.Contains(e.Summary, "no members") {
		t.Errorf("empty: %+v", e)
	}
}

func TestParseGazetteerErrorsNameFileAndField(t *testing.T) {
	cases := map[string]string{
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Robot, summary: s}]":                                                                               `entities[0].type: "Robot"`,
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s}]\nrelations: [{source: A, target: B, type: X, fact: f}]":                        `relations[0].target: "B"`,
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s, aliases: [b]}, {name: B, type: Other, summary: s}]":                             `"B" also names "A"`,
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s}]\nrelations: [{source: A, target: A, type: lower, fact: f}]":                    `relations[0].type`,
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s}]\nextra: 1":                                                                     "field extra not found",
		"kind: memory-extraction\nname: g\nentities: []":                                                                                                                 "at least one entity",
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s}, {name: a, type: Other, summary: s}]":                                           `entities[1].name: "a" is already used`,
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s}]\nrelations: [{source: A, target: A, type: SELF, fact: '  '}]":                  "relations[0].fact: empty",
		"kind: memory-extraction\nname: G!\nentities: [{name: A, type: Other, summary: s}]":                                                                              "name:",
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: ''}]":                                                                              "entities[0].summary: empty",
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s, aliases: ['']}]":                                                                "entities[0].aliases[0]: empty",
		"kind: memory-extraction\nname: g\nentities: [{name: ' ', type: Other, summary: s}]":                                                                             "entities[0].name: empty",
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s}]\nrelations: [{source: C, target: A, type: X, fact: f}]":                        `relations[0].source: "C"`,
		"kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s, attributes: {k: v}}]\nrelations: [{source: a, target: A, type: SELF, fact: f}]": "",
	}
	for body, want := range cases {
		_, err := parseGazetteer("g.yaml", []byte(body))
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "g.yaml") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\nerr = %v\nwant %q", body, err, want)
		}
	}
}

func TestLoadFilesRefusesTwoGazetteers(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		body := fmt.Sprintf("kind: memory-extraction\nname: g%d\nentities: [{name: A, type: Other, summary: s}]", i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("g%d.yaml", i)), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := loadFiles(dir); err == nil || !strings.Contains(err.Error(), "a second gazetteer") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzGazetteerAnswers(f *testing.F) {
	_, g, err := loadFiles("../../examples/scenarios")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Hardware revenue in the North region in Q3 2026")
	f.Add("Text:\nSMB customers\nAlready extracted:\n- SMB (Concept)")
	f.Add("- A (T): x\nFacts:\n- f")
	f.Fuzz(func(t *testing.T, s string) {
		ex := g.extraction(s)
		if len(ex.Entities) > maxAnswerEntities || len(ex.Relations) > maxAnswerRelations {
			t.Fatalf("caps exceeded: %d entities, %d relations", len(ex.Entities), len(ex.Relations))
		}
		names := map[string]bool{}
		for _, e := range ex.Entities {
			if names[e.Name] {
				t.Fatalf("%q twice", e.Name)
			}
			names[e.Name] = true
		}
		for _, r := range ex.Relations {
			if !names[r.Source] || !names[r.Target] {
				t.Fatalf("relation %+v names an entity not returned", r)
			}
		}
		_ = g.reflexion(s)
		if c := community(s); c.Name == "" || c.Summary == "" {
			t.Fatalf("empty community answer %+v", c)
		}
	})
}

func FuzzParseGazetteer(f *testing.F) {
	f.Add([]byte("kind: memory-extraction\nname: g\nentities: [{name: A, type: Other, summary: s, aliases: [b]}, {name: C, type: Metric, summary: s}]\nrelations: [{source: A, target: c, type: X_Y, fact: f}]"))
	f.Add([]byte("kind: memory-extraction\nname: g\nentities: [{name: A, type: Robot, summary: ''}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGazetteer("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// An accepted gazetteer answers any text within the caps, with
		// relations only among the entities it returns.
		for _, text := range []string{string(data), "A and C"} {
			ex := g.extraction(text)
			names := map[string]bool{}
			for _, e := range ex.Entities {
				names[e.Name] = true
			}
			for _, r := range ex.Relations {
				if !names[r.Source] || !names[r.Target] {
					t.Fatalf("relation %+v names an entity not returned", r)
				}
			}
		}
	})
}

func FuzzCheckStrict(f *testing.F) {
	f.Add(`{"type":"object","additionalProperties":false,"required":["a"],"properties":{"a":{"type":"array","items":{"type":"object","additionalProperties":false,"required":[],"properties":{}}}}}`)
	f.Add(`{"type":"object","properties":{"a":{"anyOf":[{"type":"object","properties":{"b":{}}}]}},"$defs":{"x":{"type":"object"}}}`)
	f.Fuzz(func(t *testing.T, schema string) {
		var v any
		if json.Unmarshal([]byte(schema), &v) != nil {
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		msg := checkStrict(m, nil, 0)
		if msg != "" && !strings.HasPrefix(msg, "In context=") {
			t.Fatalf("message %q", msg)
		}
	})
}
