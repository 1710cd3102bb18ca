package postgres

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKeywordQuery(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "",
		"  \t ":                        "",
		"Acme":                         `"acme"`,
		"acme AND widgets":             `"acme" or "and" or "widgets"`,
		"nothing-matches-this":         `"nothing matches this"`,
		"name:acme":                    `"name" or "acme"`,
		`''; DROP TABLE x; --`:         `"drop" or "table" or "x"`,
		`-acme`:                        `"acme"`,
		`"acme`:                        `"acme"`,
		"acme acme ACME":               `"acme"`,
		"OR":                           `"or"`,
		"ö ü 日本語":                      `"ö" or "ü" or "日本語"`,
		"acme\x00widgets":              `"acme" or "widgets"`,
		"acme<->widgets | !norway & x": `"acme" or "widgets" or "norway" or "x"`,
	} {
		if got := keywordQuery(in); got != want {
			t.Errorf("keywordQuery(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("w", 1000)
	if got := keywordQuery(long); len(got) != maxTermLen+2 {
		t.Errorf("a long word makes a term of %d bytes", len(got))
	}
	var many []string
	for i := range 100 {
		many = append(many, "w"+strconv.Itoa(i))
	}
	if got := strings.Count(keywordQuery(strings.Join(many, " ")), " or "); got != maxQueryTerms-1 {
		t.Errorf("%d terms kept, want %d", got+1, maxQueryTerms)
	}
}

var queryShape = regexp.MustCompile(`^("[\p{L}\p{N}]+( [\p{L}\p{N}]+)*"( or "[\p{L}\p{N}]+( [\p{L}\p{N}]+)*")*)?$`)

// FuzzKeywordQuery: whatever the text, the query is quoted words joined by
// " or " — no operator, quote or other syntax of its own — and valid UTF-8.
func FuzzKeywordQuery(f *testing.F) {
	for _, s := range []string{"", "acme", `"`, `a" or "b`, "-x", "a-b-c", "日本語 テスト", "\xff\xfe", "acme\x00", "or or or", `\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := keywordQuery(s)
		if !utf8.ValidString(q) {
			t.Fatalf("invalid UTF-8 from %q: %q", s, q)
		}
		if !queryShape.MatchString(q) {
			t.Fatalf("keywordQuery(%q) = %q: not quoted words joined by or", s, q)
		}
		if n := strings.Count(q, `"`) / 2; n > maxQueryTerms {
			t.Fatalf("%d terms", n)
		}
	})
}

func TestVectorLiteral(t *testing.T) {
	for _, c := range []struct {
		in   []float32
		want string
	}{
		{nil, "[]"},
		{[]float32{1, -0.5, 0}, "[1,-0.5,0]"},
		{[]float32{float32(math.NaN()), float32(math.Inf(1)), 0.25}, "[0,0,0.25]"},
		{[]float32{1e-7}, "[1e-07]"},
	} {
		if got := vectorLiteral(c.in); got != c.want {
			t.Errorf("vectorLiteral(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzVectorLiteral: the literal is pgvector's text form — bracketed,
// comma-separated finite numbers, one per element, each reading back as
// the element (or 0 for a non-finite one).
func FuzzVectorLiteral(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 191})
	f.Add([]byte{0, 0, 192, 127})
	f.Fuzz(func(t *testing.T, b []byte) {
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
		}
		lit := vectorLiteral(v)
		if !strings.HasPrefix(lit, "[") || !strings.HasSuffix(lit, "]") {
			t.Fatalf("not bracketed: %q", lit)
		}
		body := lit[1 : len(lit)-1]
		if len(v) == 0 {
			if body != "" {
				t.Fatalf("empty vector as %q", lit)
			}
			return
		}
		parts := strings.Split(body, ",")
		if len(parts) != len(v) {
			t.Fatalf("%d numbers for %d elements: %q", len(parts), len(v), lit)
		}
		for i, p := range parts {
			x, err := strconv.ParseFloat(p, 32)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("element %d %q: %v", i, p, err)
			}
			want := v[i]
			if math.IsNaN(float64(want)) || math.IsInf(float64(want), 0) {
				want = 0
			}
			if float32(x) != want {
				t.Fatalf("element %d reads back %v, want %v", i, float32(x), want)
			}
		}
	})
}

