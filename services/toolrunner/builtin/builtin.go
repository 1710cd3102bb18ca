// Package builtin holds the toolrunner's built-in business-analysis tools:
// file_read, file_write, file_edit, glob, grep, sql_query and artifact_read.
// Every file tool works inside the conversation's workspace through the
// os.Root in tool.Call.Workspace, so no path, `..` or symlink can leave it;
// artifact_read reads only the calling conversation's artifacts. The memory
// tools, memory_search and memory_add, call the memory service for the
// tenants whose settings enable them (MemorySource).
package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/artifact"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Version of every built-in tool (part of the idempotency key).
const Version = "1.0.0"

// Source is Spec.Source of the built-in tools.
const Source = "builtin"

// Defaults of [Options].
const (
	DefaultMaxFileBytes  = 10 << 20 // file_write content, file_edit file size
	DefaultMaxCSVBytes   = 64 << 20 // one CSV imported by sql_query
	DefaultMaxRows       = 200      // sql_query max_rows default
	MaxRowsCap           = 10_000   // sql_query max_rows maximum
	DefaultQueryTimeout  = 30 * time.Second
	DefaultMaxMatches    = 1000 // glob results, grep output lines
	DefaultMaxGrepFile   = 20 << 20
	DefaultMaxWalkedFile = 100_000 // files visited by one glob or grep

	// Budgets: what one call may spend. A call that spends one fails (or
	// stops, for the bytes grep scans) with a message to narrow it, and
	// the pipeline does not retry it.
	DefaultSearchTimeout  = 30 * time.Second // one glob or grep
	DefaultGrepMaxBytes   = 64 << 20         // bytes one grep reads
	DefaultQueryMaxBytes  = 1 << 20          // SQLITE_LIMIT_LENGTH: one string, blob or row
	DefaultQueryHeapLimit = 512 << 20        // SQLite's memory, process-wide
)

// ArtifactReader reads artifacts for artifact_read.
type ArtifactReader interface {
	Read(artifact.ReadRequest) (artifact.Page, error)
}

// Options configures the built-in tools. Zero values take the defaults.
type Options struct {
	// Artifacts serves artifact_read; nil leaves artifact_read out.
	Artifacts ArtifactReader
	// MaxFileBytes bounds file_write content and the file file_edit edits.
	MaxFileBytes int
	// MaxCSVBytes bounds a CSV file sql_query imports.
	MaxCSVBytes int64
	// QueryTimeout bounds one sql_query (within the call's own timeout).
	QueryTimeout time.Duration
	// MaxConcurrentQueries bounds the sql_query calls executing at once
	// (default GOMAXPROCS); the others wait for a slot within their call's
	// deadline. The SQLite build shares one page-cache mutex between all
	// connections, so more queries than cores only queue on that mutex,
	// and under load (1,000 concurrent runs) the convoy made each query
	// hundreds of times slower.
	MaxConcurrentQueries int
	// MaxQueriesPerTenant bounds the query slots one tenant holds (default
	// max(1, MaxConcurrentQueries-1)), so that one tenant's runaway
	// queries never take every slot; a freed slot goes to the waiting
	// tenant holding the fewest (see fairSlots).
	MaxQueriesPerTenant int
	// QueryMaxBytes bounds one string, blob or row a query builds
	// (SQLITE_LIMIT_LENGTH; default 1 MiB) and, ×16, the rows it returns.
	// SQLite checks its interrupt only between steps, and a step over a
	// value costs time in proportion to its size (some functions, more),
	// so this also bounds how far a query overruns its timeout.
	QueryMaxBytes int
	// QueryHeapLimit bounds the memory SQLite allocates, for every query
	// of the process together (sqlite3_hard_heap_limit64; default
	// 512 MiB; negative: none). A query that needs more fails with
	// RESOURCE_LIMIT. The limit is process-wide: the last Tools call sets
	// it.
	QueryHeapLimit int64
	// SearchTimeout bounds the work of one glob or grep (default 30 s),
	// within the call's own timeout.
	SearchTimeout time.Duration
	// GrepMaxBytes bounds the bytes one grep reads (default 64 MiB); grep
	// stops there and says so.
	GrepMaxBytes int64
	// MaxConcurrentGreps bounds the grep calls searching at once (default
	// GOMAXPROCS); the others wait for a slot within their call's
	// deadline. MaxGrepsPerTenant bounds one tenant's share (default
	// max(1, MaxConcurrentGreps-1)).
	MaxConcurrentGreps int
	MaxGrepsPerTenant  int
}

