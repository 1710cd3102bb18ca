package builtin

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// testLimit is the SQLITE_LIMIT_LENGTH of the differential tests'
// connections: small, so that the limit's errors come up too.
const testLimit = 1000

// sqlConn opens an in-memory database through driverName with sql_query's
// limits, maxLen bytes a value.
func sqlConn(t testing.TB, driverName string, maxLen int) *sql.Conn {
	t.Helper()
	db, err := sql.Open(driverName, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := limitConn(conn, maxLen); err != nil {
		t.Fatal(err)
	}
	return conn
}

// linearConn is a connection of sql_query's driver for maxLen.
func linearConn(t testing.TB, maxLen int) *sql.Conn {
	t.Helper()
	name, err := sqlQueryDriver(maxLen)
	if err != nil {
		t.Fatal(err)
	}
	return sqlConn(t, name, maxLen)
}

// sqlResult is what an expression gave: its value, typeof() and error.
type sqlResult struct {
	v   any
	typ string
	err string
}

func (r sqlResult) String() string {
	if r.err != "" {
		return "error " + r.err
	}
	return fmt.Sprintf("%#v (%s)", r.v, r.typ)
}

// sqlPair evaluates expressions on a connection with SQLite's built-ins
// and on one with the replacements, with the same limit.
type sqlPair struct {
	tb              testing.TB // the test the connections belong to
	builtin, linear *sql.Conn
	stmts           map[string][2]*sql.Stmt
}

func newSQLPair(tb testing.TB, maxLen int) *sqlPair {
	return &sqlPair{tb: tb, builtin: sqlConn(tb, "sqlite", maxLen), linear: linearConn(tb, maxLen), stmts: map[string][2]*sql.Stmt{}}
}

// prepare prepares expr on both connections.
func (p *sqlPair) prepare(expr string) [2]*sql.Stmt {
	st, ok := p.stmts[expr]
	if !ok {
		q := "SELECT " + expr + ", typeof(" + expr + ")"
		for i, c := range []*sql.Conn{p.builtin, p.linear} {
			s, err := c.PrepareContext(context.Background(), q)
			if err != nil {
				p.tb.Fatalf("%s: %v", q, err)
			}
			p.tb.Cleanup(func() { s.Close() })
			st[i] = s
		}
		p.stmts[expr] = st
	}
	return st
}

func (p *sqlPair) eval(expr string, args ...any) (builtin, linear sqlResult) {
	st := p.prepare(expr)
	run := func(s *sql.Stmt) sqlResult {
		var r sqlResult
		if err := s.QueryRow(args...).Scan(&r.v, &r.typ); err != nil {
			r.err = err.Error()
		}
		return r
	}
	return run(st[0]), run(st[1])
}

// check fails t when the expression's results differ.
func (p *sqlPair) check(t testing.TB, expr string, args ...any) sqlResult {
	t.Helper()
	b, l := p.eval(expr, args...)
	if !reflect.DeepEqual(b, l) {
		t.Errorf("%s with %s: SQLite %v, replacement %v", expr, fmtArgs(args), b, l)
	}
	return l
}

func fmtArgs(args []any) string {
	s := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case []byte:
			s[i] = fmt.Sprintf("x'%x'", a)
		default:
			s[i] = fmt.Sprintf("%#v", a)
		}
	}
	return strings.Join(s, ", ")
}

// sqlValues are arguments of every type, with the awkward cases: empty,
// NUL bytes, UTF-8 of every length, bytes that are not UTF-8, numbers
// whose text SQLite renders its own way.
var sqlValues = []any{
	nil,
	"", " ", "  ", "a", " a ", "  abc  ", "aXbXc", "xyzzyx", "banana", "ana", "an", "na", "aaa", "aa",
	"é", "ééé", " é ", "éa", "aé", "日本語", "日", "本", "語日", "😀", "😀a😀", "a\x00b", "\x00", "\x00a", "a\x00",
	"\xC3", "\xA9", "\xC3\xA9\xA9", "\xA9\xC3", "\xC3\xC3\xA9", "\x80\xBF", "\xFF\xFE", "\xE6\x97", "\xF0\x9F\x98",
	"1", ".", "0", "e+", "-", "1.0", "12",
	[]byte{}, []byte("a"), []byte("abc"), []byte(" a "), []byte{0xC3, 0xA9}, []byte{0xA9}, []byte{0, 1, 0}, []byte{0xC3}, []byte("é日"),
	int64(0), int64(1), int64(-1), int64(12), int64(1012), int64(math.MaxInt64), int64(math.MinInt64),
	0.0, 1.0, -1.5, 0.1, 10.0, 1e20, 1e-5, 1.0 / 3, 123456789012345678.0, math.Inf(1), math.Inf(-1), 5e-324, 2.5, 100.25,
}

