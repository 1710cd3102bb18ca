package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestConvertCurrency(t *testing.T) {
	r := defaultRates()
	got, terr := convertCurrency(r, map[string]any{"amount": 100.0, "from": "eur", "to": "USD"})
	if terr != nil {
		t.Fatal(terr.Message)
	}
	m := got.(map[string]any)
	if m["converted"] != 104.0 || m["rate"] != 1.04 || m["from"] != "EUR" {
		t.Fatalf("100 EUR in USD = %v", m)
	}
	// Cross rate through the base, rounded to the target's minor unit.
	got, _ = convertCurrency(r, map[string]any{"amount": 10.0, "from": "USD", "to": "JPY"})
	if c := got.(map[string]any)["converted"]; c != 1567.0 { // 10 * 163/1.04 = 1567.3
		t.Fatalf("10 USD in JPY = %v, want 1567", c)
	}
	for name, args := range map[string]map[string]any{
		"no amount":     {"from": "EUR", "to": "USD"},
		"amount string": {"amount": "10", "from": "EUR", "to": "USD"},
		"bad code":      {"amount": 1.0, "from": "EURO", "to": "USD"},
		"huge":          {"amount": 1e300, "from": "EUR", "to": "USD"},
	} {
		if _, terr := convertCurrency(r, args); terr == nil || terr.Kind != "INVALID_PARAMETERS" {
			t.Errorf("%s: got %+v, want INVALID_PARAMETERS", name, terr)
		}
	}
	if _, terr := convertCurrency(r, map[string]any{"amount": 1.0, "from": "EUR", "to": "XAU"}); terr == nil || terr.Kind != "NOT_FOUND" {
		t.Errorf("unknown currency: got %+v, want NOT_FOUND", terr)
	}
}

func TestBusinessDays(t *testing.T) {
	cases := []struct {
		start, end string
		holidays   []any
		want       int64
	}{
		{"2025-01-06", "2025-01-10", nil, 5},                               // Monday to Friday
		{"2025-01-06", "2025-01-12", nil, 5},                               // to Sunday
		{"2025-01-04", "2025-01-05", nil, 0},                               // a weekend
		{"2025-01-01", "2025-01-31", []any{"2025-01-01"}, 22},              // January 2025 minus New Year
		{"2025-01-10", "2025-01-06", nil, -5},                              // reversed
		{"2024-02-26", "2024-03-01", []any{"2024-02-29", "2024-03-02"}, 4}, // leap day holiday; a Saturday holiday changes nothing
	}
	for _, c := range cases {
		args := map[string]any{"start": c.start, "end": c.end}
		if c.holidays != nil {
			args["holidays"] = c.holidays
		}
		got, terr := businessDays(args)
		if terr != nil {
			t.Fatalf("%v: %s", c, terr.Message)
		}
		if n := got.(map[string]any)["business_days"]; n != c.want {
			t.Errorf("%s..%s holidays %v: %v business days, want %d", c.start, c.end, c.holidays, n, c.want)
		}
	}
	if _, terr := businessDays(map[string]any{"start": "2025-13-01", "end": "2025-01-01"}); terr == nil {
		t.Error("month 13 accepted")
	}
	if _, terr := businessDays(map[string]any{"start": "1900-01-01", "end": "2200-01-01"}); terr == nil {
		t.Error("a 300-year range accepted")
	}
}

func TestAddBusinessDays(t *testing.T) {
	cases := []struct {
		start    string
		days     float64
		holidays []any
		want     string
	}{
		{"2025-01-10", 1, nil, "2025-01-13"},  // Friday + 1 = Monday
		{"2025-01-06", 5, nil, "2025-01-13"},  // a week
		{"2025-01-13", -1, nil, "2025-01-10"}, // back over a weekend
		{"2025-12-23", 2, []any{"2025-12-25", "2025-12-26"}, "2025-12-29"},
		{"2025-01-04", 0, nil, "2025-01-04"},
	}
	for _, c := range cases {
		args := map[string]any{"start": c.start, "days": c.days}
		if c.holidays != nil {
			args["holidays"] = c.holidays
		}
		got, terr := addBusinessDays(args)
		if terr != nil {
			t.Fatalf("%v: %s", c, terr.Message)
		}
		if d := got.(map[string]any)["date"]; d != c.want {
			t.Errorf("%s + %v: %v, want %s", c.start, c.days, d, c.want)
		}
	}
	if _, terr := addBusinessDays(map[string]any{"start": "2025-01-01", "days": 1.5}); terr == nil {
		t.Error("1.5 days accepted")
	}
}

func TestLoadRates(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"base":"USD","as_of":"2025-06-30","rates":{"EUR":0.85}}`), 0o600)
	r, err := loadRates(good)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.rate("EUR", "USD"); got < 1.176 || got > 1.177 {
		t.Fatalf("EUR->USD = %v", got)
	}
	for name, body := range map[string]string{
		"negative": `{"base":"USD","rates":{"EUR":-1}}`,
		"bad code": `{"base":"USD","rates":{"euro":1}}`,
		"unknown":  `{"base":"USD","rates":{"EUR":1},"extra":1}`,
		"base≠1":   `{"base":"USD","rates":{"USD":2}}`,
	} {
		p := filepath.Join(dir, "bad.json")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := loadRates(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProviderRPCs(t *testing.T) {
	p := newProvider(defaultRates(), slog.New(slog.DiscardHandler))
	d, _ := p.DescribeTools(context.Background(), &baagentv1.DescribeToolsRequest{})
	if len(d.GetTools()) != 3 {
		t.Fatalf("%d tools", len(d.GetTools()))
	}
	params, _ := structpb.NewStruct(map[string]any{"start": "2025-01-06", "end": "2025-01-10"})
	resp, err := p.ExecuteTool(context.Background(), &baagentv1.ExecuteToolRequest{ToolName: "business_days", Parameters: params})
	if err != nil {
		t.Fatal(err)
	}
	if n := resp.GetData().GetStructValue().GetFields()["business_days"].GetNumberValue(); n != 5 {
		t.Fatalf("business_days = %v", n)
	}
	resp, _ = p.ExecuteTool(context.Background(), &baagentv1.ExecuteToolRequest{ToolName: "nope"})
	if resp.GetError().GetType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND {
		t.Fatalf("unknown tool: %v", resp)
	}
	resp, _ = p.ExecuteTool(context.Background(), &baagentv1.ExecuteToolRequest{ToolName: "business_days"})
	if resp.GetError().GetType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS {
		t.Fatalf("missing args: %v", resp)
	}
	if _, err := p.ExecuteTool(context.Background(), &baagentv1.ExecuteToolRequest{}); err == nil {
		t.Fatal("empty tool_name accepted")
	}
}