func TestPgvectorSQL(t *testing.T) {
	idx := hnswIndexSQL(384)
	for _, want := range []string{"USING hnsw", "(embedding_vec::vector(384)) vector_cosine_ops", "WHERE vector_dims(embedding_vec) = 384", "memory_entities_hnsw_384"} {
		if !strings.Contains(idx, want) {
			t.Errorf("index SQL lacks %q:\n%s", want, idx)
		}
	}
	q := pgvectorSearchSQL(384)
	for _, want := range []string{"tenant = $1", "ORDER BY embedding_vec::vector(384) <=> $2::vector(384)", "LIMIT $3", "type = ANY($4)", "1 - (embedding_vec::vector(384) <=> $2::vector(384))", "vector_dims(embedding_vec) = 384"} {
		if !strings.Contains(q, want) {
			t.Errorf("search SQL lacks %q:\n%s", want, q)
		}
	}
	if strings.Count(q, "$") != 6 {
		t.Errorf("search SQL takes other parameters than tenant, vector, k, types:\n%s", q)
	}
	if !strings.Contains(pgvectorColumnSQL, "ADD COLUMN embedding_vec vector") || !strings.Contains(pgvectorColumnSQL, "embedding::vector") {
		t.Errorf("column SQL:\n%s", pgvectorColumnSQL)
	}
}

func TestPageToken(t *testing.T) {
	for _, c := range [][2]string{{"", "x"}, {"alpha", "en_1"}, {"1733360000000000000", "ep_9"}, {"a\x00b", "日本"}} {
		tok := encodeToken(c[0], c[1])
		k, id, err := decodeToken(tok)
		if err != nil || k != c[0] || id != c[1] {
			t.Errorf("round trip %q: %q %q %v", c, k, id, err)
		}
	}
	for _, bad := range []string{"", "!!!", "AAAA", "AAAAAQ", strings.Repeat("A", 5000)} {
		if _, _, err := decodeToken(bad); err == nil {
			t.Errorf("decodeToken(%q) accepted", bad)
		}
	}
}

// FuzzDecodeToken: any token decodes or is refused, without panicking, and
// what decodes encodes back to the same token.
func FuzzDecodeToken(f *testing.F) {
	f.Add(encodeToken("alpha", "en_1"))
	f.Add("AAAAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		k, id, err := decodeToken(tok)
		if err != nil {
			return
		}
		if id == "" {
			t.Fatal("empty id accepted")
		}
		if again := encodeToken(k, id); again != tok {
			k2, id2, err := decodeToken(again)
			if err != nil || k2 != k || id2 != id {
				t.Fatalf("re-encoding %q gives %q", tok, again)
			}
		}
	})
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := newID("en_")
		if len(id) != 29 || !strings.HasPrefix(id, "en_") {
			t.Fatalf("id %q", id)
		}
		for _, r := range id[3:] {
			if !strings.ContainsRune(crockford, r) {
				t.Fatalf("id %q has %q", id, r)
			}
		}
		if seen[id] {
			t.Fatalf("repeated id %q", id)
		}
		seen[id] = true
		if id[3:13] < prev {
			t.Fatalf("time part went back: %q after %q", id[3:13], prev)
		}
		prev = id[3:13]
	}
}

func TestValidText(t *testing.T) {
	if !validText("acme", "日本", "") || validText("a\x00") || validText("\xff") {
		t.Fatal("validText")
	}
	if got := validIDs([]string{"a", "b\x00", "\xfe", "c"}); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("validIDs = %v", got)
	}
	if got := cleanText("a\x00b\xffc"); got != "ab\uFFFDc" {
		t.Fatalf("cleanText = %q", got)
	}
}
