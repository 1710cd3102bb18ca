package validate

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ruleCase is one check of a rule: run it, then expect no violation (field
// empty) or exactly one violation on field whose description contains desc.
type ruleCase struct {
	name  string
	run   func(e *Errors)
	field string
	desc  string
}

func runCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Helper()
			var e Errors
			c.run(&e)
			expectOne(t, &e, c.field, c.desc)
		})
	}
}

// expectOne fails unless e is empty (field "") or holds exactly one
// violation, on field, whose description contains desc.
func expectOne(t *testing.T, e *Errors, field, desc string) {
	t.Helper()
	if field == "" {
		if e.Len() != 0 {
			t.Fatalf("want accepted, got %v", e.Err())
		}
		return
	}
	if e.Len() != 1 {
		t.Fatalf("want one violation on %q (%q), got %d: %v", field, desc, e.Len(), e.Err())
	}
	v := e.Violations()[0]
	if v.GetField() != field || !strings.Contains(v.GetDescription(), desc) {
		t.Fatalf("got %q: %q\nwant %q: …%s…", v.GetField(), v.GetDescription(), field, desc)
	}
}

// strCase is one input of a single-string rule: desc "" means accepted,
// otherwise the rule must report exactly one violation containing desc.
type strCase struct {
	v, desc string
}

// testRule runs a single-string rule on field "f" for every case.
func testRule(t *testing.T, rule Rule, cases []strCase) {
	t.Helper()
	rc := make([]ruleCase, len(cases))
	for i, c := range cases {
		field := ""
		if c.desc != "" {
			field = "f"
		}
		rc[i] = ruleCase{name: fmt.Sprintf("%d/%.24q", i, c.v), run: func(e *Errors) { rule(e, "f", c.v) }, field: field, desc: c.desc}
	}
	runCases(t, rc)
}

var rep = strings.Repeat

const (
	required = "required"
	badUTF8  = "must be valid UTF-8"
)

func TestOptional(t *testing.T) {
	t.Parallel()

	runCases(t, []ruleCase{
		{name: "empty skips the rule", run: func(e *Errors) { Optional(e, "f", "", ID) }},
		{name: "valid", run: func(e *Errors) { Optional(e, "f", "conv-1", ID) }},
		{name: "invalid", run: func(e *Errors) { Optional(e, "f", "a/b", ID) }, field: "f", desc: "[A-Za-z0-9._:-]"},
		{name: "rule called with the field", run: func(e *Errors) {
			Optional(e, "outer.f", "x", func(e *Errors, field, v string) { e.Add(field, "saw "+v) })
		}, field: "outer.f", desc: "saw x"},
	})
}

func TestRequired(t *testing.T) {
	t.Parallel()

	testRule(t, Required, []strCase{
		{"", required},
		{" ", "must not be blank"},
		{"\t\r\n \u00a0\u2003", "must not be blank"},
		{"a", ""},
		{"  a  ", ""},
		{"\xff", ""}, // not blank; UTF-8 is another rule's job
	})
}

func TestUTF8(t *testing.T) {
	t.Parallel()

	testRule(t, UTF8, []strCase{
		{"", ""},
		{"héllo 😀", ""},
		{"\xff", badUTF8},
		{"ok\xc3", badUTF8},           // truncated sequence
		{"\xed\xa0\x80", badUTF8},     // surrogate half
		{"\xc0\xaf", badUTF8},         // overlong encoding of '/'
		{"\xf4\x90\x80\x80", badUTF8}, // above U+10FFFF
	})
}

func TestMaxBytes(t *testing.T) {
	t.Parallel()

	max5 := func(e *Errors, f, v string) { MaxBytes(e, f, v, 5) }
	testRule(t, max5, []strCase{
		{"", ""},
		{"12345", ""},
		{"123456", "must be at most 5 bytes, got 6"},
		{"éé", ""}, // 4 bytes
		{"ééé", "must be at most 5 bytes, got 6"}, // 3 characters, 6 bytes
	})
}

func TestText(t *testing.T) {
	t.Parallel()

	max4 := func(e *Errors, f, v string) { Text(e, f, v, 4) }
	testRule(t, max4, []strCase{
		{"", ""},
		{"   ", ""}, // free text may be blank
		{"abcd", ""},
		{"€a", ""}, // 4 bytes
		{"abcde", "must be at most 4 bytes, got 5"},
		{"ab\xff", badUTF8},
	})
	t.Run("invalid and too long reports both", func(t *testing.T) {
		var e Errors
		Text(&e, "f", "abcd\xff", 4)
		if e.Len() != 2 || e.Violations()[0].GetDescription() != badUTF8 || !strings.Contains(e.Violations()[1].GetDescription(), "at most 4 bytes") {
			t.Fatalf("got %v", e.Err())
		}
	})
}

