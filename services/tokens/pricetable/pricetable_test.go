package pricetable

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBuiltinTable validates the embedded table: every row parses, prices
// are non-negative, dates are real and not in the future, no model is
// priced twice, and every family the docs promise is there.
func TestBuiltinTable(t *testing.T) {
	prices, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	// Every non-comment, non-blank line below the header is a row.
	rows := 0
	for _, line := range strings.Split(string(builtinCSV), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			rows++
		}
	}
	if rows-1 != len(prices) {
		t.Fatalf("%d rows in prices.csv, %d parsed", rows-1, len(prices))
	}
	today := time.Now().UTC().Format(DateLayout)
	seen := map[string]bool{}
	for _, p := range prices {
		if seen[p.Model] {
			t.Errorf("%s priced twice", p.Model)
		}
		seen[p.Model] = true
		if p.Input < 0 || p.Output < 0 || (p.CachedInput != nil && (*p.CachedInput < 0 || *p.CachedInput > p.Input)) {
			t.Errorf("%s: prices %v/%v/%v", p.Model, p.Input, p.CachedInput, p.Output)
		}
		if p.Output < p.Input {
			t.Errorf("%s: output %v cheaper than input %v: columns swapped?", p.Model, p.Output, p.Input)
		}
		if err := CheckDate(p.AsOf); err != nil || p.AsOf > today {
			t.Errorf("%s: as_of %q (today %s): %v", p.Model, p.AsOf, today, err)
		}
		if p.MaxPromptTokens < 0 {
			t.Errorf("%s: max_prompt_tokens %d", p.Model, p.MaxPromptTokens)
		}
		if base, ok := SnapshotBase(p.Model); ok && seen[base] && p.Model != "gpt-4o-2024-05-13" {
			t.Logf("%s has a row of its own besides %s", p.Model, base)
		}
	}
	for _, m := range []string{
		"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o1", "o3", "o3-mini", "o4-mini", "gpt-3.5-turbo",
		"claude-3-haiku", "claude-3-opus", "claude-3-5-sonnet", "claude-3-5-haiku", "claude-3-7-sonnet", "claude-sonnet-4", "claude-opus-4",
		"gemini-1.5-pro", "gemini-1.5-flash", "gemini-2.0-flash", "gemini-2.0-flash-lite", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite",
		"deepseek-chat", "deepseek-reasoner", "qwen-max", "qwen-plus", "qwen-turbo",
	} {
		if !seen[m] {
			t.Errorf("%s has no built-in price", m)
		}
	}
	// Tiered prices carry their limit.
	tab := NewTable(prices)
	if p, _ := tab.Lookup("gemini-2.5-pro"); p.MaxPromptTokens != 200_000 {
		t.Errorf("gemini-2.5-pro tier limit %d, want 200000", p.MaxPromptTokens)
	}
}