// TestSQLFuncsDifferential compares the replacements with SQLite's
// built-ins on every value, pair of values and, for replace, many triples.
func TestSQLFuncsDifferential(t *testing.T) {
	t.Parallel()

	p := newSQLPair(t, testLimit)
	for _, x := range sqlValues {
		for _, f := range []string{"trim", "ltrim", "rtrim"} {
			p.check(t, f+"(?1)", x)
		}
		for _, y := range sqlValues {
			for _, f := range []string{"trim", "ltrim", "rtrim"} {
				p.check(t, f+"(?1, ?2)", x, y)
			}
			p.check(t, "instr(?1, ?2)", x, y)
			p.check(t, "unhex(?1, ?2)", x, y)
		}
	}
	// replace: every X and Y with a few Z, every Z with a few X and Y.
	few := []any{nil, "", "é", "\x00", []byte("xy"), 1.5}
	for _, x := range sqlValues {
		for _, y := range sqlValues {
			for _, z := range few {
				p.check(t, "replace(?1, ?2, ?3)", x, y, z)
			}
		}
	}
	for _, z := range sqlValues {
		for _, x := range few {
			for _, y := range few {
				p.check(t, "replace(?1, ?2, ?3)", x, y, z)
			}
		}
	}
	// Spot checks that the comparison compares something.
	for _, c := range []struct {
		expr string
		args []any
		want sqlResult
	}{
		{"trim(?1)", []any{"  a b  "}, sqlResult{v: "a b", typ: "text"}},
		{"ltrim(?1, ?2)", []any{"xyxaxy", "yx"}, sqlResult{v: "axy", typ: "text"}},
		{"rtrim(?1, ?2)", []any{"日本語語", "語"}, sqlResult{v: "日本", typ: "text"}},
		{"trim(?1, ?2)", []any{[]byte("xax"), "x"}, sqlResult{v: "a", typ: "text"}},
		{"trim(?1, ?2)", []any{1e20, "1"}, sqlResult{v: ".0e+20", typ: "text"}},
		{"trim(?1)", []any{1.0}, sqlResult{v: "1.0", typ: "text"}},
		{"trim(?1)", []any{1e20}, sqlResult{v: "1.0e+20", typ: "text"}},
		{"trim(?1)", []any{1.0 / 3}, sqlResult{v: "0.33333333333333332", typ: "text"}},
		{"trim(?1)", []any{int64(-12)}, sqlResult{v: "-12", typ: "text"}},
		{"trim(?1, ?2)", []any{"a", nil}, sqlResult{v: nil, typ: "null"}},
		{"instr(?1, ?2)", []any{"日本語", "語"}, sqlResult{v: int64(3), typ: "integer"}},
		{"instr(?1, ?2)", []any{[]byte("日本語"), []byte("語")}, sqlResult{v: int64(7), typ: "integer"}},
		{"instr(?1, ?2)", []any{"abc", ""}, sqlResult{v: int64(1), typ: "integer"}},
		{"instr(?1, ?2)", []any{1.5, "."}, sqlResult{v: int64(2), typ: "integer"}},
		{"instr(?1, ?2)", []any{nil, "a"}, sqlResult{v: nil, typ: "null"}},
		{"replace(?1, ?2, ?3)", []any{"aaaa", "aa", "b"}, sqlResult{v: "bb", typ: "text"}},
		{"replace(?1, ?2, ?3)", []any{"abc", "", nil}, sqlResult{v: "abc", typ: "text"}},
		{"replace(?1, ?2, ?3)", []any{[]byte("abc"), "b", "é"}, sqlResult{v: "aéc", typ: "text"}},
		{"replace(?1, ?2, ?3)", []any{1.0, ".", ","}, sqlResult{v: "1,0", typ: "text"}},
		{"unhex(?1, ?2)", []any{"-0f-A9 é", "- é"}, sqlResult{v: []byte{0x0f, 0xa9}, typ: "blob"}},
		{"unhex(?1, ?2)", []any{"0f-A9", ""}, sqlResult{v: nil, typ: "null"}},
		{"unhex(?1, ?2)", []any{"0-f", "-"}, sqlResult{v: nil, typ: "null"}},
	} {
		if got := p.check(t, c.expr, c.args...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s with %s = %v, want %v", c.expr, fmtArgs(c.args), got, c.want)
		}
	}
}

