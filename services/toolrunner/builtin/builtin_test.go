package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/artifact"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// env is a workspace inside a parent directory that holds a secret the
// tools must never reach.
type env struct {
	t      *testing.T
	dir    string
	root   *os.Root
	tools  map[string]tool.Tool
	store  *artifact.Store
	secret string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	parent := t.TempDir()
	secret := filepath.Join(parent, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "ws")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	store, err := artifact.Open(artifact.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &env{t: t, dir: dir, root: root, tools: map[string]tool.Tool{}, store: store, secret: secret}
	// The query budget is the default's: tests of the budget itself make
	// their own tools, and the others must not fail on a busy machine
	// (a 1,000-column import takes seconds under the race detector).
	for _, tl := range Tools(Options{Artifacts: store, QueryTimeout: DefaultQueryTimeout}) {
		e.tools[tl.Spec().Name] = tl
	}
	return e
}

func (e *env) write(name, content string) {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
		e.t.Fatal(err)
	}
}

// call runs a tool after validating args against its schema, as the
// pipeline does.
func (e *env) call(name string, args map[string]any) (tool.Document, *tool.Error) {
	e.t.Helper()
	tl := e.tools[name]
	if err := validateArgs(tl.Spec(), args); err != nil {
		e.t.Fatalf("%s args %v invalid: %v", name, args, err)
	}
	res, err := tl.Execute(context.Background(), tool.Call{ToolCallID: "call_1", Tenant: "acme", ConversationID: "c1", Args: args, Workspace: e.root})
	if err != nil {
		return tool.Document{}, tool.Classify(err)
	}
	doc, ok := res.Data.(tool.Document)
	if !ok {
		e.t.Fatalf("%s returned %T", name, res.Data)
	}
	return doc, nil
}

func (e *env) mustCall(name string, args map[string]any) tool.Document {
	e.t.Helper()
	doc, err := e.call(name, args)
	if err != nil {
		e.t.Fatalf("%s(%v): %s %s: %s", name, args, err.Type, err.Code, err.Message)
	}
	return doc
}

func (e *env) wantErr(name string, args map[string]any, typ baagentv1.ToolErrorType, code string) *tool.Error {
	e.t.Helper()
	_, err := e.call(name, args)
	if err == nil {
		e.t.Fatalf("%s(%v) succeeded, want %s", name, args, code)
	}
	if err.Type != typ || err.Code != code {
		e.t.Fatalf("%s(%v) = %s %s (%s), want %s %s", name, args, err.Type, err.Code, err.Message, typ, code)
	}
	if strings.Contains(err.Message, e.dir) {
		e.t.Errorf("error message leaks the workspace path: %s", err.Message)
	}
	return err
}

func validateArgs(s tool.Spec, args map[string]any) error {
	var schema jsonschema.Schema
	if err := json.Unmarshal(s.Parameters, &schema); err != nil {
		return err
	}
	r, err := schema.Resolve(nil)
	if err != nil {
		return err
	}
	return r.Validate(args)
}

func TestSpecs(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	want := []string{"artifact_read", "file_edit", "file_read", "file_write", "glob", "grep", "sql_query"}
	for _, n := range want {
		tl, ok := e.tools[n]
		if !ok {
			t.Fatalf("missing tool %s", n)
		}
		s := tl.Spec()
		if s.Name != n || s.Version != Version || s.Description == "" || s.Source != Source {
			t.Errorf("spec %+v", s)
		}
		var schema jsonschema.Schema
		if err := json.Unmarshal(s.Parameters, &schema); err != nil {
			t.Fatalf("%s schema: %v", n, err)
		}
		if _, err := schema.Resolve(nil); err != nil {
			t.Fatalf("%s schema does not resolve: %v", n, err)
		}
		if err := validateArgs(s, map[string]any{"unknown_argument": 1}); err == nil {
			t.Errorf("%s accepts unknown arguments", n)
		}
	}
	for n, ro := range map[string]bool{"file_read": true, "file_write": false, "file_edit": false, "sql_query": true} {
		if e.tools[n].Spec().ReadOnly != ro {
			t.Errorf("%s ReadOnly = %v", n, !ro)
		}
	}
	if len(Tools(Options{})) != len(want)-1 {
		t.Error("artifact_read offered without a store")
	}
}

