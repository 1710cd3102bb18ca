package builtin

import (
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// maxTablesPerQuery bounds the CSV files one query imports.
const maxTablesPerQuery = 32

// csvTables maps lowercased table names to the CSV files in the workspace
// root (`Orders.csv` → `orders`).
func csvTables(root *os.Root) (map[string]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	tables := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		ext := path.Ext(name)
		if !e.Type().IsRegular() || !strings.EqualFold(ext, ".csv") {
			continue
		}
		stem := strings.ToLower(strings.TrimSuffix(name, ext))
		if stem != "" {
			tables[stem] = name
		}
	}
	return tables, nil
}

// mentionedTables returns the tables whose name appears in query as an
// identifier (bare, "quoted", `backticked` or [bracketed]), so that a query
// imports only the CSV files it uses.
func mentionedTables(query string, tables map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(w string) {
		w = strings.ToLower(w)
		if _, ok := tables[w]; ok && !seen[w] && len(out) < maxTablesPerQuery {
			seen[w] = true
			out = append(out, w)
		}
	}
	isWord := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
	}
	for i := 0; i < len(query); {
		c := query[i]
		switch {
		case c == '"' || c == '`' || c == '[':
			end := byte(c)
			if c == '[' {
				end = ']'
			}
			j := strings.IndexByte(query[i+1:], end)
			if j < 0 {
				return out
			}
			add(query[i+1 : i+1+j])
			i += j + 2
		case isWord(c):
			j := i
			for j < len(query) && isWord(query[j]) {
				j++
			}
			add(query[i:j])
			i = j
		default:
			i++
		}
	}
	return out
}

// insertBatchRows is how many rows one INSERT statement of importCSV
// carries; maxSQLiteVariables is SQLite's limit on a statement's bound
// parameters (SQLITE_MAX_VARIABLE_NUMBER), which caps it for wide tables.
const (
	insertBatchRows    = 64
	maxSQLiteVariables = 32766
)

// insertStatement is an INSERT of rows rows of cols values each.
func insertStatement(table string, cols, rows int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return fmt.Sprintf("INSERT INTO %s VALUES %s", quoteIdent(table), strings.TrimSuffix(strings.Repeat(row+", ", rows), ", "))
}

// importCSV loads a CSV file (header row first) into table, inferring each
// column's type: INTEGER when every non-empty value is an integer, REAL when
// every one is a number, else TEXT; empty values are NULL.
func importCSV(ctx context.Context, conn *sql.Conn, root *os.Root, file, table string, maxBytes int64) error {
	f, err := root.Open(file)
	if err != nil {
		return fsError(file, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return fsError(file, err)
	} else if fi.Size() > maxBytes {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "CSV_TOO_LARGE",
			"%s is %d bytes; sql_query imports CSV files up to %d bytes", file, fi.Size(), maxBytes)
	}
	r := csv.NewReader(io.LimitReader(f, maxBytes))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	header, err := r.Read()
	if err == io.EOF {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "EMPTY_CSV", "%s is empty", file)
	}
	if err != nil {
		return csvError(file, err)
	}
	records, err := r.ReadAll()
	if err != nil {
		return csvError(file, err)
	}
	cols := columnNames(header)
	types := inferTypes(len(cols), records)

	var ddl strings.Builder
	fmt.Fprintf(&ddl, "CREATE TABLE %s (", quoteIdent(table))
	for i, c := range cols {
		if i > 0 {
			ddl.WriteString(", ")
		}
		fmt.Fprintf(&ddl, "%s %s", quoteIdent(c), types[i])
	}
	ddl.WriteString(")")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	// After Commit, Rollback only reports sql.ErrTxDone.
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, ddl.String()); err != nil {
		return err
	}
	// Rows go in several to a statement, with a context that cannot be
	// cancelled: with a cancellable one the SQLite driver starts a watcher
	// goroutine for every statement, which for one statement per row made
	// the import the toolrunner's largest cost under load (a goroutine and
	// a statement step per row). Cancellation is checked between batches.
	execCtx := context.WithoutCancel(ctx)
	batch := max(1, min(insertBatchRows, maxSQLiteVariables/len(cols)))
	full, err := tx.PrepareContext(ctx, insertStatement(table, len(cols), batch))
	if err != nil {
		return err
	}
	defer full.Close()
	args := make([]any, 0, batch*len(cols))
	for start := 0; start < len(records); start += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows := records[start:min(start+batch, len(records))]
		args = args[:0]
		for _, rec := range rows {
			for i := range cols {
				args = append(args, typedValue(rec, i, types[i]))
			}
		}
		if len(rows) == batch {
			_, err = full.ExecContext(execCtx, args...)
		} else {
			_, err = tx.ExecContext(execCtx, insertStatement(table, len(cols), len(rows)), args...)
		}
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "INVALID_CSV", "%s line %d: %v", file, pe.Line, pe.Err)
	}
	return fsError(file, err)
}

// columnNames makes header cells usable and unique column names.
func columnNames(header []string) []string {
	seen := map[string]int{}
	cols := make([]string, len(header))
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if h == "" {
			h = "column_" + strconv.Itoa(i+1)
		}
		key := strings.ToLower(h)
		if n := seen[key]; n > 0 {
			h = fmt.Sprintf("%s_%d", h, n+1)
		}
		seen[key]++
		cols[i] = h
	}
	return cols
}

func inferTypes(n int, records [][]string) []string {
	types := make([]string, n)
	for i := range n {
		isInt, isReal, seen := true, true, false
		for _, rec := range records {
			if i >= len(rec) || strings.TrimSpace(rec[i]) == "" {
				continue
			}
			seen = true
			v := strings.TrimSpace(rec[i])
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				isInt = false
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					isReal = false
					break
				}
			}
		}
		switch {
		case !seen || !isReal:
			types[i] = "TEXT"
		case isInt:
			types[i] = "INTEGER"
		default:
			types[i] = "REAL"
		}
	}
	return types
}

func typedValue(rec []string, i int, typ string) any {
	if i >= len(rec) {
		return nil
	}
	v := strings.TrimSpace(rec[i])
	if v == "" {
		return nil
	}
	switch typ {
	case "INTEGER":
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	case "REAL":
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return rec[i]
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