// TestSQLFuncsRandom compares the replacements with SQLite's built-ins on
// random short values made of pieces that interact: prefixes of one
// another, UTF-8 lead and continuation bytes on their own, NUL.
func TestSQLFuncsRandom(t *testing.T) {
	t.Parallel()

	p := newSQLPair(t, testLimit)
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		x, y, z := randomSQLValue(rng), randomSQLValue(rng), randomSQLValue(rng)
		for _, f := range []string{"trim", "ltrim", "rtrim"} {
			p.check(t, f+"(?1)", x)
			p.check(t, f+"(?1, ?2)", x, y)
		}
		p.check(t, "instr(?1, ?2)", x, y)
		p.check(t, "replace(?1, ?2, ?3)", x, y, z)
		p.check(t, "unhex(?1, ?2)", x, y)
		if t.Failed() {
			return
		}
	}
}

var sqlPieces = []string{"a", "b", "ab", " ", "é", "\xC3", "\xA9", "\xA9\xA9", "\x80", "日", "\xE6\x97", "\x97\xA5", "😀", "\xF0", "\x00", "1", ".",
	"0f", "A9", "F", "\xED\xA0\x80", "\xF8\x88\x80\x80\x80", "\xC0\x80", "\xFE", "\xEF\xBF\xBE"}

func randomSQLBytes(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(sqlPieces[rng.IntN(len(sqlPieces))])
	}
	return b.String()
}

func randomSQLValue(rng *rand.Rand) any {
	switch rng.IntN(16) {
	case 0:
		return nil
	case 1:
		return int64(rng.IntN(2000) - 1000)
	case 2:
		return float64(rng.IntN(2000)-1000) / 8
	case 3, 4, 5:
		return []byte(randomSQLBytes(rng))
	}
	return randomSQLBytes(rng)
}

// FuzzSQLFuncs compares the replacements with SQLite's built-ins, which
// run on a plain connection. kinds picks each argument's type, two bits
// each: TEXT, BLOB, a number, NULL.
func FuzzSQLFuncs(f *testing.F) {
	f.Add("  abc  ", " ", "", uint8(0))
	f.Add("xyxaxyx", "xy", "Z", uint8(0))
	f.Add("\xC3\xA9\xA9\xA9", "\xA9\xC3\xA9", "é", uint8(0x15))
	f.Add("日本語日本", "日本", "x", uint8(0x01))
	f.Add("a\x00b\x00", "\x00", "\x00\x00", uint8(0x20))
	f.Add("1.5", ".", "0", uint8(0x03))
	f.Add("", "", "", uint8(0xFF))
	f.Add("0f-A9 \xC3\xA9ff", "-é \xC3", "", uint8(0))
	p := newSQLPair(f, testLimit)
	for _, e := range []string{"trim(?1)", "ltrim(?1)", "rtrim(?1)", "trim(?1, ?2)", "ltrim(?1, ?2)", "rtrim(?1, ?2)", "instr(?1, ?2)", "replace(?1, ?2, ?3)", "unhex(?1, ?2)"} {
		p.prepare(e) // f's methods are not for the fuzz target
	}
	f.Fuzz(func(t *testing.T, x, y, z string, kinds uint8) {
		args := []any{fuzzValue(x, kinds), fuzzValue(y, kinds>>2), fuzzValue(z, kinds>>4)}
		for _, f := range []string{"trim", "ltrim", "rtrim"} {
			p.check(t, f+"(?1)", args[0])
			p.check(t, f+"(?1, ?2)", args[0], args[1])
		}
		p.check(t, "instr(?1, ?2)", args[0], args[1])
		p.check(t, "replace(?1, ?2, ?3)", args...)
		p.check(t, "unhex(?1, ?2)", args[0], args[1])
	})
}

