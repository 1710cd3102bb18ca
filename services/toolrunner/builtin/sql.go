package builtin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// maxQueryBytes bounds the SQL text.
const maxQueryBytes = 64 << 10

// sqlQuery is `sql_query {query, max_rows}`: a read-only SQLite query over
// the workspace's CSV files, each imported on first mention as a table named
// after the file (`orders.csv` → `orders`). Every call gets a fresh
// in-memory database, so there is nothing to go stale and nothing to write
// to; an authorizer admits only reads, so ATTACH (which could open any file
// on the host), PRAGMA and writes are refused.
type sqlQuery struct {
	opts Options
	// slots holds one token per query executing (MaxConcurrentQueries).
	slots chan struct{}
}

func newSQLQuery(opts Options) sqlQuery {
	return sqlQuery{opts: opts, slots: make(chan struct{}, opts.MaxConcurrentQueries)}
}

func (sqlQuery) Spec() tool.Spec {
	return spec("sql_query",
		"Run one read-only SQLite query (SELECT or WITH) over the workspace's CSV files: each CSV in the workspace "+
			"root is a table named after the file (orders.csv → orders), with INTEGER, REAL or TEXT columns inferred "+
			"from its values. Returns the rows as a table, at most max_rows of them.",
		`{"type":"object","additionalProperties":false,"required":["query"],"properties":{
			"query":{"type":"string","minLength":1,"maxLength":65536,"description":"SQLite SELECT statement"},
			"max_rows":{"type":"integer","minimum":1,"maximum":10000,"description":"Most rows to return (default 200)"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (t sqlQuery) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	query := strings.TrimSpace(argString(c.Args, "query"))
	if query == "" {
		return tool.Result{}, invalid("MISSING_QUERY", "query is required")
	}
	if len(query) > maxQueryBytes {
		return tool.Result{}, invalid("QUERY_TOO_LONG", "query is %d bytes; the limit is %d", len(query), maxQueryBytes)
	}
	maxRows := argInt(c.Args, "max_rows", DefaultMaxRows, 1, MaxRowsCap)
	// Wait for a slot within the call's deadline; QueryTimeout bounds the
	// execution only.
	select {
	case t.slots <- struct{}{}:
		defer func() { <-t.slots }()
	case <-ctx.Done():
		return tool.Result{}, t.queryError(ctx, ctx.Err())
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.QueryTimeout)
	defer cancel()

	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return tool.Result{}, failed("SQL_ERROR", "open database: %v", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return tool.Result{}, t.queryError(ctx, err)
	}
	defer conn.Close()

	tables, err := csvTables(c.Workspace)
	if err != nil {
		return tool.Result{}, fsError(".", err)
	}
	for _, name := range mentionedTables(query, tables) {
		if err := importCSV(ctx, conn, c.Workspace, tables[name], name, t.opts.MaxCSVBytes); err != nil {
			var te *tool.Error
			if errors.As(err, &te) {
				return tool.Result{}, te
			}
			return tool.Result{}, t.queryError(ctx, fmt.Errorf("import %s: %w", tables[name], err))
		}
	}
	if err := conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the SQLite driver has no authorizer")
		}
		return r.RegisterAuthorizer(readOnlyAuthorizer)
	}); err != nil {
		return tool.Result{}, failed("SQL_ERROR", "%v", err)
	}

	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return tool.Result{}, t.queryError(ctx, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return tool.Result{}, t.queryError(ctx, err)
	}
	var out [][]string
	more := false
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == maxRows {
			more = true
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return tool.Result{}, t.queryError(ctx, err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = formatValue(v)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return tool.Result{}, t.queryError(ctx, err)
	}
	return tool.Result{Data: renderTable(cols, out, more, maxRows)}, nil
}

// queryError classifies a database error: the query timeout is TIMEOUT
// (retried with a longer timeout), anything else a mistake in the SQL that
// the model can fix.
func (t sqlQuery) queryError(ctx context.Context, err error) *tool.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, "QUERY_TIMEOUT",
			"the query did not finish in time; aggregate or filter more, or add LIMIT")
	}
	msg := err.Error()
	if strings.Contains(msg, "not authorized") {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "READ_ONLY",
			"sql_query runs read-only queries only (SELECT or WITH); writes, ATTACH and PRAGMA are refused")
	}
	return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "SQL_ERROR", "%s", msg)
}

// readOnlyAuthorizer admits reading statements and nothing else.
func readOnlyAuthorizer(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	}
	return sqlite.AuthorizerDeny
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// renderTable renders rows as a Markdown table.
func renderTable(cols []string, rows [][]string, more bool, maxRows int) tool.Document {
	var b strings.Builder
	cell := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		s = strings.ReplaceAll(s, "\r", " ")
		return strings.ReplaceAll(s, "\n", " ")
	}
	b.WriteString("|")
	for _, c := range cols {
		b.WriteString(" " + cell(c) + " |")
	}
	b.WriteString("\n|")
	for range cols {
		b.WriteString("---|")
	}
	for _, r := range rows {
		b.WriteString("\n|")
		for _, v := range r {
			b.WriteString(" " + cell(v) + " |")
		}
	}
	n := plural(len(rows), "row")
	brief := fmt.Sprintf("Query returned %s (columns: %s)", n, strings.Join(cols, ", "))
	if more {
		fmt.Fprintf(&b, "\n\n(Stopped at max_rows = %d; more rows exist. Aggregate, filter, or raise max_rows.)", maxRows)
		brief = fmt.Sprintf("Query returned more than %d rows (columns: %s)", maxRows, strings.Join(cols, ", "))
	} else {
		fmt.Fprintf(&b, "\n\n(%s)", n)
	}
	return tool.Document{Text: b.String(), Brief: brief}
}