func (o Options) withDefaults() Options {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxCSVBytes <= 0 {
		o.MaxCSVBytes = DefaultMaxCSVBytes
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.MaxConcurrentQueries <= 0 {
		o.MaxConcurrentQueries = runtime.GOMAXPROCS(0)
	}
	if o.MaxQueriesPerTenant <= 0 {
		o.MaxQueriesPerTenant = max(1, o.MaxConcurrentQueries-1)
	}
	if o.QueryMaxBytes <= 0 {
		o.QueryMaxBytes = DefaultQueryMaxBytes
	}
	if o.QueryHeapLimit == 0 {
		o.QueryHeapLimit = DefaultQueryHeapLimit
	}
	if o.SearchTimeout <= 0 {
		o.SearchTimeout = DefaultSearchTimeout
	}
	if o.GrepMaxBytes <= 0 {
		o.GrepMaxBytes = DefaultGrepMaxBytes
	}
	if o.MaxConcurrentGreps <= 0 {
		o.MaxConcurrentGreps = runtime.GOMAXPROCS(0)
	}
	if o.MaxGrepsPerTenant <= 0 {
		o.MaxGrepsPerTenant = max(1, o.MaxConcurrentGreps-1)
	}
	return o
}

// Tools returns the built-in tools.
func Tools(opts Options) []tool.Tool {
	opts = opts.withDefaults()
	ts := []tool.Tool{
		fileRead{}, fileWrite{opts}, fileEdit{opts}, globTool{opts}, newGrep(opts), newSQLQuery(opts),
	}
	if opts.Artifacts != nil {
		ts = append(ts, artifactRead{opts.Artifacts})
	}
	return ts
}

// spec builds a built-in Spec; schema is the JSON Schema of the arguments.
func spec(name, description, schema string, readOnly bool, level baagentv1.OutputLevel) tool.Spec {
	return tool.Spec{
		Name: name, Description: description, Version: Version,
		Parameters: json.RawMessage(schema), ReadOnly: readOnly,
		DefaultOutputLevel: level, Source: Source,
	}
}

// Argument accessors. The pipeline has validated the arguments against the
// schema; these stay defensive for direct callers.

func argString(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func argBool(args map[string]any, k string) bool {
	b, _ := args[k].(bool)
	return b
}

// argInt returns args[k] as an int clamped to [lo, hi], or def when absent.
func argInt(args map[string]any, k string, def, lo, hi int) int {
	var f float64
	switch v := args[k].(type) {
	case float64: // JSON and structpb numbers
		f = v
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case json.Number:
		var err error
		if f, err = v.Float64(); err != nil {
			return def
		}
	default:
		return def
	}
	if math.IsNaN(f) {
		return def
	}
	switch {
	case f < float64(lo):
		return lo
	case f > float64(hi):
		return hi
	}
	return int(f)
}

// Error constructors with the codes the model sees.

func invalid(code, format string, a ...any) *tool.Error {
	return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, code, format, a...)
}

func failed(code, format string, a ...any) *tool.Error {
	return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, code, format, a...)
}

// exhausted is the error of a call that spent one of its budgets: final,
// since the same arguments would spend it again.
func exhausted(typ baagentv1.ToolErrorType, code, format string, a ...any) *tool.Error {
	e := tool.Errorf(typ, code, format, a...)
	e.BudgetExhausted = true
	return e
}

// stopped is the error of a call whose context ended while it worked
// under budget, a context derived from ctx with the tool's own timeout:
// when only the budget ran out, a final TIMEOUT with what (the model's
// advice); when ctx itself ended (the attempt's deadline, or the caller
// left), ctx's error, which the pipeline may retry with a longer timeout.
func stopped(ctx context.Context, timeout time.Duration, name, what string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return exhausted(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, strings.ToUpper(name)+"_TIMEOUT",
		"%s did not finish within its %s budget; %s (a retry with the same arguments would take as long)", name, timeout, what)
}

// mib formats a byte limit for messages.
func mib(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func outside(p string) *tool.Error {
	return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "PATH_OUTSIDE_WORKSPACE",
		"%q is outside the workspace: use a path relative to the workspace, without '..' and not through a symlink that leads out", p)
}

var errNoWorkspace = tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, "NO_WORKSPACE", "the call has no workspace")

// workspacePath turns a path argument into a clean slash path relative to
// the workspace root, refusing absolute paths, backslashes and `..` that
// climbs out. (The os.Root refuses symlinks that lead out.)
func workspacePath(p string) (string, *tool.Error) {
	if p == "" {
		return "", invalid("MISSING_PATH", "path is required")
	}
	if strings.ContainsRune(p, '\\') || strings.ContainsRune(p, 0) || path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "" {
		return "", outside(p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", outside(p)
	}
	return c, nil
}

// refuseSymlinkOut reports a path that exists but resolves (through a
// symlink) outside the workspace. A write would replace the link rather
// than follow it, but the model should learn that the path is off limits.
func refuseSymlinkOut(root *os.Root, p string) *tool.Error {
	if _, err := root.Stat(p); err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return outside(p)
	}
	return nil
}

// fsError maps a file system error on p to a tool error without any
// absolute path in it.
func fsError(p string, err error) *tool.Error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, "FILE_NOT_FOUND", "%s does not exist in the workspace (use glob to list files)", p)
	case strings.Contains(err.Error(), "path escapes from parent"):
		return outside(p)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, "ACCESS_DENIED", "%s: permission denied", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return failed("IO_ERROR", "%s: %v", p, err)
}

// isBinary reports whether a file's first bytes look binary (a NUL byte),
// the rule grep uses.
func isBinary(head []byte) bool {
	for _, c := range head {
		if c == 0 {
			return true
		}
	}
	return false
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	if strings.HasSuffix(word, "ch") || strings.HasSuffix(word, "s") {
		return fmt.Sprintf("%d %ses", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