func fuzzValue(s string, kind uint8) any {
	switch kind & 3 {
	case 1:
		return []byte(s)
	case 2:
		var n uint64
		for _, c := range []byte(s) {
			n = n*131 + uint64(c)
		}
		if len(s)%2 == 0 {
			return int64(n)
		}
		if r := math.Float64frombits(n); !math.IsNaN(r) {
			return r
		}
		return float64(n % 1000)
	case 3:
		if s == "" {
			return nil
		}
	}
	return s
}

// TestSQLFuncsRealText: REALs render as SQLite renders them.
func TestSQLFuncsRealText(t *testing.T) {
	t.Parallel()

	conn := sqlConn(t, "sqlite", testLimit)
	st, err := conn.PrepareContext(context.Background(), "SELECT CAST(?1 AS TEXT)")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 1e14, 1e15, 1e16, 1e17, 1e20, 1e21, 1e-4, 1e-5,
		1 << 53, 1<<53 + 1, 1 << 63, 9.999999999999999e16, 123456789012345678, 49.47, math.MaxFloat64, math.SmallestNonzeroFloat64,
		2.2250738585072014e-308, math.Inf(1), math.Inf(-1), 140737488355327, 3.0}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		values = append(values,
			math.Float64frombits(rng.Uint64()),                      // anything
			float64(rng.Int64N(1<<40))/math.Pow10(rng.IntN(12)),     // decimals
			float64(rng.Int64N(1e6))*math.Pow10(rng.IntN(40)-20),    // round ones
			math.Nextafter(float64(rng.IntN(1000))/10, math.Inf(1))) // just off
	}
	for _, r := range values {
		if math.IsNaN(r) {
			continue
		}
		var want string
		if err := st.QueryRow(r).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := realText(r); got != want {
			t.Errorf("realText(%v) = %q, SQLite %q", r, got, want)
		}
	}
}

// TestSQLFuncsRealColumn: a REAL column's integral values (stored as
// integers, read back as REAL) render as SQLite renders them.
func TestSQLFuncsRealColumn(t *testing.T) {
	t.Parallel()

	p := newSQLPair(t, testLimit)
	for _, c := range []*sql.Conn{p.builtin, p.linear} {
		if _, err := c.ExecContext(context.Background(), "CREATE TABLE r(x REAL); INSERT INTO r VALUES (3), (-7), (0.5), (1e15), (140737488355327), (140737488355328), (1e20)"); err != nil {
			t.Fatal(err)
		}
	}
	q := "SELECT group_concat(trim(x, '0') || '|' || instr(x, '.0') || '|' || replace(x, '.', ','), ' ') FROM r"
	var b, l string
	if err := p.builtin.QueryRowContext(context.Background(), q).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if err := p.linear.QueryRowContext(context.Background(), q).Scan(&l); err != nil {
		t.Fatal(err)
	}
	if b != l {
		t.Errorf("REAL column: SQLite %q, replacement %q", b, l)
	}
}

