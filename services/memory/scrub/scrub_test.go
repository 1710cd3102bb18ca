package scrub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScrubReplacesPersonalDataAndSecrets(t *testing.T) {
	cases := []struct {
		name, in, want string
		n              int
	}{
		{"email", "write to jane.doe+sales@example.co.uk today", "write to [EMAIL] today", 1},
		{"two emails", "a@b.io, c_d@sub.example.com", "[EMAIL], [EMAIL]", 2},
		{"phone intl", "call +44 20 7946 0958 now", "call [PHONE] now", 1},
		{"phone intl compact", "tel:+14155552671.", "tel:[PHONE].", 1},
		{"phone intl parens", "ring +49 (0)30 1234567", "ring [PHONE]", 1},
		{"phone nanp dashes", "cell 415-555-2671", "cell [PHONE]", 1},
		{"phone nanp parens", "office (415) 555-2671, ext 3", "office [PHONE], ext 3", 1},
		{"phone nanp dots", "415.555.2671", "[PHONE]", 1},
		{"phone nanp country", "1-800-555-0199", "[PHONE]", 1},
		{"phone uk national", "landline 020 7946 0958", "landline [PHONE]", 1},
		{"phone uk mobile", "mobile 07700 900123", "mobile [PHONE]", 1},
		{"phone de", "Büro 030/1234567", "Büro [PHONE]", 1},
		{"phone fr", "bureau 01 23 45 67 89", "bureau [PHONE]", 1},
		{"card visa spaces", "card 4111 1111 1111 1111 exp", "card [CARD] exp", 1},
		{"card mc dashes", "5555-5555-5555-4444", "[CARD]", 1},
		{"card amex", "amex 378282246310005", "amex [CARD]", 1},
		{"card amex grouped", "3782 822463 10005", "[CARD]", 1},
		{"openai key", "OPENAI_API_KEY is sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "OPENAI_API_KEY is [SECRET]", 1},
		{"anthropic key", "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz_0123456789-ABCD", "key [SECRET]", 1},
		{"aws key", "AKIAIOSFODNN7EXAMPLE in config", "[SECRET] in config", 1},
		{"github pat classic", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "[SECRET]", 1},
		{"github oauth", "token gho_1234567890abcdefghijklmnopqrstuvwxyzAB", "token [SECRET]", 1},
		{"github fine grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[SECRET]", 1},
		{"slack", "xoxb-123456789012-1234567890123-AbCdEfGhIjKl", "[SECRET]", 1},
		{"google", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "[SECRET]", 1},
		{"jwt", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end", "jwt [SECRET] end", 1},
		{"bearer", "Authorization: Bearer abc123.def456-ghi", "Authorization: Bearer [SECRET]", 1},
		{"password assignment", "password=hunter2 and user=bob", "password=[SECRET] and user=bob", 1},
		{"api_key colon", "api_key: 9f8e7d6c5b", "api_key: [SECRET]", 1},
		{"json secret", `{"password": "correct horse battery", "user": "x"}`, `{"password": "[SECRET]", "user": "x"}`, 1},
		{"quoted single", "API-KEY='abc def'", "API-KEY='[SECRET]'", 1},
		{"pem", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc+/=\n-----END RSA PRIVATE KEY-----\nafter", "key:\n[SECRET]\nafter", 1},
		{"pem unterminated", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "[SECRET]", 1},
		{"mixed", "Jane (jane@acme.io, +1 415 555 2671) paid with 4242424242424242.", "Jane ([EMAIL], [PHONE]) paid with [CARD].", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, n := Scrub(c.in)
			if got != c.want || n != c.n {
				t.Fatalf("Scrub(%q) = %q, %d; want %q, %d", c.in, got, n, c.want, c.n)
			}
			again, n2 := Scrub(got)
			if again != got || n2 != 0 {
				t.Fatalf("not idempotent: Scrub(%q) = %q, %d", got, again, n2)
			}
		})
	}
}

func TestScrubLeavesBusinessDataAlone(t *testing.T) {
	keep := []string{
		"order 1364 on 2025-01-01 for customer 88, product 11, quantity 4 at 1116.00",
		"Revenue was 1,234,567.89 USD in Q3 2026 (up 12.5%)",
		"SELECT region, SUM(quantity * unit_price) AS revenue FROM orders WHERE order_date BETWEEN '2026-07-01' AND '2026-09-30' GROUP BY region",
		"dates 01/02/2026, 2026-07-18, 18.07.2026, 12:30:00, 2026-07-18T12:30:00Z",
		"ranges 2025-2026, 100-200, 1000-2000-3000",
		"order ids 100234, 4000123, 20260718001 and invoice INV-2026-000123",
		"timestamp 1733372400000 ms and 1733372400 s",
		"amounts $4,299.00, €2 499,00, 349.00, 1 200 000",
		"a 16-digit id that fails Luhn: 4111111111111112",
		"version 1.2.3.4 and ip 192.168.1.10",
		"UPS 1500VA, NAS Storage 32TB, Managed Switch 24p",
		"the tokens: 512 prompt and 128 completion", // "tokens" is not "token"
		"Treasury bearer bonds were issued",
		"+15% growth, +3.5 points",
		"product 0 of 30, ratio 0.123456789",
		"user@localhost is not an address with a domain",
	}
	for _, s := range keep {
		if got, n := Scrub(s); got != s || n != 0 {
			t.Errorf("Scrub(%q) = %q, %d; want it unchanged", s, got, n)
		}
	}
}

// The sample data and every shipped scenario (questions, SQL, answers)
// hold no personal data or secrets, so scrubbing must leave them intact.
func TestScrubLeavesSampleDataAndScenariosAlone(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var files []string
	for _, g := range []string{"examples/data/*.csv", "examples/scenarios/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %d sample files under %s", len(files), root)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range Find(string(data)) {
			t.Errorf("%s: %q would become %s", f, string(data)[m.Start:m.End], m.Placeholder)
		}
	}
}

func TestLuhn(t *testing.T) {
	for _, d := range []string{"4111111111111111", "378282246310005", "6011111111111117", "79927398713"} {
		if !luhn(d) {
			t.Errorf("luhn(%s) = false", d)
		}
	}
	for _, d := range []string{"4111111111111112", "1234567812345678"} {
		if luhn(d) {
			t.Errorf("luhn(%s) = true", d)
		}
	}
}

func TestFindReportsSpans(t *testing.T) {
	s := "x a@b.io y 4111111111111111"
	ms := Find(s)
	if len(ms) != 2 {
		t.Fatalf("Find = %+v", ms)
	}
	if s[ms[0].Start:ms[0].End] != "a@b.io" || ms[0].Placeholder != Email {
		t.Errorf("first match %+v", ms[0])
	}
	if s[ms[1].Start:ms[1].End] != "4111111111111111" || ms[1].Placeholder != Card {
		t.Errorf("second match %+v", ms[1])
	}
}

func FuzzScrub(f *testing.F) {
	for _, s := range []string{
		"", "jane@example.com", "+44 20 7946 0958", "4111 1111 1111 1111", "password=x",
		"Bearer abcdefgh1", "sk-ant-aaaaaaaaaaaaaaaaaaaaaaaaa", "-----BEGIN PRIVATE KEY-----\nabc",
		"a@b.co@c.de", "(415) 555-2671", "01 23 45 67 89", "token: [SECRET]x",
		"eyJabcdefghij.eyJabcdefghij.abcdefghij", "2026-07-18 order 1234",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, n := Scrub(in)
		if n == 0 && out != in {
			t.Fatalf("no replacement reported but %q became %q", in, out)
		}
		again, n2 := Scrub(out)
		if again != out || n2 != 0 {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		if ms := Find(out); len(ms) != 0 {
			t.Fatalf("output %q still contains %q", out, out[ms[0].Start:ms[0].End])
		}
		// A value detected in the input does not survive where it was.
		for _, m := range Find(in) {
			v := in[m.Start:m.End]
			if len(v) >= 12 && strings.Count(out, v) >= strings.Count(in, v) {
				t.Fatalf("detected value %q survived in %q", v, out)
			}
		}
	})
}

func BenchmarkScrub(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString("The customer Blue Retail (SMB, South) ordered 4 x Rack Server S10 at 2499.00 on 2026-07-18; ")
		sb.WriteString("SELECT region, SUM(quantity * unit_price) FROM orders GROUP BY region; ")
		sb.WriteString("contact jane.doe@example.com or +44 20 7946 0958, card 4111 1111 1111 1111, api_key=abc123.\n")
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Scrub(text)
	}
}

func BenchmarkScrubClean(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "data", "orders.csv"))
	if err != nil {
		b.Skip(err)
	}
	text := string(data)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Scrub(text)
	}
}
