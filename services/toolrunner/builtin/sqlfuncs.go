package builtin

import (
	"bytes"
	"cmp"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Linear-time trim, ltrim, rtrim, instr, replace and unhex for sql_query.
//
// SQLite's own are quadratic in the worst case: trim tries each character
// of its set at each position it removes (6 min of CPU for 1 MiB of 'a'
// and a set of 64 Ki characters, the 'a' last), instr and replace compare
// the pattern at each position (6.6 s for 1 MiB and a pattern of 512 KiB),
// unhex(X, Y) reads Y from its start for each character of X it skips
// (about an hour for 1 MiB of each). A call is one step of SQLite's program,
// which the query's interrupt cannot stop, so a query of a hundred bytes
// could outlast its QueryTimeout by that much. The replacements keep
// SQLite's results exactly (TestSQLFuncsDifferential, FuzzSQLFuncs: they
// compare them with the built-ins), errors included: the arguments are
// what sqlite3_value_text makes of them (numbers rendered as SQLite
// renders them), results are TEXT (instr INTEGER, unhex BLOB), NULL in
// gives NULL out, and "string or blob too big" (SQLITE_TOOBIG) comes where
// SQLite raises it.
//
// Registration. modernc.org/sqlite (v1.61) registers Go functions on a
// *sqlite.Driver, which installs them with sqlite3_create_function on every
// connection it opens; there is no way to add one to a single open
// connection (the driver's connection has no such method). The package-level
// sqlite.RegisterFunction would change every "sqlite" connection in the
// process, so sql_query opens its databases through a Driver of its own,
// registered with database/sql under a private name — the pattern the
// driver documents for private registrations. Functions registered on a
// connection take precedence over SQLite's built-ins of the same name and
// number of arguments (sqlite3FindFunction looks at the connection's
// functions first and falls back to the built-ins only when none matches);
// TestSQLFuncsOverride checks that every one of them is the Go version.
// A Driver keys its functions by name, case-sensitively, while SQLite's
// names are case-insensitive, so the two-argument forms are registered in
// capitals ("TRIM") to sit beside the one-argument ones: each keeps its
// exact number of arguments, and a wrong number is still SQLite's own
// "wrong number of arguments" error when the query is prepared.
//
// One Driver per SQLITE_LIMIT_LENGTH: the functions must fail where
// SQLite's would, which depends on the connection's limit, and a Go
// function cannot see its connection.

// sqlQueryDrivers holds the drivers registered so far, by limit.
var sqlQueryDrivers struct {
	sync.Mutex
	names map[int]string
}

// sqlQueryDriver returns the name of the database/sql driver that opens
// sql_query's databases: modernc.org/sqlite with the linear-time functions,
// for connections whose SQLITE_LIMIT_LENGTH is set to maxLen.
func sqlQueryDriver(maxLen int) (string, error) {
	// What sqlite3_limit makes of maxLen.
	maxLen = min(max(maxLen, sqlite3.SQLITE_MIN_LENGTH), sqlite3.SQLITE_MAX_LENGTH)
	sqlQueryDrivers.Lock()
	defer sqlQueryDrivers.Unlock()
	if name, ok := sqlQueryDrivers.names[maxLen]; ok {
		return name, nil
	}
	d := &sqlite.Driver{}
	if err := registerSQLFuncs(d, linearSQLFuncs(maxLen)); err != nil {
		return "", err
	}
	name := "sqlite/sql_query/" + strconv.Itoa(maxLen)
	sql.Register(name, d)
	if sqlQueryDrivers.names == nil {
		sqlQueryDrivers.names = map[int]string{}
	}
	sqlQueryDrivers.names[maxLen] = name
	return name, nil
}

// sqlFunc is a scalar function to register: its name and number of
// arguments.
type sqlFunc struct {
	name  string
	nArgs int32
	fn    func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error)
}