// TestSQLFuncsTooBig: the replacements fail where SQLite's fail, with
// SQLite's SQLITE_TOOBIG, which sql_query reports as QUERY_TOO_LARGE.
func TestSQLFuncsTooBig(t *testing.T) {
	t.Parallel()

	p := newSQLPair(t, testLimit)
	a := func(n int) string { return strings.Repeat("a", n) }
	chars := func(n int) string { return strings.Repeat("é", n) }
	for _, c := range []struct {
		expr   string
		args   []any
		tooBig bool
	}{
		{"replace(?1, ?2, ?3)", []any{a(999), "a", "b"}, false},
		{"replace(?1, ?2, ?3)", []any{a(1000), "a", "b"}, true}, // SQLite allocates len(X)+1 first
		{"replace(?1, ?2, ?3)", []any{a(1000), "", "b"}, false},
		{"replace(?1, ?2, ?3)", []any{a(1000), "a", nil}, false},
		{"replace(?1, ?2, ?3)", []any{a(500), "a", "bb"}, false},
		{"replace(?1, ?2, ?3)", []any{a(501), "a", "bb"}, true},
		{"replace(?1, ?2, ?3)", []any{a(100), "a", a(10)}, false},
		{"replace(?1, ?2, ?3)", []any{a(101), "a", a(10)}, true},
		{"replace(?1, ?2, ?3)", []any{a(101) + "b", "a", ""}, false},
		{"trim(?1, ?2)", []any{"x", a(83)}, false},     // 83 characters: 996 bytes of pointers and lengths
		{"trim(?1, ?2)", []any{"x", a(84)}, true},      // 84: 1008
		{"ltrim(?1, ?2)", []any{"x", chars(84)}, true}, // characters, not bytes
		{"rtrim(?1, ?2)", []any{"x", chars(83)}, false},
		{"trim(?1, ?2)", []any{nil, a(84)}, false},
		{"trim(?1, ?2)", []any{"x", a(84) + "\x00" + a(100)}, true},
		{"trim(?1, ?2)", []any{"x", a(83) + "\x00" + a(100)}, false},
		{"trim(?1)", []any{a(1000)}, false},
		{"instr(?1, ?2)", []any{a(1000), a(1000)}, false},
	} {
		got := p.check(t, c.expr, c.args...)
		if tooBig := strings.Contains(got.err, "string or blob too big"); tooBig != c.tooBig {
			t.Errorf("%s: %v, want too big %v", c.expr, got, c.tooBig)
		}
	}
	// The error's code is SQLite's.
	var se *sqlite.Error
	err := p.linear.QueryRowContext(context.Background(), "SELECT replace(?1, 'a', 'bb')", a(600)).Scan(new(any))
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_TOOBIG {
		t.Errorf("replace over the limit: %v, want SQLITE_TOOBIG", err)
	}
	// And sql_query reports it as a query too large.
	e := newEnv(t)
	tl := newSQLQuery(Options{QueryMaxBytes: testLimit}.withDefaults())
	for _, q := range []string{
		"SELECT replace(printf('%.*c', 600, 'a'), 'a', 'bb')",
		"SELECT trim('x', printf('%.*c', 100, 'a'))",
	} {
		_, err := tl.Execute(context.Background(), tool.Call{Workspace: e.root, Args: map[string]any{"query": q}})
		if te := tool.Classify(err); te == nil || te.Code != "QUERY_TOO_LARGE" || te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS {
			t.Errorf("%s: %v, want QUERY_TOO_LARGE", q, err)
		}
	}
}

var overrideDrivers atomic.Int64

