// Package pricetable is the tokens service's built-in table of model list
// prices (prices.csv, embedded) and the parser of its CSV format.
//
// A row is one model's price in USD per million tokens: input, cached input
// (optional), output, the prompt size the price holds for (optional) and the
// date of the price:
//
//	model,input_usd_per_1m,cached_input_usd_per_1m,output_usd_per_1m,max_prompt_tokens,as_of
//	gemini-2.5-pro,1.25,0.31,10.00,200000,2025-06-17
//
// Lines starting with '#' are comments; the header row is required and exact.
// The table is strict: an invalid row or a duplicate model is an error, so a
// typo cannot turn into a wrong bill.
package pricetable

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

//go:embed prices.csv
var builtinCSV []byte

// Limits of a table.
const (
	// MaxBytes bounds a table's size.
	MaxBytes = 1 << 20
	// MaxRows bounds its rows.
	MaxRows = 10_000
	// MaxPrice bounds a price, USD per 1M tokens: larger is a typo.
	MaxPrice = 100_000.0
	// maxModelLen bounds a model name, as token_encoders.yaml keys are.
	maxModelLen = 256
)

// DateLayout is the layout of as_of: YYYY-MM-DD.
const DateLayout = time.DateOnly

// Header is the required first row.
var Header = []string{"model", "input_usd_per_1m", "cached_input_usd_per_1m", "output_usd_per_1m", "max_prompt_tokens", "as_of"}

// Price is one model's list price. Prices are USD per 1M tokens.
type Price struct {
	// Model is the exact, lower-case model name.
	Model string
	// Input is the price of an uncached prompt token.
	Input float64
	// CachedInput is the price of a prompt token served from the prompt
	// cache; nil when the provider lists none.
	CachedInput *float64
	// Output is the price of a completion token.
	Output float64
	// MaxPromptTokens is the largest prompt the price holds for; 0 for no
	// limit.
	MaxPromptTokens int64
	// AsOf is the date of the price, YYYY-MM-DD.
	AsOf string
}

// Builtin is the embedded table, parsed once. The table is validated by
// its unit test, so an error here means a broken build.
var Builtin = sync.OnceValues(func() ([]Price, error) {
	p, err := Parse(builtinCSV)
	if err != nil {
		return nil, fmt.Errorf("built-in price table: %w", err)
	}
	return p, nil
})

// Parse reads a price table. It reports every invalid row at once, each
// with its line number.
func Parse(data []byte) ([]Price, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("price table larger than %d bytes", MaxBytes)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("price table is not valid UTF-8")
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.FieldsPerRecord = len(Header)
	r.ReuseRecord = true
	header, err := r.Read()
	switch {
	case errors.Is(err, io.EOF):
		return nil, errors.New("price table is empty: the header row is missing")
	case err != nil:
		return nil, fmt.Errorf("price table header: %w", err)
	case !slices.Equal(header, Header):
		return nil, fmt.Errorf("price table header %q, want %q", strings.Join(header, ","), strings.Join(Header, ","))
	}
	var (
		out  []Price
		errs []error
		seen = map[string]int{} // model -> line
	)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A malformed line (quotes, field count): csv reports its line.
			errs = append(errs, err)
			var pe *csv.ParseError
			if !errors.As(err, &pe) || pe.Err != csv.ErrFieldCount {
				break // the reader cannot resynchronise after a quoting error
			}
			continue
		}
		line, _ := r.FieldPos(0)
		if len(out)+len(errs) >= MaxRows {
			errs = append(errs, fmt.Errorf("line %d: more than %d rows", line, MaxRows))
			break
		}
		p, err := parseRow(rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		if prev, dup := seen[p.Model]; dup {
			errs = append(errs, fmt.Errorf("line %d: model %q is already priced on line %d", line, p.Model, prev))
			continue
		}
		seen[p.Model] = line
		out = append(out, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func parseRow(rec []string) (Price, error) {
	var errs []error
	model := strings.TrimSpace(rec[0])
	if err := CheckModel(model); err != nil {
		errs = append(errs, err)
	}
	input, err := ParsePrice(rec[1])
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", Header[1], err))
	}
	var cached *float64
	if s := strings.TrimSpace(rec[2]); s != "" {
		c, err := ParsePrice(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", Header[2], err))
		case c > input:
			errs = append(errs, fmt.Errorf("%s %v is above the input price %v", Header[2], c, input))
		default:
			cached = &c
		}
	}
	output, err := ParsePrice(rec[3])
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", Header[3], err))
	}
	var limit int64
	if s := strings.TrimSpace(rec[4]); s != "" {
		limit, err = strconv.ParseInt(s, 10, 64)
		if err != nil || limit < 0 {
			errs = append(errs, fmt.Errorf("%s %q must be a non-negative integer", Header[4], s))
		}
	}
	asOf := strings.TrimSpace(rec[5])
	if err := CheckDate(asOf); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", Header[5], err))
	}
	if err := errors.Join(errs...); err != nil {
		return Price{}, err
	}
	return Price{Model: model, Input: input, CachedInput: cached, Output: output, MaxPromptTokens: limit, AsOf: asOf}, nil
}

