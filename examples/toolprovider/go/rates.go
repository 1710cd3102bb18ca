package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
)

// rateTable converts between currencies through one base currency: Rates[c]
// is how many units of c one unit of Base buys.
type rateTable struct {
	Base   string             `json:"base"`
	AsOf   string             `json:"as_of"`
	Source string             `json:"source"`
	Rates  map[string]float64 `json:"rates"`
}

// defaultRates is a fixed sample table so that the example gives the same
// answer everywhere (tests, demos, scripted scenarios). The figures are
// rounded approximations of early-2025 levels, NOT market data: every result
// names this source, and a deployment passes -rates-file with its treasury's
// rates.
func defaultRates() rateTable {
	return rateTable{
		Base:   "EUR",
		AsOf:   "2025-01-02",
		Source: "built-in sample table (approximate, not market data; pass a rates file for real rates)",
		Rates: map[string]float64{
			"EUR": 1,
			"USD": 1.04,
			"GBP": 0.83,
			"JPY": 163.0,
			"CHF": 0.94,
			"CNY": 7.60,
			"CAD": 1.49,
			"AUD": 1.66,
			"SEK": 11.5,
			"INR": 89.0,
		},
	}
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// loadRates reads a rate table from a JSON file and checks it.
func loadRates(path string) (rateTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return rateTable{}, err
	}
	defer f.Close()
	var t rateTable
	dec := json.NewDecoder(io.LimitReader(f, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return rateTable{}, fmt.Errorf("rates file %s: %w", path, err)
	}
	if t.Source == "" {
		t.Source = path
	}
	if err := t.check(); err != nil {
		return rateTable{}, fmt.Errorf("rates file %s: %w", path, err)
	}
	return t, nil
}

func (t rateTable) check() error {
	if !currencyCode.MatchString(t.Base) {
		return fmt.Errorf("base: %q is not an ISO 4217 code", t.Base)
	}
	if r, ok := t.Rates[t.Base]; ok && r != 1 {
		return fmt.Errorf("rates.%s: the base currency's rate must be 1", t.Base)
	}
	if len(t.Rates) == 0 {
		return fmt.Errorf("rates: empty")
	}
	for c, r := range t.Rates {
		if !currencyCode.MatchString(c) {
			return fmt.Errorf("rates: %q is not an ISO 4217 code", c)
		}
		if !(r > 0) || r > 1e9 {
			return fmt.Errorf("rates.%s: must be a positive number", c)
		}
	}
	return nil
}

// rate is the number of units of `to` one unit of `from` buys.
func (t rateTable) rate(from, to string) (float64, bool) {
	rf, okf := t.lookup(from)
	rt, okt := t.lookup(to)
	if !okf || !okt {
		return 0, false
	}
	return rt / rf, true
}

func (t rateTable) lookup(c string) (float64, bool) {
	if c == t.Base {
		return 1, true
	}
	r, ok := t.Rates[c]
	return r, ok
}
