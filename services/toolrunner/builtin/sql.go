package builtin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// maxQueryBytes bounds the SQL text.
const maxQueryBytes = 64 << 10

// maxLikePattern bounds a LIKE or GLOB pattern (SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
// 50,000 by default): matching costs up to the value's length times the
// pattern's, in one step that SQLite's interrupt cannot stop.
const maxLikePattern = 256

// sqlQuery is `sql_query {query, max_rows}`: a read-only SQLite query over
// the workspace's CSV files, each imported on first mention as a table named
// after the file (`orders.csv` → `orders`). Every call gets a fresh
// in-memory database, so there is nothing to go stale and nothing to write
// to; an authorizer admits only reads, so ATTACH (which could open any file
// on the host), PRAGMA and writes are refused.
//
// Budgets: QueryTimeout (the driver interrupts the query when its context
// ends; SQLite looks at the interrupt on every loop of the program),
// QueryMaxBytes per value and row (SQLITE_LIMIT_LENGTH), a page limit on
// the imported tables sized from their CSV files, QueryHeapLimit on all
// of SQLite's memory, and 16 × QueryMaxBytes of returned rows. Temporary
// tables (sorting, DISTINCT, window functions) stay in SQLite's default
// temporary files, so their memory is the page cache's few MiB, not their
// size.
type sqlQuery struct {
	opts Options
	// slots bounds the queries executing at once (MaxConcurrentQueries),
	// fairly among tenants.
	slots *fairSlots
}

func newSQLQuery(opts Options) sqlQuery {
	setHeapLimit(opts.QueryHeapLimit)
	return sqlQuery{opts: opts, slots: newFairSlots(opts.MaxConcurrentQueries, opts.MaxQueriesPerTenant)}
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
	release, err := t.slots.acquire(ctx, c.Tenant)
	if err != nil {
		return tool.Result{}, slotWaitError(ctx, "sql_query")
	}
	defer release()
	qctx, cancel := context.WithTimeout(ctx, t.opts.QueryTimeout)
	defer cancel()

	// The driver that brings linear-time trim, instr, replace and unhex
	// (sqlfuncs.go) for the LENGTH limit limitConn sets.
	driverName, err := sqlQueryDriver(t.opts.QueryMaxBytes)
	if err != nil {
		return tool.Result{}, failed("SQL_ERROR", "open database: %v", err)
	}
	db, err := sql.Open(driverName, ":memory:")
	if err != nil {
		return tool.Result{}, failed("SQL_ERROR", "open database: %v", err)
	}
	defer db.Close()
	conn, err := db.Conn(qctx)
	if err != nil {
		return tool.Result{}, t.queryError(ctx, qctx, err, "")
	}
	defer conn.Close()
	if err := limitConn(conn, t.opts.QueryMaxBytes); err != nil {
		return tool.Result{}, failed("SQL_ERROR", "%v", err)
	}

	tables, err := csvTables(c.Workspace)
	if err != nil {
		return tool.Result{}, fsError(".", err)
	}
	if mentioned := mentionedTables(query, tables); len(mentioned) > 0 {
		if err := t.limitPages(qctx, conn, c.Workspace, tables, mentioned); err != nil {
			return tool.Result{}, t.queryError(ctx, qctx, err, "")
		}
		for _, name := range mentioned {
			if err := importCSV(qctx, conn, c.Workspace, tables[name], name, t.opts.MaxCSVBytes); err != nil {
				var te *tool.Error
				if errors.As(err, &te) {
					return tool.Result{}, te
				}
				return tool.Result{}, t.queryError(ctx, qctx, err, tables[name])
			}
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

	rows, err := conn.QueryContext(qctx, query)
	if err != nil {
		return tool.Result{}, t.queryError(ctx, qctx, err, "")
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return tool.Result{}, t.queryError(ctx, qctx, err, "")
	}
	var out [][]string
	var stop string // why the rows stopped early
	size, maxSize := 0, 16*t.opts.QueryMaxBytes
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == maxRows {
			stop = fmt.Sprintf("Stopped at max_rows = %d; more rows exist. Aggregate, filter, or raise max_rows.", maxRows)
			break
		}
		if size > maxSize {
			stop = fmt.Sprintf("Stopped after %s of rows, sql_query's limit; more rows exist. Aggregate, filter, or select fewer columns.", mib(int64(maxSize)))
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return tool.Result{}, t.queryError(ctx, qctx, err, "")
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = formatValue(v)
			size += len(row[i])
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return tool.Result{}, t.queryError(ctx, qctx, err, "")
	}
	return tool.Result{Data: renderTable(cols, out, stop)}, nil
}

// limitConn sets the connection's limits: the largest string, blob or
// row, and the longest LIKE or GLOB pattern.
func limitConn(conn *sql.Conn, maxBytes int) error {
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, maxBytes); err != nil {
		return err
	}
	_, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, maxLikePattern)
	return err
}