func TestRequiredText(t *testing.T) {
	t.Parallel()

	max4 := func(e *Errors, f, v string) { RequiredText(e, f, v, 4) }
	testRule(t, max4, []strCase{
		{"", required},
		{"  ", "must not be blank"},
		{"abcd", ""},
		{"abcde", "at most 4 bytes"},
		{"\xff", badUTF8},
	})
}

func TestID(t *testing.T) {
	t.Parallel()

	const d = "must be 1-128 characters of [A-Za-z0-9._:-], not starting with '.'"
	testRule(t, ID, []strCase{
		{"", required},
		{"a", ""},
		{"conv-1", ""},
		{"agent:main", ""},
		{"A.b_c-9:x", ""},
		{"a..b", ""},
		{"-", ""},
		{rep("i", MaxIDLen), ""},
		{rep("i", MaxIDLen+1), d},
		{".hidden", d},
		{".", d},
		{"..", d},
		{"a/b", d},
		{"a\\b", d},
		{"a b", d},
		{"a\x00", d},
		{"café", d},
		{"\xff", d},
		{"a*", d},
	})
}

func TestTenant(t *testing.T) {
	t.Parallel()

	const d = "must be 1-64 characters of [A-Za-z0-9_-]"
	testRule(t, Tenant, []strCase{
		{"", required},
		{"acme", ""},
		{"Acme_Corp-2", ""},
		{rep("t", MaxTenantLen), ""},
		{rep("t", MaxTenantLen+1), d},
		{"a.b", d}, // NATS token separator
		{"*", d},
		{">", d},
		{"a/b", d},
		{"a b", d},
		{"a:b", d},
		{"\xff", d},
	})
}

func TestRunID(t *testing.T) {
	t.Parallel()

	const d = "must be 1-128 characters of [A-Za-z0-9_-]"
	testRule(t, RunID, []strCase{
		{"", required},
		{"run-1", ""},
		{"01J9ZK_x", ""},
		{rep("r", MaxIDLen), ""},
		{rep("r", MaxIDLen+1), d},
		{"run.1", d},
		{"run:1", d},
		{"run*", d},
	})
}

func TestSkillName(t *testing.T) {
	t.Parallel()

	const d = "must be 1-64 lowercase letters, digits and single hyphens"
	testRule(t, SkillName, []strCase{
		{"", required},
		{"data-analysis", ""},
		{"a", ""},
		{"a1-b2-c3", ""},
		{"9", ""},
		{rep("s", MaxSkillNameLen), ""},
		{rep("s", MaxSkillNameLen+1), d},
		{"-a", d},
		{"a-", d},
		{"-", d},
		{"a--b", d},
		{"Data", d},
		{"a_b", d},
		{"a.b", d},
		{"é", d},
	})
}

func TestToolName(t *testing.T) {
	t.Parallel()

	const d = "must be 1-64 characters of [A-Za-z0-9_-]"
	testRule(t, ToolName, []strCase{
		{"", required},
		{"file_read", ""},
		{"mcp__github__search", ""},
		{"Tool-1", ""},
		{rep("n", MaxToolNameLen), ""},
		{rep("n", MaxToolNameLen+1), d},
		{"file.read", d},
		{"file read", d},
		{"file_*", d},
		{"a/b", d},
	})
}

func TestToolPattern(t *testing.T) {
	t.Parallel()

	const d = "must be a tool name or glob: 1-64 characters of [A-Za-z0-9_-*?]"
	testRule(t, ToolPattern, []strCase{
		{"", required},
		{"sql_query", ""},
		{"mcp__github__*", ""},
		{"file_?", ""},
		{"*", ""},
		{rep("*", MaxToolNameLen), ""},
		{rep("*", MaxToolNameLen+1), d},
		{"file.*", d},
		{"[ab]", d},
		{"a b", d},
	})
}