func registerSQLFuncs(d *sqlite.Driver, fns []sqlFunc) error {
	for _, f := range fns {
		// VolatileArgs: TEXT and BLOB arguments are SQLite's own memory,
		// not copies, and keep their NUL bytes (the copying path reads
		// TEXT up to its first NUL). The functions keep nothing past
		// their return; a result that is part of an argument is copied by
		// the driver before SQLite reuses the argument.
		if err := d.RegisterFunction(f.name, &sqlite.FunctionImpl{NArgs: f.nArgs, Deterministic: true, VolatileArgs: true, Scalar: f.fn}); err != nil {
			return fmt.Errorf("register %s/%d: %w", f.name, f.nArgs, err)
		}
	}
	return nil
}

// linearSQLFuncs returns the replacements for connections whose
// SQLITE_LIMIT_LENGTH is maxLen.
func linearSQLFuncs(maxLen int) []sqlFunc {
	f := sqlFuncs{maxLen: maxLen}
	return []sqlFunc{
		{"trim", 1, f.trim(trimLeft | trimRight)},
		{"TRIM", 2, f.trim(trimLeft | trimRight)},
		{"ltrim", 1, f.trim(trimLeft)},
		{"LTRIM", 2, f.trim(trimLeft)},
		{"rtrim", 1, f.trim(trimRight)},
		{"RTRIM", 2, f.trim(trimRight)},
		{"instr", 2, sqlInstr},
		{"replace", 3, f.replace},
		{"unhex", 2, sqlUnhex}, // unhex(X) is linear as it is
	}
}

type sqlFuncs struct {
	maxLen int // the connection's SQLITE_LIMIT_LENGTH
}

// tooBig fails the call as SQLite fails a value over SQLITE_LIMIT_LENGTH:
// a result one byte over the limit, which SQLite refuses with
// SQLITE_TOOBIG, "string or blob too big" (an error a Go function returns
// is SQLITE_ERROR, and the driver has no way to set another code).
func (f sqlFuncs) tooBig() (driver.Value, error) {
	return make([]byte, f.maxLen+1), nil
}

const (
	trimLeft = 1 << iota
	trimRight
)

// trim is SQLite's trimFunc: X without the characters of Y (default a
// space) at its start (trimLeft) and end (trimRight). Like SQLite, it
// compares bytes, whatever the types: a BLOB is trimmed as the text of
// its bytes and the result is TEXT.
func (f sqlFuncs) trim(flags int) func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
	return func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		x, ok := sqliteText(args[0])
		if !ok {
			return nil, nil
		}
		if len(args) == 1 {
			i, e := 0, len(x)
			if flags&trimLeft != 0 {
				for i < e && x[i] == ' ' {
					i++
				}
			}
			if flags&trimRight != 0 {
				for e > i && x[e-1] == ' ' {
					e--
				}
			}
			return x[i:e], nil
		}
		y, ok := sqliteText(args[1])
		if !ok {
			return nil, nil
		}
		var set trimSet
		set.parse(y)
		if set.n == 0 {
			return x, nil
		}
		// SQLite allocates a pointer and a length per character of Y, and
		// an allocation over SQLITE_LIMIT_LENGTH fails the call.
		if int64(set.n)*int64(unsafe.Sizeof(uintptr(0))+4) > int64(f.maxLen) {
			return f.tooBig()
		}
		if flags&trimLeft != 0 {
			x = x[set.left(x):]
		}
		if flags&trimRight != 0 {
			x = x[:set.right(x)]
		}
		return x, nil
	}
}