func TestPathTraversalRefused(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	if err := os.Symlink(e.secret, filepath.Join(e.dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(e.secret), filepath.Join(e.dir, "updir")); err != nil {
		t.Fatal(err)
	}
	deny := baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED
	for _, p := range []string{"../secret.txt", "a/../../secret.txt", e.secret, "/etc/passwd", `..\secret.txt`, "link.txt", "updir/secret.txt"} {
		e.wantErr("file_read", map[string]any{"path": p}, deny, "PATH_OUTSIDE_WORKSPACE")
		e.wantErr("file_write", map[string]any{"path": p, "content": "x"}, deny, "PATH_OUTSIDE_WORKSPACE")
		e.wantErr("file_edit", map[string]any{"path": p, "old_string": "TOP", "new_string": "x"}, deny, "PATH_OUTSIDE_WORKSPACE")
	}
	e.wantErr("grep", map[string]any{"pattern": "SECRET", "path": "../"}, deny, "PATH_OUTSIDE_WORKSPACE")
	e.wantErr("grep", map[string]any{"pattern": "SECRET", "path": "updir"}, deny, "PATH_OUTSIDE_WORKSPACE")
	e.wantErr("glob", map[string]any{"pattern": "../*"}, deny, "PATH_OUTSIDE_WORKSPACE")
	if b, _ := os.ReadFile(e.secret); string(b) != "TOP SECRET\n" {
		t.Fatal("the secret outside the workspace changed")
	}
	// grep over the whole workspace does not follow the symlinks out.
	if doc := e.mustCall("grep", map[string]any{"pattern": "SECRET"}); strings.Contains(doc.Text, "TOP") {
		t.Fatalf("grep followed a symlink out: %s", doc.Text)
	}
	// A symlink inside the workspace is fine.
	e.write("data/real.txt", "inside\n")
	if err := os.Symlink("data/real.txt", filepath.Join(e.dir, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	if doc := e.mustCall("file_read", map[string]any{"path": "alias.txt"}); !strings.Contains(doc.Text, "inside") {
		t.Fatalf("in-workspace symlink: %q", doc.Text)
	}
}

func TestFileRead(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	var b strings.Builder
	for i := 1; i <= 2500; i++ {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString("\n")
	}
	e.write("big.txt", b.String())
	doc := e.mustCall("file_read", map[string]any{"path": "big.txt"})
	if !strings.HasSuffix(doc.Text, "(File has more lines. Use 'offset' parameter to read beyond line 2000)") || !strings.HasPrefix(doc.Text, "     1\tline x\n") {
		t.Fatalf("first page ends %q", doc.Text[len(doc.Text)-80:])
	}
	doc = e.mustCall("file_read", map[string]any{"path": "big.txt", "offset": 2000})
	if !strings.HasPrefix(doc.Text, "  2001\t") || !strings.HasSuffix(doc.Text, "(End of file - total 2500 lines)") {
		t.Fatalf("second page: %q … %q", doc.Text[:10], doc.Text[len(doc.Text)-40:])
	}
	if doc.Brief != "Read lines 2001-2500 of big.txt (2500 lines in total)" {
		t.Errorf("brief = %q", doc.Brief)
	}
	// Byte budget: 2000 lines of 100 characters exceed 50 KiB.
	e.write("wide.txt", strings.Repeat(strings.Repeat("é", 100)+"\n", 2000))
	doc = e.mustCall("file_read", map[string]any{"path": "wide.txt"})
	if !strings.Contains(doc.Text, "(Output truncated at 51200 bytes. Use 'offset' parameter to read beyond line ") || len(doc.Text) > 51200+200 {
		t.Fatalf("wide file: %d bytes, ends %q", len(doc.Text), doc.Text[len(doc.Text)-100:])
	}
	e.write("bin.dat", "abc\x00def")
	e.wantErr("file_read", map[string]any{"path": "bin.dat"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "BINARY_FILE")
	e.wantErr("file_read", map[string]any{"path": "missing.txt"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, "FILE_NOT_FOUND")
	e.wantErr("file_read", map[string]any{"path": "."}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "IS_A_DIRECTORY")
	e.write("empty.txt", "")
	if doc := e.mustCall("file_read", map[string]any{"path": "empty.txt"}); doc.Brief != "empty.txt is empty" {
		t.Errorf("empty brief %q", doc.Brief)
	}
}

func TestFileWriteAndEdit(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	doc := e.mustCall("file_write", map[string]any{"path": "out/report.md", "content": "a\nb\nb\n"})
	if !strings.HasPrefix(doc.Text, "Created out/report.md (6 bytes, 3 lines)") {
		t.Errorf("write: %q", doc.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, "out/report.md")); string(b) != "a\nb\nb\n" {
		t.Fatalf("content %q", b)
	}
	vErr := baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR
	e.wantErr("file_edit", map[string]any{"path": "out/report.md", "old_string": "zzz", "new_string": "y"}, vErr, "MATCH_NOT_FOUND")
	err := e.wantErr("file_edit", map[string]any{"path": "out/report.md", "old_string": "b", "new_string": "c"}, vErr, "AMBIGUOUS_MATCH")
	if !strings.Contains(err.Message, "2 times") {
		t.Errorf("ambiguous message: %s", err.Message)
	}
	e.mustCall("file_edit", map[string]any{"path": "out/report.md", "old_string": "a\n", "new_string": "A\n"})
	e.mustCall("file_edit", map[string]any{"path": "out/report.md", "old_string": "b", "new_string": "c", "replace_all": true})
	if b, _ := os.ReadFile(filepath.Join(e.dir, "out/report.md")); string(b) != "A\nc\nc\n" {
		t.Fatalf("after edits %q", b)
	}
	e.write("crlf.txt", "one\r\ntwo\r\n")
	e.mustCall("file_edit", map[string]any{"path": "crlf.txt", "old_string": "one\ntwo", "new_string": "uno\ndos"})
	if b, _ := os.ReadFile(filepath.Join(e.dir, "crlf.txt")); string(b) != "uno\r\ndos\r\n" {
		t.Fatalf("CRLF not kept: %q", b)
	}
	e.wantErr("file_edit", map[string]any{"path": "crlf.txt", "old_string": "uno", "new_string": "uno"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "NO_CHANGE")
	e.wantErr("file_write", map[string]any{"path": "out", "content": "x"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "IS_A_DIRECTORY")
}

func TestGlobAndGrep(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	e.write("orders.csv", "id,region\n1,North\n2,south\n3,East\n")
	e.write("sub/deep/notes.csv", "north pole\n")
	e.write("sub/readme.md", "see orders\n")
	e.write(".git/config", "North\n")
	e.write("bin/blob.csv", "North\x00\n")
	doc := e.mustCall("glob", map[string]any{"pattern": "**/*.csv"})
	if doc.Text != "bin/blob.csv (7 bytes)\norders.csv (33 bytes)\nsub/deep/notes.csv (11 bytes)" {
		t.Fatalf("glob **/*.csv:\n%s", doc.Text)
	}
	if doc := e.mustCall("glob", map[string]any{"pattern": "*.csv"}); doc.Text != "orders.csv (33 bytes)" || doc.Brief != "Found 1 file matching *.csv" {
		t.Fatalf("glob *.csv: %q / %q", doc.Text, doc.Brief)
	}
	if doc := e.mustCall("glob", map[string]any{"pattern": "sub/[!r]*/*"}); doc.Text != "sub/deep/notes.csv (11 bytes)" {
		t.Fatalf("glob [!r]: %q", doc.Text)
	}
	doc = e.mustCall("grep", map[string]any{"pattern": "north", "case_insensitive": true})
	if doc.Text != "orders.csv:2:1,North\nsub/deep/notes.csv:1:north pole" || doc.Brief != "Found 2 matches in 2 files" {
		t.Fatalf("grep -i (no .git, no binary):\n%s\n%s", doc.Text, doc.Brief)
	}
	doc = e.mustCall("grep", map[string]any{"pattern": "^2,", "path": "orders.csv", "context_lines": 1})
	if doc.Text != "orders.csv-2-1,North\norders.csv:3:2,south\norders.csv-4-3,East" {
		t.Fatalf("grep context:\n%s", doc.Text)
	}
	doc = e.mustCall("grep", map[string]any{"pattern": "orders", "glob": "*.md"})
	if doc.Text != "sub/readme.md:1:see orders" {
		t.Fatalf("grep glob:\n%s", doc.Text)
	}
	e.wantErr("grep", map[string]any{"pattern": "(unclosed"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "INVALID_REGEX")
}

func TestSQLQuery(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	e.write("orders.csv", "order_id,product_id,quantity,unit_price,note\n1,10,2,9.5,\n2,11,1,100,\"a, b\"\n3,10,3,9.5,x\n")
	e.write("Products.csv", "product_id,name,category\n10,Widget,Hardware\n11,Suite,Software\n")
	doc := e.mustCall("sql_query", map[string]any{"query": `SELECT p.category, SUM(o.quantity * o.unit_price) AS revenue
		FROM orders o JOIN products p USING (product_id) GROUP BY p.category ORDER BY revenue DESC`})
	want := "| category | revenue |\n|---|---|\n| Software | 100 |\n| Hardware | 47.5 |\n\n(2 rows)"
	if doc.Text != want {
		t.Fatalf("got\n%s\nwant\n%s", doc.Text, want)
	}
	if doc.Brief != "Query returned 2 rows (columns: category, revenue)" {
		t.Errorf("brief %q", doc.Brief)
	}
	// Types were inferred: quantity is INTEGER, note TEXT with NULLs.
	doc = e.mustCall("sql_query", map[string]any{"query": "SELECT typeof(quantity), typeof(unit_price), typeof(note) FROM orders WHERE order_id = 1"})
	if !strings.Contains(doc.Text, "| integer | real | null |") {
		t.Fatalf("types:\n%s", doc.Text)
	}
	doc = e.mustCall("sql_query", map[string]any{"query": "SELECT order_id FROM orders ORDER BY order_id", "max_rows": 2})
	if !strings.Contains(doc.Text, "Stopped at max_rows = 2") || strings.Contains(doc.Text, "| 3 |") {
		t.Fatalf("row limit:\n%s", doc.Text)
	}
	deny := baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED
	for _, q := range []string{
		"DELETE FROM orders",
		"INSERT INTO orders (order_id) VALUES (9)",
		"DROP TABLE orders",
		"ATTACH DATABASE '" + e.secret + "' AS s",
		"PRAGMA table_info(orders)",
		"CREATE TABLE t (x)",
		"SELECT load_extension('x')",
	} {
		e.wantErr("sql_query", map[string]any{"query": q}, deny, "READ_ONLY")
	}
	e.wantErr("sql_query", map[string]any{"query": "SELEC nonsense"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "SQL_ERROR")
	e.wantErr("sql_query", map[string]any{"query": "SELECT * FROM nowhere"}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "SQL_ERROR")
	if _, err := os.Stat(filepath.Join(e.dir, "orders.csv")); err != nil {
		t.Fatal(err)
	}
}

func TestSQLQueryTimeout(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	tl := newSQLQuery(Options{QueryTimeout: 50 * time.Millisecond}.withDefaults())
	_, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{
		"query": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
	}})
	var te *tool.Error
	if !errors.As(err, &te) || te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT || te.Code != "QUERY_TIMEOUT" {
		t.Fatalf("endless query: %v", err)
	}
}

func TestArtifactRead(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	m, err := e.store.Put(artifact.Owner{Tenant: "acme", ConversationID: "c1"}, "", "", "", []byte("alpha\nbeta\ngamma\n"))
	if err != nil {
		t.Fatal(err)
	}
	doc := e.mustCall("artifact_read", map[string]any{"artifact_id": m.ID, "offset": 1, "limit": 1})
	if doc.Text != "     2\tbeta\n\n(Artifact has more lines. Use 'offset' parameter to read beyond line 2)" {
		t.Fatalf("page: %q", doc.Text)
	}
	doc = e.mustCall("artifact_read", map[string]any{"artifact_id": m.ID, "pattern": "^g"})
	if doc.Text != "     3\tgamma\n\n(End of artifact - total 3 lines)" {
		t.Fatalf("pattern: %q", doc.Text)
	}
	other, _ := e.store.Put(artifact.Owner{Tenant: "acme", ConversationID: "c2"}, "", "", "", []byte("theirs"))
	e.wantErr("artifact_read", map[string]any{"artifact_id": other.ID}, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, "ARTIFACT_NOT_FOUND")
	// Ids with separators never get past the schema, and the tool refuses
	// them too when called directly.
	for _, id := range []string{"artifact_../../x", "artifact_ab/cd", "../artifact_ab"} {
		if err := validateArgs(e.tools["artifact_read"].Spec(), map[string]any{"artifact_id": id}); err == nil {
			t.Errorf("schema accepts %q", id)
		}
		_, err := e.tools["artifact_read"].Execute(context.Background(), tool.Call{Args: map[string]any{"artifact_id": id}})
		if te := tool.Classify(err); te == nil || te.Code != "INVALID_ARTIFACT_ID" {
			t.Errorf("id %q: %v", id, err)
		}
	}
}

func TestMentionedTables(t *testing.T) {
	t.Parallel()

	tables := map[string]string{"orders": "orders.csv", "order items": "order items.csv", "products": "Products.csv"}
	got := mentionedTables(`select * from ORDERS join "order items" on 1 -- products`, tables)
	if strings.Join(got, ",") != "orders,order items,products" {
		t.Errorf("got %q", got)
	}
	if got := mentionedTables(`select 'unterminated`, tables); len(got) != 0 {
		t.Errorf("got %q", got)
	}
}
