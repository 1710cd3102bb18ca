package natsx

import (
	"strings"
	"testing"
	"unicode"

	"github.com/nats-io/nats-server/v2/server"
)

func TestValidateToken(t *testing.T) {
	long := strings.Repeat("a", MaxTokenLen)
	tests := []struct {
		in   string
		ok   bool
		frag string // part of the error
	}{
		{"acme", true, ""},
		{"Tenant_1-x", true, ""},
		{"01J9ZK4Q7V3M2Y8X6W5T4R3P2N", true, ""},
		{"6f1c2e1a-3b4d-4c5e-8f90-112233445566", true, ""},
		{long, true, ""},
		{long + "a", false, "maximum"},
		{"", false, "empty"},
		{"a.b", false, "'.'"},
		{"*", false, "'*'"},
		{">", false, "'>'"},
		{"a b", false, "' '"},
		{"a\tb", false, `'\t'`},
		{"a\nb", false, `'\n'`},
		{"ä", false, "invalid character"},
		{"a\u00a0b", false, "invalid character"},
		{"a/b", false, "'/'"},
		{"a\x00", false, `'\x00'`},
	}
	for _, tt := range tests {
		err := ValidateToken("tenant", tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("ValidateToken(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), tt.frag) || !strings.HasPrefix(err.Error(), "tenant")) {
			t.Errorf("ValidateToken(%q) error %q should start with the field and contain %q", tt.in, err, tt.frag)
		}
	}
}

func TestSubjectBuilders(t *testing.T) {
	tests := []struct {
		name string
		fn   func() (string, error)
		want string
		err  string
	}{
		{"event", func() (string, error) { return EventSubject("acme", "r1") }, "baagent.acme.run.r1.events", ""},
		{"event bad tenant", func() (string, error) { return EventSubject("ac.me", "r1") }, "", "tenant"},
		{"event bad run", func() (string, error) { return EventSubject("acme", "r*") }, "", "run_id"},
		{"event empty run", func() (string, error) { return EventSubject("acme", "") }, "", "run_id must not be empty"},
		{"tenant filter", func() (string, error) { return TenantEventsFilter("acme") }, "baagent.acme.run.*.events", ""},
		{"tenant filter bad", func() (string, error) { return TenantEventsFilter(">") }, "", "tenant"},
		{"run", func() (string, error) { return RunSubject("acme", "r1") }, "baagent.runs.acme.r1", ""},
		{"run bad", func() (string, error) { return RunSubject("acme", "r 1") }, "", "run_id"},
		{"history", func() (string, error) { return HistorySubject("acme", "c1") }, "baagent.acme.conversation.c1.messages", ""},
		{"history bad", func() (string, error) { return HistorySubject("acme", "c.1") }, "", "conversation_id"},
		{"checkpoint key", func() (string, error) { return CheckpointKey("acme", "r1") }, "acme.r1", ""},
		{"run key", func() (string, error) { return RunKey("acme", "r1") }, "acme.r1", ""},
		{"run key bad", func() (string, error) { return RunKey("", "r1") }, "", "tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || got != "" {
					t.Fatalf("got %q, %v; want error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSubjectsFallInTheirStreams(t *testing.T) {
	ev, _ := EventSubject("runs", "r1") // a tenant named like the queue prefix
	run, _ := RunSubject("runs", "r1")
	hist, _ := HistorySubject("runs", "c1")
	for _, c := range []struct{ subj, pattern string }{
		{ev, EventsSubjects}, {run, RunsSubjects}, {hist, HistorySubjects},
	} {
		if !server.SubjectsCollide(c.subj, c.pattern) {
			t.Errorf("%s is not captured by %s", c.subj, c.pattern)
		}
	}
	if server.SubjectsCollide(ev, RunsSubjects) || server.SubjectsCollide(run, EventsSubjects) {
		t.Error("event and run subjects cross streams")
	}
}

func TestParseEventSubject(t *testing.T) {
	ten, run, err := ParseEventSubject("baagent.acme.run.r1.events")
	if err != nil || ten != "acme" || run != "r1" {
		t.Fatalf("got %q %q %v", ten, run, err)
	}
	for _, bad := range []string{
		"", "baagent.acme.run.r1", "baagent.acme.run.r1.events.x", "other.acme.run.r1.events",
		"baagent.acme.runs.r1.events", "baagent.*.run.r1.events", "baagent.acme.run.>.events",
		"baagent..run.r1.events",
	} {
		if _, _, err := ParseEventSubject(bad); err == nil {
			t.Errorf("ParseEventSubject(%q): want error", bad)
		}
	}
}

func FuzzEventSubject(f *testing.F) {
	for _, s := range [][2]string{
		{"acme", "r1"}, {"", ""}, {"a.b", "c"}, {"*", ">"}, {"a b", "x"}, {"ä", "\x00"},
		{strings.Repeat("a", 129), "r"}, {"t", "r\u2028"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tenant, runID string) {
		subj, err := EventSubject(tenant, runID)
		if err != nil {
			if subj != "" {
				t.Fatalf("error %v with non-empty subject %q", err, subj)
			}
			if ValidateToken("tenant", tenant) == nil && ValidateToken("run_id", runID) == nil {
				t.Fatalf("rejected valid tokens %q, %q: %v", tenant, runID, err)
			}
			return
		}
		if strings.ContainsAny(subj, "*>") || strings.IndexFunc(subj, unicode.IsSpace) >= 0 {
			t.Fatalf("subject %q contains a wildcard or whitespace", subj)
		}
		if !server.IsValidLiteralSubject(subj) {
			t.Fatalf("subject %q is not a valid literal subject", subj)
		}
		if !server.SubjectsCollide(subj, EventsSubjects) {
			t.Fatalf("subject %q is not captured by %s", subj, EventsSubjects)
		}
		gt, gr, err := ParseEventSubject(subj)
		if err != nil || gt != tenant || gr != runID {
			t.Fatalf("round trip of %q = %q, %q, %v", subj, gt, gr, err)
		}
	})
}

func TestParseMemoryCaptureSubject(t *testing.T) {
	ten, conv, err := ParseMemoryCaptureSubject("baagent.memcapture.acme.conv_1")
	if err != nil || ten != "acme" || conv != "conv_1" {
		t.Fatalf("got %q %q %v", ten, conv, err)
	}
	for _, bad := range []string{
		"", "baagent.memcapture.acme", "baagent.memcapture.acme.c.x", "other.memcapture.acme.c",
		"baagent.runs.acme.c", "baagent.memcapture.*.c", "baagent.memcapture.acme.>", "baagent.memcapture..c",
	} {
		if _, _, err := ParseMemoryCaptureSubject(bad); err == nil {
			t.Errorf("ParseMemoryCaptureSubject(%q): want error", bad)
		}
	}
}

func FuzzMemoryCaptureSubject(f *testing.F) {
	for _, s := range [][2]string{
		{"acme", "conv_1"}, {"", ""}, {"a.b", "c"}, {"*", ">"}, {"a b", "x"}, {"ä", "\x00"},
		{strings.Repeat("a", 129), "c"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tenant, conv string) {
		subj, err := MemoryCaptureSubject(tenant, conv)
		if err != nil {
			if ValidateToken("tenant", tenant) == nil && ValidateToken("conversation_id", conv) == nil {
				t.Fatalf("rejected valid tokens %q, %q: %v", tenant, conv, err)
			}
			return
		}
		if !server.IsValidLiteralSubject(subj) || !server.SubjectsCollide(subj, MemoryCaptureSubjects) {
			t.Fatalf("subject %q is not a literal subject captured by %s", subj, MemoryCaptureSubjects)
		}
		for _, other := range []string{EventsSubjects, RunsSubjects, HistorySubjects} {
			if server.SubjectsCollide(subj, other) {
				t.Fatalf("subject %q is also captured by %s", subj, other)
			}
		}
		gt, gc, err := ParseMemoryCaptureSubject(subj)
		if err != nil || gt != tenant || gc != conv {
			t.Fatalf("round trip of %q = %q, %q, %v", subj, gt, gc, err)
		}
	})
}
