package scripted

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"
)

// maxRenderedBytes bounds the text one template produces.
const maxRenderedBytes = 1 << 20

// ToolResult is a tool message of the conversation, as templates see it.
type ToolResult struct {
	// ID is the tool_call_id; Name the tool, from the assistant call it answers.
	ID, Name string
	// Content is the observation.
	Content string
	// IsError reports whether Content matches the scenario's tool error pattern.
	IsError bool
}

// TurnData is what a turn's text and reasoning templates are executed with.
type TurnData struct {
	// UserRequest is the user message the scenario matched.
	UserRequest string
	// Scenario is the scenario name; Round the request's number in the
	// conversation (1-based); Turn the turn's number (1-based).
	Scenario string
	Round    int
	Turn     int
	// LastToolResult is the content of the latest tool message ("" if none).
	LastToolResult string
	// ToolResults answer the previous turn's tool calls, in call order.
	ToolResults []ToolResult
	// AllToolResults are every tool message since the matched request.
	AllToolResults []ToolResult
}

func parseTemplate(field, text string) (*template.Template, error) {
	if text == "" {
		return nil, nil
	}
	t, err := template.New(field).Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return t, nil
}

// render executes t; a failure is rendered into the text, labelled, rather
// than failing the request: the scripted model says what went wrong.
func render(t *template.Template, data *TurnData) string {
	if t == nil {
		return ""
	}
	var b boundedBuilder
	if err := t.Execute(&b, data); err != nil {
		return b.String() + fmt.Sprintf("\n[scripted model: template %s failed: %v]", t.Name(), err)
	}
	return b.String()
}

type boundedBuilder struct{ strings.Builder }

var errTooLong = errors.New("rendered text too long")

func (b *boundedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRenderedBytes {
		return 0, errTooLong
	}
	return b.Builder.Write(p)
}

// templateFuncs are the functions scenario templates may call. Each takes
// its subject last, so they chain in pipelines:
// {{ .LastToolResult | firstRow | cell 0 }}.
var templateFuncs = template.FuncMap{
	"truncate": truncate,
	"line":     line,
	"find":     find,
	"group":    group,
	"firstRow": firstRow,
	"rows":     tableRows,
	"cell":     cell,
	"column":   column,
	"jsonPath": jsonPath,
	"trim":     strings.TrimSpace,
	"lower":    strings.ToLower,
	"upper":    strings.ToUpper,
}

// truncate cuts s to n runes, adding "…" when it cut.
func truncate(n int, s string) string {
	if n < 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// line returns line n (1-based) of s, or "".
func line(n int, s string) string {
	lines := strings.Split(s, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimRight(lines[n-1], "\r")
}

// find returns the first match of pattern in s, or "".
func find(pattern, s string) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", err
	}
	return re.FindString(s), nil
}

// group returns capture group n of pattern's first match in s, or "".
func group(pattern string, n int, s string) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", err
	}
	m := re.FindStringSubmatch(s)
	if n < 0 || n >= len(m) {
		return "", nil
	}
	return m[n], nil
}

// Table is a tool result read as a table.
type Table struct {
	Header []string
	Rows   [][]string
}

// firstRow returns the first data row of a tabular tool result, or nil.
func firstRow(s string) []string {
	t := parseTable(s)
	if len(t.Rows) == 0 {
		return nil
	}
	return t.Rows[0]
}

// tableRows returns every data row of a tabular tool result.
func tableRows(s string) [][]string { return parseTable(s).Rows }

// cell returns cell i (0-based) of a row, or "".
func cell(i int, row []string) string {
	if i < 0 || i >= len(row) {
		return ""
	}
	return row[i]
}

// column returns the named column of the first data row, or "".
func column(name, s string) string {
	t := parseTable(s)
	if len(t.Rows) == 0 {
		return ""
	}
	for i, h := range t.Header {
		if strings.EqualFold(strings.TrimSpace(h), name) {
			return cell(i, t.Rows[0])
		}
	}
	return ""
}