// ParsePrice parses one price: a finite decimal number from 0 to [MaxPrice].
func ParsePrice(s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if err := CheckPrice(v); err != nil {
		return 0, err
	}
	return v, nil
}

// CheckPrice accepts a finite price from 0 to [MaxPrice] USD per 1M tokens.
func CheckPrice(v float64) error {
	if !(v >= 0 && v <= MaxPrice) {
		return fmt.Errorf("%v must be between 0 and %v USD per 1M tokens", v, MaxPrice)
	}
	return nil
}

// CheckDate accepts a real calendar date in YYYY-MM-DD form from 2020 on.
func CheckDate(s string) error {
	d, err := time.Parse(DateLayout, s)
	if err != nil || d.Format(DateLayout) != s {
		return fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
	}
	if d.Year() < 2020 {
		return fmt.Errorf("%q is before 2020", s)
	}
	return nil
}

// CheckModel accepts an exact model name: 1-256 characters, each a
// lower-case letter, a digit or one of . _ - : / @ + (as in gpt-4o,
// qwen2.5:7b, ft:gpt-4o-mini:org::id or claude-3-5-sonnet-v2@20241022).
func CheckModel(m string) error {
	if m == "" || len(m) > maxModelLen || strings.IndexFunc(m, func(r rune) bool { return !modelRune(r) }) >= 0 {
		return fmt.Errorf("model %q must be an exact lower-case name of 1-%d letters, digits and . _ - : / @ +", m, maxModelLen)
	}
	return nil
}

func modelRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:/@+", r)
}

// Table is a price table indexed by model name. The zero Table is empty.
// It is immutable and safe for concurrent use.
type Table struct {
	byModel map[string]Price
}

// NewTable indexes prices by model name; for a name given twice, the last
// row wins.
func NewTable(prices []Price) Table {
	t := Table{byModel: make(map[string]Price, len(prices))}
	for _, p := range prices {
		t.byModel[strings.ToLower(p.Model)] = p
	}
	return t
}

// Len is the number of models priced.
func (t Table) Len() int { return len(t.byModel) }

// Models lists the priced model names, sorted.
func (t Table) Models() []string {
	out := make([]string, 0, len(t.byModel))
	for m := range t.byModel {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Lookup finds the price of a lower-cased model name: its own row, else the
// row of its [SnapshotBase] (gpt-4o for gpt-4o-2024-08-06).
func (t Table) Lookup(lower string) (Price, bool) {
	if p, ok := t.byModel[lower]; ok {
		return p, true
	}
	if base, ok := SnapshotBase(lower); ok {
		p, ok := t.byModel[base]
		return p, ok
	}
	return Price{}, false
}

// SnapshotBase strips one snapshot suffix from a model name: a date
// (-2024-08-06, -20241022 or @20241022), -latest, or a three-digit version
// (-002). It reports false when the name has none. A four-digit suffix
// (gpt-3.5-turbo-1106) is not stripped: those snapshots had prices of their
// own.
func SnapshotBase(name string) (string, bool) {
	n := len(name)
	switch {
	case n > 11 && name[n-11] == '-' && digits(name[n-10:n-6]) && name[n-6] == '-' && digits(name[n-5:n-3]) && name[n-3] == '-' && digits(name[n-2:]):
		return name[:n-11], true
	case n > 9 && (name[n-9] == '-' || name[n-9] == '@') && digits(name[n-8:]):
		return name[:n-9], true
	case n > 7 && strings.HasSuffix(name, "-latest"):
		return name[:n-7], true
	case n > 4 && name[n-4] == '-' && digits(name[n-3:]):
		return name[:n-4], true
	}
	return "", false
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
