package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baagent/baagent/internal/natsx"
)

func TestPageToken(t *testing.T) {
	id := newRunID(time.Now())
	if err := natsx.ValidateToken("run_id", id); err != nil {
		t.Fatal(err)
	}
	got, err := decodePageToken(encodePageToken(id))
	if err != nil || got != id {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	for _, bad := range []string{"", "!!", encodePageToken("run.1"), "eyJvIjoxMH0", encodePageToken("")} {
		if _, err := decodePageToken(bad); err == nil {
			t.Errorf("decodePageToken(%q) accepted", bad)
		}
	}
	a, b := newRunID(time.UnixMilli(1_000)), newRunID(time.UnixMilli(2_000))
	if a >= b {
		t.Errorf("run ids do not sort by time: %s >= %s", a, b)
	}
}

func FuzzDecodePageToken(f *testing.F) {
	f.Add(encodePageToken("run_0190aa_1"))
	f.Add("")
	f.Add("djE6")
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := decodePageToken(tok)
		if err != nil {
			return
		}
		if natsx.ValidateToken("run_id", id) != nil {
			t.Fatalf("decoded an invalid run id %q", id)
		}
		if again, err := decodePageToken(encodePageToken(id)); err != nil || again != id {
			t.Fatalf("round trip of %q: %q, %v", id, again, err)
		}
	})
}

func TestParseArgs(t *testing.T) {
	for _, ok := range []string{"", "  ", "{}", `{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}`} {
		if _, err := parseArgs(ok); err != nil {
			t.Errorf("parseArgs(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"[]", "1", `"s"`, `{"a":`, "{'a':1}", "null", `{"a":1}x`} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) accepted", bad)
		}
	}
}

func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"", "{}", `{"query":"SELECT 1"}`, `{"a":[1,{"b":null}]}`, "[1]", `{"a":`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		s, err := parseArgs(args)
		if err != nil {
			if strings.TrimSpace(args) == "" {
				t.Fatal("empty arguments refused")
			}
			return
		}
		// What parses is a JSON object the standard library agrees on.
		if strings.TrimSpace(args) != "" && utf8.ValidString(args) {
			var m map[string]any
			if json.Unmarshal([]byte(args), &m) != nil {
				t.Fatalf("accepted %q, which encoding/json refuses", args)
			}
		}
		_ = s.AsMap()
	})
}

func FuzzParseSkillArgs(f *testing.F) {
	for _, s := range []string{`{"name":"sales-analysis"}`, `{"skill":"x"}`, `{"name":""}`, `{}`, `[]`, ``,
		`{"name":"x","action":"end"}`, `{"name":"x","action":"Done"}`, `{"name":"x","action":"jump"}`, `{"name":"x","action":3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		a, err := parseSkillArgs(args)
		if err == nil && (a.name == "" || strings.TrimSpace(a.name) != a.name || (a.action != skillActionActivate && a.action != skillActionEnd)) {
			t.Fatalf("parseSkillArgs(%q) = %+v", args, a)
		}
	})
}

func FuzzParseSkillReadArgs(f *testing.F) {
	for _, s := range []string{`{"path":"references/a.md"}`, `{"path":"a","skill":"x","offset":10}`, `{"path":"a","offset":-1}`,
		`{"path":"a","offset":1.5}`, `{"path":"a","offset":"3"}`, `{"path":" "}`, `{"path":"a","skill":7}`, `{}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		a, err := parseSkillReadArgs(args)
		if err == nil && (a.path == "" || a.offset < 0 || strings.TrimSpace(a.path) != a.path) {
			t.Fatalf("parseSkillReadArgs(%q) = %+v", args, a)
		}
	})
}