// trimSet is trim's Y split into characters as SQLite splits it: a byte
// below 0xC0, or a byte from 0xC0 up with the continuation bytes
// (0x80-0xBF) after it; Y ends at its first NUL byte. SQLite removes, at
// each step, the first character of Y that matches; which one comes first
// matters only when two match at once, one a prefix of the other (as
// "\xC3" and "\xC3\xA9" can be: Y need not be valid UTF-8).
//
// SQLite tries every character at every step; here a one-byte character
// is a table lookup, and the longer ones, sorted, are found by a walk
// along the value's bytes that narrows the sorted range one byte at a
// time. A walk starts only at a byte from 0xC0 up and stops at the first
// byte that is not a continuation byte, so each byte of the value is
// walked over at most once per end: O(len(X) log len(Y) + len(Y) log len(Y)).
type trimSet struct {
	n      int         // characters in Y
	single [256]int32  // rank in Y (from 1) of the one-byte character b; 0: none
	multi  []trimChar  // the longer characters, by bytes, then rank
	hits   []trimMatch // a walk's matches (reused)
}

type trimChar struct {
	s    string
	rank int32
}

// trimMatch is a character of n bytes, ranked rank in Y, found by a walk.
type trimMatch struct {
	n    int
	rank int32
}

func (t *trimSet) parse(y string) {
	for i := 0; i < len(y) && y[i] != 0; t.n++ {
		j := i + 1
		if y[i] >= 0xC0 {
			for j < len(y) && y[j]&0xC0 == 0x80 {
				j++
			}
		}
		rank := int32(t.n + 1)
		if j == i+1 {
			if t.single[y[i]] == 0 {
				t.single[y[i]] = rank
			}
		} else {
			t.multi = append(t.multi, trimChar{y[i:j], rank})
		}
		i = j
	}
	slices.SortFunc(t.multi, func(a, b trimChar) int {
		if c := strings.Compare(a.s, b.s); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
}

// walk finds the characters of two bytes or more that x[pos:] starts
// with, shortest first, into t.hits.
func (t *trimSet) walk(x string, pos int) {
	t.hits = t.hits[:0]
	m := t.multi
	b := x[pos]
	lo := sort.Search(len(m), func(k int) bool { return m[k].s[0] >= b })
	hi := lo + sort.Search(len(m)-lo, func(k int) bool { return m[lo+k].s[0] > b })
	// m[lo:hi] are the characters that start with x[pos:pos+d], all
	// longer than d bytes.
	for d := 1; lo < hi && pos+d < len(x); d++ {
		c := x[pos+d]
		r := m[lo:hi]
		i := sort.Search(len(r), func(k int) bool { return r[k].s[d] >= c })
		j := i + sort.Search(len(r)-i, func(k int) bool { return r[i+k].s[d] > c })
		lo, hi = lo+i, lo+j
		if lo < hi && len(m[lo].s) == d+1 {
			// x[pos:pos+d+1] itself, lowest rank first.
			t.hits = append(t.hits, trimMatch{d + 1, m[lo].rank})
			for lo < hi && len(m[lo].s) == d+1 {
				lo++
			}
		}
	}
}

// left returns how many bytes ltrim removes from x.
func (t *trimSet) left(x string) int {
	i := 0
	for i < len(x) {
		best, n := t.single[x[i]], 1
		if x[i] >= 0xC0 && len(t.multi) > 0 {
			t.walk(x, i)
			for _, h := range t.hits {
				if best == 0 || h.rank < best {
					best, n = h.rank, h.n
				}
			}
		}
		if best == 0 {
			break
		}
		i += n
	}
	return i
}

// right returns how many bytes of x remain after rtrim.
func (t *trimSet) right(x string) int {
	e := len(x)
	for e > 0 {
		if b := x[e-1]; b&0xC0 != 0x80 || len(t.multi) == 0 {
			// Only a one-byte character can end with b.
			if t.single[b] == 0 {
				return e
			}
			e--
			continue
		}
		// x[s:e] is a run of continuation bytes. A longer character that
		// x[:e] ends with starts at the byte before the run, x[l], and
		// ends at e: x[l:e] is a character, or a one-byte character
		// x[e-1] is, until one is removed.
		s := e - 1
		for s > 0 && x[s-1]&0xC0 == 0x80 {
			s--
		}
		if s == 0 || x[s-1] < 0xC0 {
			for e > s && t.single[x[e-1]] != 0 {
				e--
			}
			if e > s {
				return e
			}
			continue
		}
		l := s - 1
		t.walk(x[:e], l)
		k := len(t.hits) - 1
		for e > s {
			for k >= 0 && t.hits[k].n > e-l {
				k--
			}
			var multi int32
			if k >= 0 && t.hits[k].n == e-l {
				multi = t.hits[k].rank
			}
			single := t.single[x[e-1]]
			if multi != 0 && (single == 0 || multi < single) {
				e = l
				break
			}
			if single == 0 {
				return e
			}
			e--
		}
	}
	return e
}

// sqlInstr is SQLite's instrFunc: the position of the first Y in X
// (from 1; 0: none, 1 for an empty Y), in characters, or in bytes when
// both are BLOBs. SQLite steps through text a character at a time, a
// character being a byte and the continuation bytes (0x80-0xBF) after
// it, so a match starting on a continuation byte counts only at the very
// start.
func sqlInstr(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	if args[0] == nil || args[1] == nil {
		return nil, nil
	}
	hb, hBlob := args[0].([]byte)
	nb, nBlob := args[1].([]byte)
	if hBlob && nBlob {
		if len(nb) == 0 {
			return int64(1), nil
		}
		return int64(bytes.Index(hb, nb) + 1), nil
	}
	h, _ := sqliteText(args[0])
	n, _ := sqliteText(args[1])
	if len(n) == 0 {
		return int64(1), nil
	}
	if n[0]&0xC0 == 0x80 {
		if strings.HasPrefix(h, n) {
			return int64(1), nil
		}
		return int64(0), nil
	}
	p := strings.Index(h, n)
	if p < 0 {
		return int64(0), nil
	}
	chars := int64(1)
	for i := 1; i <= p; i++ {
		if h[i]&0xC0 != 0x80 {
			chars++
		}
	}
	return chars, nil
}

// replace is SQLite's replaceFunc: X with every Y replaced by Z, left to
// right, without overlaps, as bytes; X itself when Y is empty (or starts
// with a NUL byte, where SQLite's C string ends).
func (f sqlFuncs) replace(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	x, ok := sqliteText(args[0])
	if !ok {
		return nil, nil
	}
	y, ok := sqliteText(args[1])
	if !ok {
		return nil, nil
	}
	if len(y) == 0 || y[0] == 0 {
		return x, nil
	}
	z, ok := sqliteText(args[2])
	if !ok {
		return nil, nil
	}
	// SQLite allocates len(X)+1 bytes first, then fails when a
	// replacement takes the result over the limit.
	if len(x)+1 > f.maxLen {
		return f.tooBig()
	}
	if len(z) > len(y) && int64(len(x))+int64(strings.Count(x, y))*int64(len(z)-len(y)) > int64(f.maxLen) {
		return f.tooBig()
	}
	return strings.ReplaceAll(x, y, z), nil
}

// sqlUnhex is SQLite's unhexFunc with its second argument: the BLOB that
// the pairs of hexadecimal digits of X spell, ignoring the characters of
// Y between pairs; NULL if another character comes up or a pair is
// split. X ends at its first NUL byte, as a C string does. SQLite looks
// each character of X up in Y from Y's start, about an hour with 1
// MiB of each; here Y is a set.
func sqlUnhex(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	x, ok := sqliteText(args[0])
	if !ok {
		return nil, nil
	}
	y, ok := sqliteText(args[1])
	if !ok {
		return nil, nil
	}
	var ascii [128]bool
	var other map[uint32]bool
	for i := 0; i < len(y); {
		var c uint32
		c, i = utf8Read(y, i)
		if c < 128 {
			ascii[c] = true
		} else {
			if other == nil {
				other = map[uint32]bool{}
			}
			other[c] = true
		}
	}
	at := func(i int) byte { // x as a C string
		if i < len(x) {
			return x[i]
		}
		return 0
	}
	out := make([]byte, 0, len(x)/2)
	for i := 0; at(i) != 0; {
		c := at(i)
		for hexValue(c) < 0 {
			var ch uint32
			ch, i = utf8Read(x, i)
			if !(ch < 128 && ascii[ch] || ch >= 128 && other[ch]) {
				return nil, nil
			}
			if c = at(i); c == 0 {
				return out, nil
			}
		}
		d := at(i + 1)
		i += 2
		if hexValue(d) < 0 {
			return nil, nil
		}
		out = append(out, byte(hexValue(c)<<4|hexValue(d)))
	}
	return out, nil
}

func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// utf8Read is SQLite's sqlite3Utf8Read on s[i:] (then NUL-terminated):
// the character there and the index after it. A lead byte takes every
// continuation byte after it, whatever their number; a character that
// decodes below 0x80 or to a surrogate is U+FFFD; a continuation byte on
// its own is its own value.
func utf8Read(s string, i int) (uint32, int) {
	c := uint32(s[i])
	i++
	if c < 0xC0 {
		return c, i
	}
	switch {
	case c < 0xE0:
		c &= 0x1F
	case c < 0xF0:
		c &= 0x0F
	case c < 0xF8:
		c &= 0x07
	case c < 0xFC:
		c &= 0x03
	case c < 0xFE:
		c &= 0x01
	default:
		c = 0
	}
	for i < len(s) && s[i]&0xC0 == 0x80 {
		c = c<<6 + uint32(s[i]&0x3F)
		i++
	}
	if c < 0x80 || c&0xFFFFF800 == 0xD800 {
		c = 0xFFFD
	}
	return c, i
}

// sqliteText is v as sqlite3_value_text gives it to SQLite's functions:
// TEXT as it is, a BLOB's bytes as text, an INTEGER in decimal, a REAL as
// SQLite renders it; false for NULL. The result may be v's own memory.
func sqliteText(v driver.Value) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case []byte:
		if len(v) == 0 {
			return "", true
		}
		return unsafe.String(&v[0], len(v)), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return realText(v), true
	}
	return fmt.Sprint(v), true // the driver passes no other type
}