// parseTable reads the common shapes of a query result: JSON (an array of
// objects or arrays, or an object holding one under "rows", "data" or
// "results", with "columns"), a Markdown pipe table, or CSV/TSV with a
// header line. Lines before the table (a caption such as "3 rows") are
// skipped. Anything else gives an empty table.
func parseTable(s string) Table {
	s = strings.TrimSpace(s)
	if s == "" {
		return Table{}
	}
	if t, ok := jsonTable(s); ok {
		return t
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "|") {
			return markdownTable(lines[i:])
		}
	}
	for i, l := range lines {
		for _, sep := range []rune{'\t', ','} {
			if strings.ContainsRune(l, sep) {
				return csvTable(strings.Join(lines[i:], "\n"), sep)
			}
		}
	}
	return Table{}
}

func jsonTable(s string) (Table, bool) {
	if s[0] != '[' && s[0] != '{' {
		return Table{}, false
	}
	var t Table
	var rows []json.RawMessage
	if s[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &obj) != nil {
			return Table{}, false
		}
		var cols []any
		if json.Unmarshal(obj["columns"], &cols) == nil {
			for _, c := range cols {
				t.Header = append(t.Header, scalar(c))
			}
		}
		found := false
		for _, k := range []string{"rows", "data", "results"} {
			if r, ok := obj[k]; ok && json.Unmarshal(r, &rows) == nil {
				found = true
				break
			}
		}
		if !found {
			return Table{}, false
		}
	} else if json.Unmarshal([]byte(s), &rows) != nil {
		return Table{}, false
	}
	for _, raw := range rows {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		switch row := v.(type) {
		case []any:
			var cells []string
			for _, c := range row {
				cells = append(cells, scalar(c))
			}
			t.Rows = append(t.Rows, cells)
		case map[string]any:
			// Object rows follow the header when there is one, otherwise the
			// key order of the first row as the JSON gave it.
			if t.Header == nil {
				t.Header = objectKeys(raw)
			}
			var cells []string
			for _, h := range t.Header {
				cells = append(cells, scalar(row[h]))
			}
			t.Rows = append(t.Rows, cells)
		default:
			t.Rows = append(t.Rows, []string{scalar(row)})
		}
	}
	return t, true
}

// objectKeys returns the top-level keys of a JSON object in document order
// (encoding/json maps lose the order).
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		k, ok := tok.(string)
		if !ok {
			return keys
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func markdownTable(lines []string) Table {
	var t Table
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := splitPipes(l)
		if isSeparator(cells) {
			continue
		}
		if t.Header == nil {
			t.Header = cells
			continue
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

// splitPipes splits a Markdown table line into trimmed cells; `\|` is a
// literal pipe inside a cell.
func splitPipes(l string) []string {
	l = strings.TrimPrefix(l, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			cur.WriteByte('|')
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(l[i])
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		cells = append(cells, rest)
	}
	return cells
}

func isSeparator(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" || c == "" {
			return false
		}
	}
	return true
}

func csvTable(s string, sep rune) Table {
	r := csv.NewReader(strings.NewReader(s))
	r.Comma = sep
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.TrimLeadingSpace = true
	var t Table
	for {
		rec, err := r.Read()
		if err != nil {
			break
		}
		if len(rec) < 2 {
			// A caption or footer line, not part of the table.
			if t.Header != nil {
				break
			}
			continue
		}
		if t.Header == nil {
			t.Header = rec
			continue
		}
		t.Rows = append(t.Rows, rec)
	}
	return t
}

// jsonPath extracts a value from JSON text with a small path syntax:
// `$.a.b[0].c` (the leading `$` optional). Objects and arrays come back as
// JSON, scalars as text, a missing path as "".
func jsonPath(path, s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return ""
	}
	p := strings.TrimPrefix(strings.TrimSpace(path), "$")
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v, p = obj[p[:end]], p[end:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return ""
			}
			i, err := strconv.Atoi(p[1:end])
			arr, ok := v.([]any)
			if err != nil || !ok || i < 0 || i >= len(arr) {
				return ""
			}
			v, p = arr[i], p[end+1:]
		default:
			return ""
		}
		if v == nil {
			return ""
		}
	}
	return scalar(v)
}
