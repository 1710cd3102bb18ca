package skills

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func triggerRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	addSkill(t, root, "", "sales-report", "Sales.", "triggers: [quarterly report, revenue]")
	addSkill(t, root, "", "pdf-forms", "PDF.", "triggers: [fill the form, 填写表格]", "disable-model-invocation: true")
	addSkill(t, root, "", "glossary", "Terms.", "triggers: [术语]")
	addSkill(t, root, "tenants/other", "private", "Another tenant's.", "triggers: [secret]")
	return root
}

func TestMatchTriggers(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, triggerRoot(t))
	cases := []struct {
		text string
		want string // skill:origin:matched, space separated
	}{
		{"Please fill the form, then /sales-report", "sales-report:user:/sales-report pdf-forms:trigger:fill the form"},
		{"What was REVENUE in the Quarterly Report?", "sales-report:trigger:revenue"},
		{"revenues and reporting", ""}, // word boundaries
		{"请帮我填写表格并解释术语", "pdf-forms:trigger:填写表格 glossary:trigger:术语"}, // CJK substrings
		{"/pdf-forms /pdf-forms and /glossary", "pdf-forms:user:/pdf-forms glossary:user:/glossary"},
		{"see docs/sales-report and /sales-reports and /nope", ""}, // paths, longer names, unknown
		{"(/glossary) first", "glossary:user:/glossary"},
		{"/private secret", ""}, // another tenant's skill
		{"a/b /sales-report/x", ""},
	}
	for _, c := range cases {
		resp, err := s.MatchTriggers(context.Background(), &baagentv1.MatchTriggersRequest{Tenant: "t", Text: c.text})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range resp.GetMatches() {
			o := "trigger"
			if m.GetOrigin() == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER {
				o = "user"
			}
			got = append(got, m.GetSkillName()+":"+o+":"+m.GetMatched())
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%q: %q, want %q", c.text, strings.Join(got, " "), c.want)
		}
	}
	resp, err := s.MatchTriggers(context.Background(), &baagentv1.MatchTriggersRequest{Tenant: "other", Text: "my secret"})
	if err != nil || len(resp.GetMatches()) != 1 || resp.GetMatches()[0].GetSkillName() != "private" {
		t.Fatalf("other tenant: %v, %v", resp, err)
	}
	for _, req := range []*baagentv1.MatchTriggersRequest{
		{Tenant: "t"},
		{Text: "x"},
		{Tenant: "t", Text: strings.Repeat("x", MaxTriggerTextBytes+1)},
		{Tenant: "t", Text: "bad \xff"},
	} {
		if _, err := s.MatchTriggers(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%.40v: %v", req, err)
		}
	}
}

// FuzzMatchTriggers: no text or trigger panics the matcher; matches are one
// per skill, explicit ones first, and each matched phrase is in the text.
func FuzzMatchTriggers(f *testing.F) {
	f.Add("Please fill the form, then /sales-report", "fill the form")
	f.Add("请帮我填写表格", "填写表格")
	f.Add("/a/b /c- /-d", "İ")
	f.Add("ǅx X", "ǆx")
	f.Fuzz(func(t *testing.T, text, trigger string) {
		view := []*skill{
			{name: "sales-report", triggers: []string{trigger}},
			{name: "c", triggers: []string{strings.ToUpper(trigger), "x"}},
		}
		ms := matchTriggers(view, text)
		seen := map[string]bool{}
		explicit := true
		for _, m := range ms {
			if seen[m.GetSkillName()] {
				t.Fatalf("%q twice", m.GetSkillName())
			}
			seen[m.GetSkillName()] = true
			user := m.GetOrigin() == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER
			if user && !explicit {
				t.Fatal("an explicit match after a trigger match")
			}
			explicit = explicit && user
			if !strings.Contains(strings.ToLower(text), strings.ToLower(m.GetMatched())) {
				t.Fatalf("matched %q not in %q", m.GetMatched(), text)
			}
		}
	})
}

// FuzzFormatLines: pages are bounded, cover the file in order, and never
// split a character.
func FuzzFormatLines(f *testing.F) {
	f.Add("a\nb\r\nc", int64(0), 0)
	f.Add(strings.Repeat("é", 3000)+"\n", int64(0), 1)
	f.Add("", int64(5), 3)
	f.Fuzz(func(t *testing.T, text string, offset int64, limit int) {
		if !utf8.ValidString(text) {
			return
		}
		lines := splitLines(text)
		p := formatLines(lines, offset, limit)
		if !utf8.ValidString(p.text) || len(p.text) > MaxPageBytes+200 {
			t.Fatalf("page of %d bytes", len(p.text))
		}
		if p.total != int64(len(lines)) || p.next > p.total || p.next >= 0 && p.next <= min(max(offset, 0), p.total) {
			t.Fatalf("next %d total %d offset %d", p.next, p.total, offset)
		}
	})
}