// limitPages bounds the in-memory database to what the mentioned CSV
// files need: a table takes up to about 4.5 times its CSV's size (lines
// of one character, the worst case: each row costs SQLite some 9 bytes;
// ordinary files take 1.3 to 1.7 times), plus room for SQLite's own
// pages. Queries cannot write, so only the imports grow it.
func (t sqlQuery) limitPages(ctx context.Context, conn *sql.Conn, root *os.Root, tables map[string]string, mentioned []string) error {
	var total int64
	for _, name := range mentioned {
		if fi, err := root.Stat(tables[name]); err == nil {
			total += min(fi.Size(), t.opts.MaxCSVBytes)
		}
	}
	const pageSize = 4096 // SQLite's default
	pages := (6*total + 8<<20) / pageSize
	_, err := conn.ExecContext(ctx, "PRAGMA max_page_count = "+strconv.FormatInt(pages, 10))
	return err
}

// queryError classifies an error of the query or, when file is set, of
// importing file. ctx is the call's context, qctx the query's. Running
// out of the query's own time or memory budget is final (a retry would
// run out again); the call's deadline passing is a TIMEOUT the pipeline
// may retry with a longer one; anything else is a mistake in the SQL that
// the model can fix.
func (t sqlQuery) queryError(ctx, qctx context.Context, err error, file string) *tool.Error {
	if qctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if ctx.Err() != nil {
			return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, "QUERY_TIMEOUT",
				"the call's deadline passed before the query finished; aggregate or filter more, or add LIMIT")
		}
		return exhausted(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, "QUERY_TIMEOUT",
			"the query did not finish within sql_query's %s budget; narrow it: aggregate or filter more, add LIMIT, "+
				"and bound recursive CTEs (a retry of the same query would take as long)", t.opts.QueryTimeout)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		limit := mib(int64(t.opts.QueryMaxBytes))
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_TOOBIG:
			if file != "" {
				return exhausted(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "CSV_TOO_LARGE",
					"%s has a value or row larger than %s, sql_query's limit; it cannot be queried with sql_query", file, limit)
			}
			return exhausted(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, "QUERY_TOO_LARGE",
				"the query built a string, blob or row larger than %s, sql_query's limit; "+
					"return lengths, counts or other aggregates instead of large values, or select fewer columns", limit)
		case sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_FULL:
			return exhausted(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, "RESOURCE_LIMIT",
				"the query needed more memory or space than sql_query allows (%s for all queries at once); "+
					"aggregate or filter more, select fewer or smaller columns, or query fewer or smaller CSV files", mib(t.opts.QueryHeapLimit))
		}
	}
	msg := err.Error()
	if file != "" {
		msg = "import " + file + ": " + msg
	}
	if strings.Contains(msg, "LIKE or GLOB pattern too complex") {
		return invalid("QUERY_TOO_LARGE", "a LIKE or GLOB pattern is longer than %d bytes, sql_query's limit; use a shorter pattern "+
			"(instr() or = for a long literal)", maxLikePattern)
	}
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

// renderTable renders rows as a Markdown table; stop, when set, says why
// the rows stopped early.
func renderTable(cols []string, rows [][]string, stop string) tool.Document {
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
	if stop != "" {
		fmt.Fprintf(&b, "\n\n(%s)", stop)
		brief = fmt.Sprintf("Query returned more than %s (columns: %s)", n, strings.Join(cols, ", "))
	} else {
		fmt.Fprintf(&b, "\n\n(%s)", n)
	}
	return tool.Document{Text: b.String(), Brief: brief}
}