// TestSQLFuncsOverride: on a connection of a driver with the replacements
// registered, every form of trim, ltrim, rtrim, instr and replace is the
// replacement, not SQLite's built-in (unhex(X, Y) too); other numbers of arguments are
// still SQLite's errors, when the query is prepared.
func TestSQLFuncsOverride(t *testing.T) {
	t.Parallel()

	calls := map[string]*atomic.Int64{}
	var fns []sqlFunc
	for _, f := range linearSQLFuncs(testLimit) {
		key := fmt.Sprintf("%s/%d", strings.ToLower(f.name), f.nArgs)
		n := new(atomic.Int64)
		calls[key] = n
		inner := f.fn
		f.fn = func(ctx *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			n.Add(1)
			return inner(ctx, args)
		}
		fns = append(fns, f)
	}
	if len(calls) != 9 {
		t.Fatalf("%d functions: %v", len(calls), calls)
	}
	d := &sqlite.Driver{}
	if err := registerSQLFuncs(d, fns); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sqlite/test-override/%d", overrideDrivers.Add(1))
	sql.Register(name, d)
	conn := sqlConn(t, name, testLimit)
	plain := sqlConn(t, "sqlite", testLimit)
	for _, q := range []string{
		"SELECT trim(' a '), TRIM(' a ', ' '), ltrim(' a'), LTrim(' a', ' '), rtrim('a '), RTRIM('a ', ' '), instr('ab', 'b'), Replace('ab', 'b', 'c'), hex(unhex('-61', '-'))",
	} {
		var v [9]any
		ptrs := make([]any, len(v))
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := conn.QueryRowContext(context.Background(), q).Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(v); got != "[a a a a a a 2 ac 61]" {
			t.Errorf("%s = %s", q, got)
		}
	}
	for key, n := range calls {
		if n.Load() == 0 {
			t.Errorf("%s: the built-in ran, not the replacement", key)
		}
	}
	for _, q := range []string{"SELECT trim()", "SELECT trim('a', 'b', 'c')", "SELECT instr('a')", "SELECT replace('a', 'b')", "SELECT unhex()", "SELECT unhex('a', 'b', 'c')", "SELECT ltrim() FROM (SELECT 1 WHERE 0)"} {
		var errs [2]error
		for i, c := range []*sql.Conn{conn, plain} {
			rows, err := c.QueryContext(context.Background(), q)
			if err == nil {
				rows.Close()
			}
			errs[i] = err
		}
		if errs[0] == nil || errs[1] == nil || errs[0].Error() != errs[1].Error() {
			t.Errorf("%s: %v, SQLite %v", q, errs[0], errs[1])
		}
	}
	// sql_query's driver is one per limit.
	a, err := sqlQueryDriver(testLimit)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := sqlQueryDriver(testLimit); a != b {
		t.Errorf("two drivers for one limit: %s, %s", a, b)
	}
	if c, _ := sqlQueryDriver(testLimit + 1); c == a {
		t.Errorf("one driver for two limits: %s", c)
	}
}

// sqlWorstCases are queries that take SQLite's built-ins from seconds to
// minutes of CPU in one step, which the query's interrupt cannot stop:
// every character of a long set tried at every position, a long pattern
// compared at every position. (Times of the built-ins on the machine of
// the change, without the race detector.)
var sqlWorstCases = []struct {
	name, query, want string
}{
	// 1 MiB of 'a' trimmed with a set of 65,536 characters, the 'a' last:
	// SQLite tries 65,536 characters for each of 2^20 bytes (some 6 min).
	{"trim", "SELECT length(trim(printf('%.*c', 1048575, 'a'), printf('%.*c', 65535, 'c') || 'a'))", "0"},
	// 128 KiB with a set of 64 Ki characters (48 s).
	{"trim-128k", "SELECT length(trim(printf('%.*c', 131072, 'a'), printf('%.*c', 65535, 'c') || 'a'))", "0"},
	// The same from the end, with two-byte characters and a set of
	// 32,768 with the match last (1 min 30 s).
	{"rtrim-utf8", "SELECT length(rtrim('x' || replace(printf('%.*c', 500000, 'a'), 'a', 'é'), replace(printf('%.*c', 32767, 'a'), 'a', 'è') || 'é'))", "1"},
	// A run of a million continuation bytes after a lead byte, trimmed
	// with a set of 8,000 characters of that lead and 20 continuation
	// bytes, one of 400,001 bytes, and (after a 'z', or it would be part
	// of the character before) the continuation byte alone, which
	// SQLite finds last at every byte.
	{"rtrim-run", "SELECT octet_length(rtrim('x' || x'C3' || replace(printf('%.*c', 1000000, 'a'), 'a', x'A9'), " +
		"replace(printf('%.*c', 8000, 'a'), 'a', x'C3' || replace(printf('%.*c', 20, 'a'), 'a', x'A9')) || " +
		"x'C3' || replace(printf('%.*c', 400000, 'a'), 'a', x'A9') || 'z' || x'A9'))", "1"},
	// 1 MiB of 'z' between no pairs of digits, with a set of 1 MiB, the
	// 'z' last: SQLite reads the set for each 'z' (about 65 min).
	{"unhex", "SELECT length(unhex(printf('%.*c', 1048575, 'z'), printf('%.*c', 1048574, 'y') || 'z'))", "0"},
	// 512 KiB needles that match up to their last byte at every position
	// of 1 MiB (6.6 s each), four in one step.
	{"instr", sqlWorstFour("instr(printf('%.*c', 1048575, 'a'), printf('%.*c', 524287, 'a') || '?')"), "0"},
	{"instr-text", sqlWorstFour("instr(replace(printf('%.*c', 500000, 'a'), 'a', 'é'), replace(printf('%.*c', 250000, 'a'), 'a', 'é') || '?')"), "0"},
	{"replace", sqlWorstFour("length(replace(printf('%.*c', 1048575, 'a'), printf('%.*c', 524287, 'a') || '?', ''))"), "4194300"},
}