func TestName(t *testing.T) {
	t.Parallel()

	const d = "must be 1-256 bytes of valid UTF-8 without control characters"
	for _, rule := range []Rule{Name, ToolCallName} {
		testRule(t, rule, []strCase{
			{"", required},
			{"alice", ""},
			{"Read File (v2) 📄", ""}, // lenient: spaces and symbols
			{rep("n", MaxNameBytes), ""},
			{rep("é", MaxNameBytes/2), ""},
			{rep("n", MaxNameBytes+1), d},
			{"a\nb", d},
			{"a\x00", d},
			{"a\x7f", d},
			{"a\u0085", d}, // C1 control
			{"\xff", d},
		})
	}
}

func TestOpaque(t *testing.T) {
	t.Parallel()

	for _, r := range []struct {
		name string
		rule Rule
		max  int
	}{
		{"ToolCallID", ToolCallID, MaxToolCallIDLen},
		{"IdempotencyKey", IdempotencyKey, MaxIdempotencyLen},
		{"PageToken", PageToken, MaxPageTokenLen},
		{"Cursor", Cursor, MaxCursorLen},
		{"Version", Version, MaxVersionLen},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			d := fmt.Sprintf("must be 1-%d bytes of valid UTF-8 without whitespace or control characters", r.max)
			testRule(t, r.rule, []strCase{
				{"", required},
				{"call_abc123", ""},
				{"toolu_01A09q90qw90lq917835lq9", ""},
				{"eyJvIjoxfQ==", ""},
				{"1.0.0+build.5", ""},
				{"earliest", ""},
				{"clé/€", ""},
				{rep("x", r.max), ""},
				{rep("x", r.max-1) + "é", d}, // max+1 bytes
				{rep("x", r.max+1), d},
				{"a b", d},
				{"a\tb", d},
				{"a\u00a0b", d}, // no-break space
				{"a\u3000b", d}, // ideographic space
				{"a\x00", d},
				{"a\x7f", d},
				{"\xff", d},
			})
		})
	}
}

func TestModel(t *testing.T) {
	t.Parallel()

	const d = "must be 1-256 printable ASCII characters without spaces"
	testRule(t, Model, []strCase{
		{"", required},
		{"gpt-4o", ""},
		{"claude-sonnet-4-5", ""},
		{"Qwen/Qwen2.5-72B-Instruct", ""},
		{"llama3.1:8b", ""},
		{"anthropic.claude-3-sonnet-20240229-v1:0", ""},
		{"!~", ""},
		{rep("m", MaxModelLen), ""},
		{rep("m", MaxModelLen+1), d},
		{"gpt 4o", d},
		{"gpt-4o\n", d},
		{"gpt-4o\x7f", d},
		{"modèle", d},
		{"\xff", d},
	})
}

func TestArtifactID(t *testing.T) {
	t.Parallel()

	const d = `must be "artifact_" followed by 1-64 lowercase hex digits`
	testRule(t, ArtifactID, []strCase{
		{"", required},
		{"artifact_0", ""},
		{"artifact_0123456789abcdef", ""},
		{"artifact_" + rep("f", MaxArtifactHashLen), ""},
		{"artifact_" + rep("f", MaxArtifactHashLen+1), d},
		{"artifact_", d},
		{"artifact_ABCDEF", d},
		{"artifact_0g", d},
		{"artifact_../../etc/passwd", d},
		{"Artifact_01", d},
		{"0123abcd", d},
		{"artifact-01", d},
		{"xartifact_01", d},
	})
}

func TestRelativePath(t *testing.T) {
	t.Parallel()

	const d = "must be a relative path of at most 1024 bytes"
	testRule(t, RelativePath, []strCase{
		{"", required},
		{"a", ""},
		{"references/guide.md", ""},
		{"scripts/run.sh", ""},
		{"a/b/c/d.txt", ""},
		{".hidden", ""},
		{"..a", ""},
		{"a..", ""},
		{"...", ""},
		{"dossier été/rapport 1.md", ""},
		{"a/b:c", ""},
		{rep("p", MaxPathLen), ""},
		{rep("a/", MaxPathLen/2-1) + "bb", ""}, // exactly MaxPathLen
		{rep("p", MaxPathLen+1), d},
		{"/etc/passwd", d},
		{"/", d},
		{"a/", d},
		{"a//b", d},
		{".", d},
		{"..", d},
		{"./a", d},
		{"a/./b", d},
		{"../a", d},
		{"a/../b", d},
		{"a/..", d},
		{`a\b`, d},
		{`..\..\x`, d},
		{"C:/Windows", d},
		{"c:", d},
		{"a\x00b", d},
		{"a\nb", d},
		{"a\u0085b", d},
		{"a\xffb", d},
	})
}