// realFormat is what realText needs to call SQLite's printf.
var realFormat struct {
	sync.Mutex
	tls             *libc.TLS
	format, buf, va uintptr
	err             error
}

// realText renders r as SQLite renders a REAL as text (CAST(r AS TEXT),
// sqlite3_value_text): its printf's "%!.17g" (17 digits, the default of
// SQLITE_DBCONFIG_FP_DIGITS), which SQLite shortens to 15 or 16 digits
// when those read back as r: 1.0 → "1.0", 0.1 → "0.1", 1e20 → "1.0e+20".
// Its decimal conversion is its own (1.0/3 → "0.33333333333333332" where
// the exact digits are …31), so SQLite renders it here too.
func realText(r float64) string {
	const size = 64 // the longest is 24 bytes, "-2.2250738585072014e-308"
	p := &realFormat
	p.Lock()
	defer p.Unlock()
	if p.tls == nil && p.err == nil {
		p.tls = libc.NewTLS()
		p.format, p.err = libc.CString("%!.17g")
		p.buf = libc.Xmalloc(p.tls, size)
		p.va = libc.NewVaListN(1)
		if p.err == nil && (p.buf == 0 || p.va == 0) {
			p.err = errors.New("out of memory")
		}
	}
	if p.err != nil {
		return strconv.FormatFloat(r, 'g', 17, 64) // close, if not SQLite's
	}
	libc.VaList(p.va, r)
	sqlite3.Xsqlite3_snprintf(p.tls, size, p.buf, p.format, p.va)
	return libc.GoString(p.buf)
}
