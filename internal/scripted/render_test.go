package scripted

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTableShapes(t *testing.T) {
	cases := map[string]struct {
		in     string
		header []string
		first  []string
		rows   int
	}{
		"json objects keep key order": {`[{"category":"Hardware","revenue":125000.5,"orders":812},{"category":"Software","revenue":90000,"orders":400}]`,
			[]string{"category", "revenue", "orders"}, []string{"Hardware", "125000.5", "812"}, 2},
		"json columns and rows": {`{"columns":["category","revenue"],"rows":[["Services",10.25]],"row_count":1}`,
			[]string{"category", "revenue"}, []string{"Services", "10.25"}, 1},
		"json rows of objects under data": {`{"data":[{"b":1,"a":2}]}`, []string{"b", "a"}, []string{"1", "2"}, 1},
		"markdown with caption": {"3 rows\n\n| category | revenue |\n|---|---:|\n| Hardware | 125000.50 |\n| Software | 90000.00 |\n\n(query took 3 ms)",
			[]string{"category", "revenue"}, []string{"Hardware", "125000.50"}, 2},
		"csv with caption": {"Query returned 2 rows:\ncategory,revenue,orders\nHardware,125000.50,812\n\"Soft, ware\",9,1",
			[]string{"category", "revenue", "orders"}, []string{"Hardware", "125000.50", "812"}, 2},
		"toolrunner sql_query": {"| category | note |\n|---|---|\n| Hard\\|ware | a |\n| Software |  |\n\n(2 rows)",
			[]string{"category", "note"}, []string{"Hard|ware", "a"}, 2},
		"tsv":   {"category\trevenue\nHardware\t1\n", []string{"category", "revenue"}, []string{"Hardware", "1"}, 1},
		"prose": {"No rows matched.", nil, nil, 0},
		"empty": {"", nil, nil, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tb := parseTable(tc.in)
			if !slices.Equal(tb.Header, tc.header) || len(tb.Rows) != tc.rows {
				t.Fatalf("header %q rows %d (%q)", tb.Header, len(tb.Rows), tb.Rows)
			}
			if !slices.Equal(firstRow(tc.in), tc.first) {
				t.Errorf("first row %q, want %q", firstRow(tc.in), tc.first)
			}
		})
	}
	if got := column("revenue", "category,revenue\nHardware,12.5"); got != "12.5" {
		t.Errorf("column = %q", got)
	}
}

func TestTemplateFuncs(t *testing.T) {
	doc := `{"rows":[{"name":"a","tags":["x","y"]}],"n":3}`
	for path, want := range map[string]string{"$.n": "3", "$.rows[0].name": "a", ".rows[0].tags[1]": "y", "$.rows[0].tags": `["x","y"]`, "$.rows[5]": "", "$.nope.x": "", "$[": ""} {
		if got := jsonPath(path, doc); got != want {
			t.Errorf("jsonPath(%q) = %q, want %q", path, got, want)
		}
	}
	if truncate(3, "héllo") != "hél…" || truncate(10, "hi") != "hi" {
		t.Error("truncate")
	}
	if line(2, "a\r\nb\nc") != "b" || line(9, "a") != "" {
		t.Error("line")
	}
	if g, _ := group(`no such column: (\w+)`, 1, "Error: no such column: order_total"); g != "order_total" {
		t.Errorf("group = %q", g)
	}
	if _, err := find("(", "x"); err == nil {
		t.Error("bad pattern accepted")
	}
	if cell(5, []string{"a"}) != "" || cell(0, nil) != "" {
		t.Error("cell out of range")
	}
	tmpl, err := parseTemplate("t", `{{ .LastToolResult | firstRow | cell 1 }} / {{ index .ToolResults 9 }}`)
	if err != nil {
		t.Fatal(err)
	}
	out := render(tmpl, &TurnData{LastToolResult: "a,b\n1,2"})
	if !strings.HasPrefix(out, "2 / ") || !strings.Contains(out, "[scripted model: template t failed:") {
		t.Errorf("render = %q", out)
	}
	big, _ := parseTemplate("big", `{{ range .AllToolResults }}{{ .Content }}{{ end }}`)
	huge := strings.Repeat("x", maxRenderedBytes/2+1)
	if out := render(big, &TurnData{AllToolResults: []ToolResult{{Content: huge}, {Content: huge}}}); len(out) > maxRenderedBytes+200 {
		t.Errorf("render not bounded: %d bytes", len(out))
	}
}

func TestSplitKeepsCharacters(t *testing.T) {
	s := "héllo wörld, 你好"
	pieces := split(s, 4)
	if strings.Join(pieces, "") != s {
		t.Fatalf("pieces %q", pieces)
	}
	for _, p := range pieces {
		if len(p) > 4 || !utf8Valid(p) {
			t.Errorf("piece %q", p)
		}
	}
	if len(split("", 4)) != 0 || len(split("你", 1)) != 1 {
		t.Error("edge cases")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