func TestRegexp(t *testing.T) {
	t.Parallel()

	max := func(n int) Rule { return func(e *Errors, f, v string) { Regexp(e, f, v, n) } }
	const d = "must be a valid regular expression (RE2 syntax): "
	testRule(t, max(64), []strCase{
		{"", ""},
		{`(?i)^error:\s+\w+`, ""},
		{`a|b|[c-e]{2,3}`, ""},
		{`\p{Greek}+`, ""},
		{"(unclosed", d + "missing closing )"},
		{"a)", d + "unexpected )"},
		{"a**", d + "invalid nested repetition operator"},
		{"[z-a]", d + "invalid character class range"},
		{`a{1001}`, d + "invalid repeat count"},
		{`\8`, d + "invalid escape sequence"},
		{`(?<name`, d + "invalid named capture"},
		{`a(?=b)`, d + "invalid or unsupported Perl syntax"}, // no lookahead in RE2
		{"\xff", badUTF8},
		{rep("a", 64), ""},
		{rep("a", 65), "must be at most 64 bytes, got 65"},
	})
	t.Run("nested repeat too large", func(t *testing.T) {
		var e Errors
		Regexp(&e, "f", `((((a{100}){100}){100}){100})`, 1024)
		expectOne(t, &e, "f", d+"invalid repeat count")
	})
	t.Run("nests too deeply", func(t *testing.T) {
		var e Errors
		Regexp(&e, "f", rep("(", 1001)+rep(")", 1001), 4096)
		expectOne(t, &e, "f", d+"expression nests too deeply")
	})
	t.Run("error does not echo the expression", func(t *testing.T) {
		var e Errors
		Regexp(&e, "f", "(secret-looking-pattern", 1024)
		expectOne(t, &e, "f", d)
		if strings.Contains(e.Violations()[0].GetDescription(), "secret") {
			t.Errorf("description echoes the expression: %q", e.Violations()[0].GetDescription())
		}
	})
}

func TestEnum(t *testing.T) {
	t.Parallel()

	const all = "ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL"
	role := func(v baagentv1.Role, allowUnspecified bool) func(*Errors) {
		return func(e *Errors) { Enum(e, "role", v, baagentv1.Role_name, allowUnspecified) }
	}
	runCases(t, []ruleCase{
		{name: "known", run: role(baagentv1.Role_ROLE_TOOL, false)},
		{name: "known, unspecified allowed", run: role(baagentv1.Role_ROLE_USER, true)},
		{name: "unspecified allowed", run: role(0, true)},
		{name: "unspecified refused", run: role(0, false), field: "role", desc: "required: must be one of " + all},
		{name: "unknown", run: role(5, false), field: "role", desc: "unknown value 5: must be one of " + all},
		{name: "negative", run: role(-1, false), field: "role", desc: "unknown value -1"},
		{name: "max int32", run: role(math.MaxInt32, false), field: "role", desc: "unknown value 2147483647"},
		{name: "unknown lists unspecified when allowed", run: role(7, true), field: "role", desc: "must be one of ROLE_UNSPECIFIED, " + all},
		{name: "other enum type", run: func(e *Errors) {
			Enum(e, "kind", baagentv1.MessageKind(9), baagentv1.MessageKind_name, true)
		}, field: "kind", desc: "MESSAGE_KIND_UNSPECIFIED, MESSAGE_KIND_SKILL_INSTRUCTION, MESSAGE_KIND_SUMMARY, MESSAGE_KIND_SKILL_CATALOG"},
	})
}

func TestRange(t *testing.T) {
	t.Parallel()

	i := func(v int32) func(*Errors) { return func(e *Errors) { Range(e, "n", v, 0, 10) } }
	f := func(v float64) func(*Errors) { return func(e *Errors) { Range(e, "x", v, 0, 1) } }
	runCases(t, []ruleCase{
		{name: "int low", run: i(0)},
		{name: "int high", run: i(10)},
		{name: "int below", run: i(-1), field: "n", desc: "must be between 0 and 10, got -1"},
		{name: "int above", run: i(11), field: "n", desc: "must be between 0 and 10, got 11"},
		{name: "float low", run: f(0)},
		{name: "float high", run: f(1)},
		{name: "float negative zero", run: f(math.Copysign(0, -1))},
		{name: "float just above", run: f(math.Nextafter(1, 2)), field: "x", desc: "must be between 0 and 1, got 1.0000000000000002"},
		{name: "float just below", run: f(-math.SmallestNonzeroFloat64), field: "x", desc: "got -5e-324"},
		{name: "NaN", run: f(math.NaN()), field: "x", desc: "got NaN"},
		{name: "+Inf", run: f(math.Inf(1)), field: "x", desc: "got +Inf"},
		{name: "-Inf", run: f(math.Inf(-1)), field: "x", desc: "got -Inf"},
		{name: "NaN with infinite bounds", run: func(e *Errors) { Range(e, "x", math.NaN(), math.Inf(-1), math.Inf(1)) }, field: "x", desc: "got NaN"},
	})
}