func TestParse(t *testing.T) {
	const header = "model,input_usd_per_1m,cached_input_usd_per_1m,output_usd_per_1m,max_prompt_tokens,as_of\n"
	got, err := Parse([]byte("# comment\n" + header + "m1,1.5,0.5,2,1000,2025-01-02\n\nm2, 0 ,, 0 ,,2024-12-31\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Model != "m1" || got[0].Input != 1.5 || *got[0].CachedInput != 0.5 || got[0].Output != 2 ||
		got[0].MaxPromptTokens != 1000 || got[0].AsOf != "2025-01-02" || got[1].CachedInput != nil || got[1].MaxPromptTokens != 0 {
		t.Fatalf("Parse = %+v", got)
	}
	for name, tc := range map[string]struct{ csv, want string }{
		"empty":            {"", "header row is missing"},
		"only comments":    {"# x\n", "header row is missing"},
		"wrong header":     {"model,input\n", "wrong number of fields"},
		"renamed header":   {strings.Replace(header, "as_of", "date", 1), "price table header"},
		"field count":      {header + "m,1,,2,,2025-01-01,extra\n", "wrong number of fields"},
		"bad quote":        {header + "m\"x,1,,2,,2025-01-01\n", "bare \""},
		"negative":         {header + "m,-1,,2,,2025-01-01\n", "input_usd_per_1m: -1 must be between"},
		"NaN":              {header + "m,NaN,,2,,2025-01-01\n", `"NaN" is not a number`},
		"infinite":         {header + "m,1,,Inf,,2025-01-01\n", `"Inf" is not a number`},
		"huge":             {header + "m,1e9,,2,,2025-01-01\n", "must be between"},
		"not a number":     {header + "m,$1,,2,,2025-01-01\n", `"$1" is not a number`},
		"cached above":     {header + "m,1,2,2,,2025-01-01\n", "above the input price"},
		"limit":            {header + "m,1,,2,-5,2025-01-01\n", "max_prompt_tokens \"-5\""},
		"limit not int":    {header + "m,1,,2,2e5,2025-01-01\n", "max_prompt_tokens \"2e5\""},
		"date":             {header + "m,1,,2,,2025-02-30\n", `"2025-02-30" is not a date`},
		"date form":        {header + "m,1,,2,,2025-2-3\n", "is not a date"},
		"old date":         {header + "m,1,,2,,1999-01-01\n", "before 2020"},
		"upper-case model": {header + "GPT-4o,1,,2,,2025-01-01\n", "lower-case"},
		"glob model":       {header + "gpt-*,1,,2,,2025-01-01\n", "letters, digits"},
		"empty model":      {header + ",1,,2,,2025-01-01\n", `model ""`},
		"duplicate":        {header + "m,1,,2,,2025-01-01\nx,1,,1,,2025-01-01\nm,1,,2,,2025-01-01\n", `line 4: model "m" is already priced on line 2`},
		"invalid UTF-8":    {header + "m\xff,1,,2,,2025-01-01\n", "UTF-8"},
	} {
		if _, err := Parse([]byte(tc.csv)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	// Every bad row is reported, with its line.
	_, err = Parse([]byte(header + "a,-1,,1,,2025-01-01\nb,1,,1,,2025-01-01\nc,1,,1,,nope\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2:") || !strings.Contains(err.Error(), "line 4:") {
		t.Errorf("two bad rows: %v", err)
	}
	if _, err := Parse(bytes.Repeat([]byte("#"), MaxBytes+1)); err == nil {
		t.Error("an oversized table parsed")
	}
	var many strings.Builder
	many.WriteString(header)
	for i := range MaxRows + 1 {
		many.WriteString("m")
		many.WriteString(strings.Repeat("x", i%7))
		many.WriteString(string(rune('a' + i%26)))
		many.WriteString(",1,,1,,2025-01-01\n")
	}
	if _, err := Parse([]byte(many.String())); err == nil || !strings.Contains(err.Error(), "rows") {
		t.Errorf("too many rows: %v", err)
	}
}

func TestSnapshotBase(t *testing.T) {
	for name, want := range map[string]string{
		"gpt-4o-2024-08-06":             "gpt-4o",
		"gpt-4o-mini-2024-07-18":        "gpt-4o-mini",
		"o3-mini-2025-01-31":            "o3-mini",
		"claude-3-5-sonnet-20241022":    "claude-3-5-sonnet",
		"claude-sonnet-4-5-20250929":    "claude-sonnet-4-5",
		"claude-3-5-sonnet-v2@20241022": "claude-3-5-sonnet-v2",
		"claude-3-7-sonnet-latest":      "claude-3-7-sonnet",
		"gemini-1.5-pro-002":            "gemini-1.5-pro",
		"gemini-2.0-flash-001":          "gemini-2.0-flash",
		"qwen-max-2025-01-25":           "qwen-max",
		"gpt-3.5-turbo-1106":            "",
		"gpt-4o":                        "",
		"o1":                            "",
		"-latest":                       "",
		"-001":                          "",
		"-20241022":                     "",
		"-2024-08-06":                   "",
		"gpt-4o-2024-8-06":              "",
		"":                              "",
	} {
		got, ok := SnapshotBase(name)
		if got != want || ok != (want != "") {
			t.Errorf("SnapshotBase(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestTableLookup(t *testing.T) {
	prices, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	tab := NewTable(prices)
	for name, want := range map[string]string{
		"gpt-4o":                     "gpt-4o",
		"gpt-4o-2024-08-06":          "gpt-4o",
		"gpt-4o-2024-05-13":          "gpt-4o-2024-05-13", // its own, dearer, row
		"gpt-4o-mini-2024-07-18":     "gpt-4o-mini",
		"claude-3-5-sonnet-20240620": "claude-3-5-sonnet",
		"claude-opus-4-1-20250805":   "claude-opus-4-1",
		"gemini-1.5-pro-002":         "gemini-1.5-pro",
		"qwen-plus-latest":           "qwen-plus",
		"chatgpt-4o-latest":          "chatgpt-4o-latest",
		"gpt-4o-realtime-preview":    "",
		"gpt-3.5-turbo-0613":         "",
		"house-model":                "",
	} {
		p, ok := tab.Lookup(name)
		if p.Model != want || ok != (want != "") {
			t.Errorf("Lookup(%q) = %q, %v; want %q", name, p.Model, ok, want)
		}
	}
	if tab.Len() != len(prices) || len(tab.Models()) != len(prices) {
		t.Errorf("Len %d, Models %d, want %d", tab.Len(), len(tab.Models()), len(prices))
	}
	if _, ok := (Table{}).Lookup("gpt-4o"); ok {
		t.Error("the zero Table priced a model")
	}
}

// FuzzParsePrices checks the parser on any input: no panic, and a table it
// accepts holds only rows the rules allow, which parse back to the same
// table when written out again.
func FuzzParsePrices(f *testing.F) {
	// A few rows of the built-in table (the whole of it makes minimising a
	// new input needlessly slow).
	f.Add([]byte(strings.Join(Header, ",") + "\n# OpenAI\ngpt-4o,2.50,1.25,10.00,,2024-10-01\ngemini-2.5-pro,1.25,0.31,10.00,200000,2025-06-17\n"))
	f.Add([]byte(strings.Join(Header, ",") + "\nm,1,0.5,2,100,2025-01-01\n"))
	f.Add([]byte(strings.Join(Header, ",") + "\n\"m\",1,,2,,2025-01-01\n# c\n"))
	f.Add([]byte("model\n\"unterminated"))
	f.Fuzz(func(t *testing.T, data []byte) {
		prices, err := Parse(data)
		if err != nil {
			if prices != nil {
				t.Fatal("rows returned with an error")
			}
			return
		}
		seen := map[string]bool{}
		var out bytes.Buffer
		w := csv.NewWriter(&out)
		_ = w.Write(Header)
		for _, p := range prices {
			if CheckModel(p.Model) != nil || seen[p.Model] {
				t.Fatalf("accepted model %q", p.Model)
			}
			seen[p.Model] = true
			if CheckPrice(p.Input) != nil || CheckPrice(p.Output) != nil || p.MaxPromptTokens < 0 || CheckDate(p.AsOf) != nil {
				t.Fatalf("accepted row %+v", p)
			}
			cached := ""
			if p.CachedInput != nil {
				if CheckPrice(*p.CachedInput) != nil || *p.CachedInput > p.Input {
					t.Fatalf("accepted cached price %v", *p.CachedInput)
				}
				cached = formatFloat(*p.CachedInput)
			}
			_ = w.Write([]string{p.Model, formatFloat(p.Input), cached, formatFloat(p.Output), strconv.FormatInt(p.MaxPromptTokens, 10), p.AsOf})
		}
		w.Flush()
		again, err := Parse(out.Bytes())
		if err != nil || len(again) != len(prices) {
			t.Fatalf("round trip: %v (%d rows, want %d)\n%s", err, len(again), len(prices), out.Bytes())
		}
		for i := range again {
			a, b := again[i], prices[i]
			if a.Model != b.Model || a.Input != b.Input || a.Output != b.Output || a.MaxPromptTokens != b.MaxPromptTokens || a.AsOf != b.AsOf ||
				(a.CachedInput == nil) != (b.CachedInput == nil) || (a.CachedInput != nil && *a.CachedInput != *b.CachedInput) {
				t.Fatalf("round trip changed %+v to %+v", b, a)
			}
		}
	})
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
