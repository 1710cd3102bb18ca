package validate

import (
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// FuzzRelativePath checks RelativePath against an independent definition
// built on the standard library (path.Clean, filepath.IsLocal): it accepts
// exactly the clean, local, slash-separated paths without backslashes or
// control characters, and an accepted path joined to a root stays inside it.
func FuzzRelativePath(f *testing.F) {
	for _, s := range []string{"", "a", "references/guide.md", "../x", "a/../b", "/abs", "a//b", "a/", ".", "..",
		`a\b`, "C:/x", "a\x00", "é/ü", "\xff", ".hidden/..a", "a/./b", strings.Repeat("ab/", 400)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var e Errors
		RelativePath(&e, "path", v)
		accepted := e.Len() == 0
		want := v != "" && len(v) <= MaxPathLen && utf8.ValidString(v) &&
			strings.IndexFunc(v, unicode.IsControl) < 0 && !strings.ContainsRune(v, '\\') &&
			!(len(v) >= 2 && v[1] == ':') &&
			v != "." && path.Clean(v) == v && filepath.IsLocal(v)
		if accepted != want {
			t.Fatalf("RelativePath(%q): accepted %v, reference %v (%v)", v, accepted, want, e.Err())
		}
		if accepted {
			if j := path.Join("/root", v); !strings.HasPrefix(j, "/root/") {
				t.Fatalf("accepted %q escapes the root: %s", v, j)
			}
			return
		}
		wantOneOn(t, &e, "path")
	})
}

// FuzzRegexp checks that Regexp accepts exactly the empty string and the
// expressions of at most max bytes that Go's regexp package compiles, and
// that a rejection is one violation on the field that does not echo long
// input back.
func FuzzRegexp(f *testing.F) {
	for _, s := range []string{"", `(?i)^error:\s+\w+`, "(unclosed", "a**", `a{1001}`, `\8`, "[z-a]", "\xff(", `\pL{1000}`, `(?P<n>x)\1`} {
		f.Add(s, uint16(64))
	}
	f.Fuzz(func(t *testing.T, v string, max uint16) {
		var e Errors
		Regexp(&e, "pattern", v, int(max))
		accepted := e.Len() == 0
		want := v == ""
		if !want && len(v) <= int(max) {
			_, err := regexp.Compile(v)
			want = err == nil
		}
		if accepted != want {
			t.Fatalf("Regexp(%q, %d): accepted %v, regexp.Compile says %v (%v)", v, max, accepted, want, e.Err())
		}
		if !accepted {
			wantOneOn(t, &e, "pattern")
			if d := e.Violations()[0].GetDescription(); len(v) > 16 && strings.Contains(d, v) {
				t.Fatalf("description echoes the expression: %q", d)
			}
		}
	})
}

// FuzzStruct decodes arbitrary bytes as a google.protobuf.Struct and checks
// that Struct accepts exactly what protojson can marshal within
// MaxStructDepth levels, reports one violation under the field otherwise,
// and gives the same answer every time.
func FuzzStruct(f *testing.F) {
	seeds := []*structpb.Struct{
		{},
		nested(MaxStructDepth),
		nested(MaxStructDepth + 1),
		nestedLists(MaxStructDepth + 1),
		{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(1), "v": {}}},
	}
	if s, err := structpb.NewStruct(map[string]any{"type": "object", "l": []any{1.5, "a", nil, true, map[string]any{"k": []any{}}}}); err == nil {
		seeds = append(seeds, s)
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A NaN number: field 1 (fields) entry {key "n", value {number_value NaN}}.
	f.Add([]byte{0x0a, 0x0e, 0x0a, 0x01, 'n', 0x12, 0x09, 0x11, 0x01, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &structpb.Struct{}
		if proto.Unmarshal(data, s) != nil {
			return
		}
		var e Errors
		Struct(&e, "p", s)
		_, jerr := protojson.Marshal(s)
		want := jerr == nil && structDepth(s) <= MaxStructDepth
		if accepted := e.Len() == 0; accepted != want {
			t.Fatalf("accepted %v, protojson error %v, depth %d: %v", accepted, jerr, structDepth(s), e.Err())
		}
		if e.Len() == 0 {
			return
		}
		wantOneOn(t, &e, "p")
		var again Errors
		Struct(&again, "p", s)
		if !proto.Equal(again.Violations()[0], e.Violations()[0]) {
			t.Fatalf("not deterministic: %v then %v", e.Violations()[0], again.Violations()[0])
		}
	})
}

// FuzzErrors adds arbitrary field paths and descriptions: the status always
// carries a BadRequest detail (every string valid UTF-8) and stays bounded.
func FuzzErrors(f *testing.F) {
	f.Add("spec.input", "required", uint8(1))
	f.Add("labels[\"\xff\"]", strings.Repeat("é", 400), uint8(40))
	f.Fuzz(func(t *testing.T, field, desc string, n uint8) {
		var e Errors
		for range int(n) + 1 {
			e.Add(field, desc)
		}
		if e.Len() != int(n)+1 || len(e.Violations()) != min(int(n)+1, MaxViolations) {
			t.Fatalf("Len %d, kept %d for %d adds", e.Len(), len(e.Violations()), int(n)+1)
		}
		st, br := badRequest(t, e.Err())
		for _, v := range br.GetFieldViolations() {
			if !utf8.ValidString(v.GetField()) || len(v.GetField()) > maxFieldBytes ||
				!utf8.ValidString(v.GetDescription()) || len(v.GetDescription()) > maxDescriptionBytes {
				t.Fatalf("violation not cleaned: %q: %q", v.GetField(), v.GetDescription())
			}
		}
		if len(st.Message()) > 64+MaxViolations*(maxFieldBytes+maxDescriptionBytes+4) {
			t.Fatalf("message is %d bytes", len(st.Message()))
		}
	})
}

// wantOneOn fails unless e holds exactly one violation, on field or below it.
func wantOneOn(t *testing.T, e *Errors, field string) {
	t.Helper()
	if e.Len() != 1 {
		t.Fatalf("want one violation, got %d: %v", e.Len(), e.Err())
	}
	if f := e.Violations()[0].GetField(); f != field && !strings.HasPrefix(f, field+".") && !strings.HasPrefix(f, field+"[") {
		t.Fatalf("violation on %q, want %q or below", f, field)
	}
}

// structDepth is the nesting depth of s counting every object and list as a
// level (s itself is level 1), computed independently of checkStruct.
func structDepth(s *structpb.Struct) int {
	d := 0
	for _, v := range s.GetFields() {
		d = max(d, valueDepth(v))
	}
	return 1 + d
}

func valueDepth(v *structpb.Value) int {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		return structDepth(k.StructValue)
	case *structpb.Value_ListValue:
		d := 0
		for _, item := range k.ListValue.GetValues() {
			d = max(d, valueDepth(item))
		}
		return 1 + d
	}
	return 0
}