func TestNonNegative(t *testing.T) {
	t.Parallel()

	runCases(t, []ruleCase{
		{name: "zero", run: func(e *Errors) { NonNegative(e, "n", int32(0)) }},
		{name: "max", run: func(e *Errors) { NonNegative(e, "n", int64(math.MaxInt64)) }},
		{name: "int32 -1", run: func(e *Errors) { NonNegative(e, "n", int32(-1)) }, field: "n", desc: "must not be negative, got -1"},
		{name: "int64 min", run: func(e *Errors) { NonNegative(e, "n", int64(math.MinInt64)) }, field: "n", desc: "got -9223372036854775808"},
	})
}

func TestPageSize(t *testing.T) {
	t.Parallel()

	p := func(v int32) func(*Errors) { return func(e *Errors) { PageSize(e, "page_size", v, 500) } }
	runCases(t, []ruleCase{
		{name: "default", run: p(0)},
		{name: "one", run: p(1)},
		{name: "max", run: p(500)},
		{name: "max+1", run: p(501), field: "page_size", desc: "must be between 0 and 500 (0 uses the default), got 501"},
		{name: "negative", run: p(-1), field: "page_size", desc: "got -1"},
		{name: "min int32", run: p(math.MinInt32), field: "page_size", desc: "got -2147483648"},
	})
}

func TestMaxItems(t *testing.T) {
	t.Parallel()

	runCases(t, []ruleCase{
		{name: "none", run: func(e *Errors) { MaxItems(e, "l", 0, 3) }},
		{name: "at max", run: func(e *Errors) { MaxItems(e, "l", 3, 3) }},
		{name: "max+1", run: func(e *Errors) { MaxItems(e, "l", 4, 3) }, field: "l", desc: "must have at most 3 items, got 4"},
		{name: "zero max", run: func(e *Errors) { MaxItems(e, "l", 1, 0) }, field: "l", desc: "at most 0 items"},
	})
}

func TestTimestamp(t *testing.T) {
	t.Parallel()

	const d = "must be a valid timestamp between years 1 and 9999"
	const minSec, maxSec = -62135596800, 253402300799 // 0001-01-01T00:00:00Z, 9999-12-31T23:59:59Z
	ts := func(s int64, n int32) func(*Errors) {
		return func(e *Errors) { Timestamp(e, "ts", &timestamppb.Timestamp{Seconds: s, Nanos: n}) }
	}
	runCases(t, []ruleCase{
		{name: "nil", run: func(e *Errors) { Timestamp(e, "ts", nil) }},
		{name: "epoch", run: ts(0, 0)},
		{name: "now", run: func(e *Errors) { Timestamp(e, "ts", timestamppb.Now()) }},
		{name: "year 1", run: ts(minSec, 0)},
		{name: "year 9999", run: ts(maxSec, 999_999_999)},
		{name: "before year 1", run: ts(minSec-1, 0), field: "ts", desc: d},
		{name: "after year 9999", run: ts(maxSec+1, 0), field: "ts", desc: d},
		{name: "negative nanos", run: ts(0, -1), field: "ts", desc: d},
		{name: "nanos overflow", run: ts(0, 1_000_000_000), field: "ts", desc: d},
	})
}

func TestIndexAndKey(t *testing.T) {
	t.Parallel()

	for _, c := range []struct{ got, want string }{
		{Index("messages", 0), "messages[0]"},
		{Index("messages", 3), "messages[3]"},
		{Index(Index("a", 1)+".b", 22), "a[1].b[22]"},
		{Key("labels", "team"), `labels["team"]`},
		{Key("labels", ""), `labels[""]`},
		{Key("labels", "a\"b\n"), `labels["a\"b\n"]`},
		{Key("labels", "\xff"), `labels["\xff"]`}, // escaped, so the path stays valid UTF-8
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}
