package scripted

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScenarioErrorsNameFileAndField(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"bad name":        {"name: Bad Name\nmatch: {exact: [hi]}\nturns: [{text: x}]", "name:"},
		"no match":        {"name: a\nturns: [{text: x}]", "match: needs exact, contains or regex"},
		"bad regex":       {"name: a\nmatch: {regex: '('}\nturns: [{text: x}]", "match.regex:"},
		"no turns":        {"name: a\nmatch: {exact: [hi]}", "turns: at least one turn"},
		"empty turn":      {"name: a\nmatch: {exact: [hi]}\nturns: [{}]", "turns[0]: needs text or tool_calls"},
		"bad template":    {"name: a\nmatch: {exact: [hi]}\nturns: [{text: '{{ .Nope'}]", "turns[0].text"},
		"unknown func":    {"name: a\nmatch: {exact: [hi]}\nturns: [{text: '{{ nosuch 1 }}'}]", "turns[0].text"},
		"last has calls":  {"name: a\nmatch: {exact: [hi]}\nturns: [{tool_calls: [{name: glob}]}]", "turns[0]: the last turn"},
		"final in middle": {"name: a\nmatch: {exact: [hi]}\nturns: [{text: x}, {text: y}]", "turns[0]: a final answer"},
		"bad tool name":   {"name: a\nmatch: {exact: [hi]}\nturns: [{tool_calls: [{name: 'no spaces'}]}, {text: y}]", "turns[0].tool_calls[0].name"},
		"args and raw":    {"name: a\nmatch: {exact: [hi]}\nturns: [{tool_calls: [{name: g, arguments: {a: 1}, raw_arguments: '{'}]}, {text: y}]", "turns[0].tool_calls[0]: give arguments or raw_arguments"},
		"args not map":    {"name: a\nmatch: {exact: [hi]}\nturns: [{tool_calls: [{name: g, arguments: [1, 2]}]}, {text: y}]", "turns[0].tool_calls[0].arguments"},
		"unknown field":   {"name: a\nmatch: {exact: [hi]}\nturns: [{text: x, colour: red}]", "field colour not found"},
		"nested branch":   {"name: a\nmatch: {exact: [hi]}\nturns: [{text: x, if_tool_error: {text: y, if_tool_error: {text: z}}}]", "turns[0].if_tool_error.if_tool_error"},
		"bad error regex": {"name: a\nmatch: {exact: [hi]}\ntool_error_pattern: '['\nturns: [{text: x}]", "tool_error_pattern:"},
		"two documents":   {"name: a\nmatch: {exact: [hi]}\nturns: [{text: x}]\n---\nname: b", "more than one document"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseScenario("dir/s.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "dir/s.yaml") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
}

func TestParseScenarioJSONAndArguments(t *testing.T) {
	s, err := parseScenario("s.json", []byte(`{"name": "j", "match": {"contains": ["Revenue", "region"]},
		"turns": [{"tool_calls": [{"name": "sql_query", "arguments": {"query": "SELECT 1", "max_rows": 5}}, {"name": "glob", "raw_arguments": "{bad"}]},
		          {"text": "done"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := s.turns[0].toolCalls
	if calls[0].arguments != `{"max_rows":5,"query":"SELECT 1"}` || calls[1].arguments != "{bad" {
		t.Errorf("arguments %+v", calls)
	}
	if s.contains[0] != "revenue" || s.Turns() != 2 {
		t.Errorf("contains %v turns %d", s.contains, s.Turns())
	}
}

func TestLoadDirRejectsDuplicatesAndReportsAll(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: same\nmatch: {exact: [a]}\nturns: [{text: x}]")
	write("b.yml", "name: same\nmatch: {exact: [b]}\nturns: [{text: x}]")
	write("c.json", `{"name": "c"}`)
	write("README.md", "not a scenario")
	_, err := loadDir(dir)
	if err == nil || !strings.Contains(err.Error(), `"same" is already used`) || !strings.Contains(err.Error(), "c.json: match") {
		t.Fatalf("err = %v", err)
	}
	if _, err := loadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing dir accepted")
	}
}

func TestShippedScenariosLoad(t *testing.T) {
	scenarios, err := loadDir("../../examples/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range scenarios {
		names[s.Name] = true
		if s.Example == "" {
			t.Errorf("%s: no example", s.Name)
		}
	}
	for _, want := range []string{"revenue-by-category", "data-quality-check", "sales-growth-by-region", "sales-deep-dive", "avg-order-value-recovery", "tool-error-handling"} {
		if !names[want] {
			t.Errorf("scenario %s not shipped", want)
		}
	}
}

func FuzzParseScenario(f *testing.F) {
	for _, name := range []string{"revenue-by-category.yaml", "data-quality-check.yaml", "avg-order-value-recovery.yaml", "tool-error-handling.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../examples/scenarios", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"name":"j","match":{"regex":"x"},"turns":[{"text":"{{ .LastToolResult | firstRow | cell 0 }}"}]}`))
	f.Add([]byte("name: a\nmatch: {exact: [hi]}\nturns: [{text: x, if_tool_error: {text: y}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseScenario("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if s.Turns() == 0 || !namePattern.MatchString(s.Name) {
			t.Fatalf("invalid scenario accepted: %+v", s)
		}
		// Every accepted scenario plays: each turn renders without panicking.
		for i := range s.turns {
			c := &conversation{anchor: 0, userRequest: "q", round: 1, assistantTurns: i,
				lastResults: []ToolResult{{ID: "c", Name: "sql_query", Content: "Operation failed.\n"}}}
			c.allResults = c.lastResults
			r := playTurn(s, c)
			if r.label != s.Name {
				t.Fatalf("turn %d label %q", i, r.label)
			}
		}
	})
}
