package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// toolError is a failure the provider reports as a typed ToolError; Kind is
// the ToolErrorType name without its prefix (INVALID_PARAMETERS, ...).
type toolError struct {
	Kind    string
	Code    string
	Message string
}

func invalid(format string, args ...any) *toolError {
	return &toolError{Kind: "INVALID_PARAMETERS", Code: "INVALID_PARAMETERS", Message: fmt.Sprintf(format, args...)}
}

// Limits that keep every call cheap.
const (
	maxAmount     = 1e15
	maxSpanDays   = 200 * 366
	maxOffsetDays = 100_000
	maxHolidays   = 1000
	dateLayout    = time.DateOnly
	zeroDecimals  = 0
	twoDecimals   = 2
)

// zeroDecimalCurrencies have no minor unit (ISO 4217 exponent 0).
var zeroDecimalCurrencies = []string{"JPY", "KRW", "ISK", "CLP", "VND"}

// convertCurrency converts args.amount from args.from to args.to.
func convertCurrency(rates rateTable, args map[string]any) (any, *toolError) {
	amount, err := number(args, "amount")
	if err != nil {
		return nil, err
	}
	if math.Abs(amount) > maxAmount {
		return nil, invalid("amount: must be at most %g in absolute value", maxAmount)
	}
	from, err := currency(args, "from")
	if err != nil {
		return nil, err
	}
	to, err := currency(args, "to")
	if err != nil {
		return nil, err
	}
	rate, ok := rates.rate(from, to)
	if !ok {
		missing := from
		if _, ok := rates.lookup(from); ok {
			missing = to
		}
		return nil, &toolError{Kind: "NOT_FOUND", Code: "UNKNOWN_CURRENCY", Message: fmt.Sprintf("no rate for %s; known: %s", missing, strings.Join(rates.codes(), ", "))}
	}
	return map[string]any{
		"amount":      amount,
		"from":        from,
		"to":          to,
		"rate":        round(rate, 6),
		"converted":   round(amount*rate, minorUnits(to)),
		"rates_as_of": rates.AsOf,
		"rate_source": rates.Source,
	}, nil
}

func (t rateTable) codes() []string {
	out := []string{t.Base}
	for c := range t.Rates {
		if c != t.Base {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func minorUnits(c string) int {
	if slices.Contains(zeroDecimalCurrencies, c) {
		return zeroDecimals
	}
	return twoDecimals
}

func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// businessDays counts Monday-Friday dates from start to end, both included,
// that are not holidays (as spreadsheet NETWORKDAYS does); when end is before
// start the count is negative.
func businessDays(args map[string]any) (any, *toolError) {
	start, err := date(args, "start")
	if err != nil {
		return nil, err
	}
	end, err := date(args, "end")
	if err != nil {
		return nil, err
	}
	holidays, err := holidaySet(args)
	if err != nil {
		return nil, err
	}
	sign := 1
	lo, hi := start, end
	if end.Before(start) {
		sign, lo, hi = -1, end, start
	}
	span := int(hi.Sub(lo).Hours()/24) + 1
	if span > maxSpanDays {
		return nil, invalid("end: the range must be at most %d days", maxSpanDays)
	}
	var workdays, weekend, holidayCount int
	for d := lo; !d.After(hi); d = d.AddDate(0, 0, 1) {
		switch {
		case isWeekend(d):
			weekend++
		case holidays[d]:
			holidayCount++
		default:
			workdays++
		}
	}
	return map[string]any{
		"start":             start.Format(dateLayout),
		"end":               end.Format(dateLayout),
		"business_days":     int64(sign * workdays),
		"calendar_days":     int64(sign * span),
		"weekend_days":      int64(weekend),
		"holidays_excluded": int64(holidayCount),
	}, nil
}

// addBusinessDays returns the date `days` working days after start (before,
// when negative), skipping weekends and holidays; start itself is not
// counted (as spreadsheet WORKDAY does).
func addBusinessDays(args map[string]any) (any, *toolError) {
	start, err := date(args, "start")
	if err != nil {
		return nil, err
	}
	n, err := integer(args, "days")
	if err != nil {
		return nil, err
	}
	if n < -maxOffsetDays || n > maxOffsetDays {
		return nil, invalid("days: must be between %d and %d", -maxOffsetDays, maxOffsetDays)
	}
	holidays, err := holidaySet(args)
	if err != nil {
		return nil, err
	}
	step := 1
	if n < 0 {
		step = -1
	}
	d := start
	for left := n * int64(step); left > 0; {
		d = d.AddDate(0, 0, step)
		if !isWeekend(d) && !holidays[d] {
			left--
		}
	}
	return map[string]any{
		"start":   start.Format(dateLayout),
		"days":    n,
		"date":    d.Format(dateLayout),
		"weekday": d.Weekday().String(),
	}, nil
}

func isWeekend(d time.Time) bool {
	return d.Weekday() == time.Saturday || d.Weekday() == time.Sunday
}

func number(args map[string]any, key string) (float64, *toolError) {
	v, ok := args[key]
	if !ok {
		return 0, invalid("%s: required", key)
	}
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, invalid("%s: must be a number", key)
	}
	return f, nil
}

func integer(args map[string]any, key string) (int64, *toolError) {
	f, err := number(args, key)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, invalid("%s: must be a whole number", key)
	}
	return int64(f), nil
}

func currency(args map[string]any, key string) (string, *toolError) {
	s, ok := args[key].(string)
	if !ok {
		return "", invalid("%s: required, a three-letter currency code such as EUR", key)
	}
	c := strings.ToUpper(strings.TrimSpace(s))
	if !currencyCode.MatchString(c) {
		return "", invalid("%s: %q is not a three-letter currency code", key, clip(s))
	}
	return c, nil
}

func date(args map[string]any, key string) (time.Time, *toolError) {
	s, ok := args[key].(string)
	if !ok {
		return time.Time{}, invalid("%s: required, a date as YYYY-MM-DD", key)
	}
	return parseDate(key, s)
}

func parseDate(field, s string) (time.Time, *toolError) {
	d, err := time.Parse(dateLayout, s)
	if err != nil {
		return time.Time{}, invalid("%s: %q is not a date as YYYY-MM-DD", field, clip(s))
	}
	if d.Year() < 1900 || d.Year() > 2200 {
		return time.Time{}, invalid("%s: the year must be between 1900 and 2200", field)
	}
	return d, nil
}

func holidaySet(args map[string]any) (map[time.Time]bool, *toolError) {
	raw, ok := args["holidays"]
	if !ok || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, invalid("holidays: must be a list of dates as YYYY-MM-DD")
	}
	if len(list) > maxHolidays {
		return nil, invalid("holidays: at most %d dates", maxHolidays)
	}
	set := make(map[time.Time]bool, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, invalid("holidays[%d]: must be a date as YYYY-MM-DD", i)
		}
		d, err := parseDate(fmt.Sprintf("holidays[%d]", i), s)
		if err != nil {
			return nil, err
		}
		set[d] = true
	}
	return set, nil
}

func clip(s string) string {
	r := []rune(s)
	if len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}