// sqlWorstFour is SELECT of the sum of four copies of expr, each with its
// own '?' (SQLite would compute identical ones once).
func sqlWorstFour(expr string) string {
	terms := make([]string, 4)
	for i := range terms {
		terms[i] = strings.Replace(expr, "?", string(rune('b'+i)), 1)
	}
	return "SELECT " + strings.Join(terms, " + ")
}

// TestSQLFuncsWorstCases: with the replacements, sql_query runs the
// worst cases within a deadline the built-ins could not meet (they take
// from seconds to minutes, and more under the race detector), and within
// the query's budget.
func TestSQLFuncsWorstCases(t *testing.T) {
	e := newEnv(t)
	tl := newSQLQuery(Options{QueryTimeout: time.Minute}.withDefaults())
	for _, c := range sqlWorstCases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			res, err := runBounded(t, tl, tool.Call{Workspace: e.root, Args: map[string]any{"query": c.query}}, 10*time.Second, 0)
			if err != nil {
				t.Fatalf("%v after %s", err, time.Since(start))
			}
			if doc := res.Data.(tool.Document); !strings.Contains(doc.Text, "| "+c.want+" |") {
				t.Fatalf("got %s", doc.Text)
			}
			t.Logf("%s: %s", c.name, time.Since(start))
		})
	}
}

// TestSQLFuncsWorstCasesBuiltin measures the worst cases with SQLite's
// built-ins, for comparison (minutes: run by hand with
// BAAGENT_SQLFUNCS_BUILTIN=1).
func TestSQLFuncsWorstCasesBuiltin(t *testing.T) {
	if os.Getenv("BAAGENT_SQLFUNCS_BUILTIN") == "" {
		t.Skip("takes minutes; set BAAGENT_SQLFUNCS_BUILTIN=1")
	}
	conn := sqlConn(t, "sqlite", DefaultQueryMaxBytes)
	for _, c := range sqlWorstCases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			var got string
			if err := conn.QueryRowContext(context.Background(), c.query).Scan(&got); err != nil || got != c.want {
				t.Errorf("%q, %v", got, err)
			}
			t.Logf("%s: %s", c.name, time.Since(start))
		})
	}
}

// BenchmarkSQLFuncs compares the replacements with SQLite's built-ins on
// ordinary values: 10,000 calls in one query.
func BenchmarkSQLFuncs(b *testing.B) {
	for _, c := range []struct{ name, expr string }{
		{"trim", "trim('  value ' || x || '  ')"},
		{"trim-set", "trim('-- value ' || x || ' .-', ' .-')"},
		{"instr", "instr('the quick brown fox ' || x, 'fox')"},
		{"replace", "replace('the quick brown fox ' || x, 'o', '0')"},
	} {
		for _, d := range []string{"builtin", "linear"} { // benchstat -col /impl
			b.Run(c.name+"/impl="+d, func(b *testing.B) {
				var conn *sql.Conn
				if d == "builtin" {
					conn = sqlConn(b, "sqlite", DefaultQueryMaxBytes)
				} else {
					conn = linearConn(b, DefaultQueryMaxBytes)
				}
				q := "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x < 10000) SELECT sum(length(" + c.expr + ")) FROM n"
				for b.Loop() {
					var n int64
					if err := conn.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
