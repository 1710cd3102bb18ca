package skills

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// lenientFixture is a published skill whose description is 1,068
// characters (the standard's limit is 1,024) and which has a key the
// standard does not define.
const lenientFixture = "testdata/lenient/pdf-forms/SKILL.md"

func copyFixture(t *testing.T, root, dst string) {
	t.Helper()
	data, err := os.ReadFile(lenientFixture)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, dst, string(data))
}

// TestLenientLoading: violations that do not stop a skill from working load
// it with warnings; ambiguous ones refuse it.
func TestLenientLoading(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	copyFixture(t, root, "pdf-forms/SKILL.md")
	writeFile(t, root, "Case-Folder/SKILL.md", fm("name: case-folder", "description: Folder in another case."))
	// Two folders claim one name once case is ignored: ambiguous.
	writeFile(t, root, "Report/SKILL.md", fm("name: report", "description: One."))
	writeFile(t, root, "report/SKILL.md", fm("name: report", "description: Two."))
	writeFile(t, root, "no-name/SKILL.md", fm("description: No name."))
	reg := prometheus.NewRegistry()
	s := newTestServer(t, root, func(o *Options) { o.Registerer = reg })
	ctx := context.Background()

	list, err := s.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: "t", IncludeInvalid: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := skillNames(list.GetSkills()); !slices.Equal(got, []string{"case-folder", "pdf-forms"}) {
		t.Fatalf("loaded %v", got)
	}
	pdf := list.GetSkills()[1]
	if utf8.RuneCountInString(pdf.GetDescription()) != 1068 || len(pdf.GetWarnings()) != 2 ||
		pdf.GetWarnings()[0] != "description: must be at most 1024 characters, got 1068" ||
		!strings.Contains(pdf.GetWarnings()[1], `unknown key "x-author-notes"`) || pdf.GetExtra()["x-author-notes"] == "" {
		t.Fatalf("pdf-forms metadata %v", pdf)
	}
	if w := list.GetSkills()[0].GetWarnings(); len(w) != 1 || !strings.Contains(w[0], "differs in case only") {
		t.Fatalf("case-folder warnings %v", w)
	}
	var reasons []string
	for _, e := range list.GetInvalid() {
		reasons = append(reasons, e.GetFolder()+": "+e.GetReason())
	}
	want := []string{
		`Report: name: "report" is claimed by more than one folder of this layer ("Report", "report"); rename all but one`,
		"no-name: name: required",
		`report: name: "report" is claimed by more than one folder of this layer ("Report", "report"); rename all but one`,
	}
	if !slices.Equal(reasons, want) {
		t.Fatalf("refused\n%s\nwant\n%s", strings.Join(reasons, "\n"), strings.Join(want, "\n"))
	}
	if got := testutil.ToFloat64(s.metrics.loadWarnings.WithLabelValues("system")); got != 3 {
		t.Fatalf("load warnings metric %v, want 3", got)
	}
	// A reload without changes does not count them again.
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.metrics.loadWarnings.WithLabelValues("system")); got != 3 {
		t.Fatalf("load warnings metric after reload %v, want 3", got)
	}

	// The catalog shows the description cut to the standard's limit.
	cat, err := s.GetCatalog(ctx, &baagentv1.GetCatalogRequest{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.SplitSeq(cat.GetText(), "\n") {
		if strings.Contains(l, `name="pdf-forms"`) {
			line = l
		}
	}
	desc := strings.TrimSuffix(line[strings.Index(line, ">")+1:], "</skill>")
	if n := utf8.RuneCountInString(desc); n > MaxDescriptionChars || n < MaxDescriptionChars-40 || !strings.HasSuffix(desc, "…") {
		t.Fatalf("catalog description of %d characters: %q", n, desc)
	}
	// Activation works, with the full instructions.
	res, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "pdf-forms"})
	if err != nil || !strings.Contains(res.GetMessages()[1].GetContent(), "Read every field back") {
		t.Fatalf("activation %v, %v", res, err)
	}
}

// TestModelInvocationDisabledCatalog: a skill only the user may activate is
// not offered to the model, but is listed.
func TestModelInvocationDisabledCatalog(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "open", "Anyone may activate it.")
	addSkill(t, root, "", "manual", "Only the user may activate it.", "disable-model-invocation: true")
	s := newTestServer(t, root)
	cat, err := s.GetCatalog(context.Background(), &baagentv1.GetCatalogRequest{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cat.GetText(), "manual") || !strings.Contains(cat.GetText(), `name="open"`) || cat.GetSkillCount() != 1 {
		t.Fatalf("catalog %q", cat.GetText())
	}
	list, err := s.ListSkills(context.Background(), &baagentv1.ListSkillsRequest{Tenant: "t"})
	if err != nil || len(list.GetSkills()) != 2 || !list.GetSkills()[0].GetDisableModelInvocation() {
		t.Fatalf("list %v, %v", list, err)
	}
}

// TestRevisions: a file skill's revision is a hash of its contents: stable
// across loads, changed by an edit of SKILL.md or of a resource; reading a
// revision that is gone is FailedPrecondition.
func TestRevisions(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "rev", "Has revisions.")
	writeFile(t, root, "rev/references/a.md", "one\n")
	s := newTestServer(t, root)
	ctx := context.Background()
	revision := func() string {
		t.Helper()
		r, err := s.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "t", Name: "rev"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetMetadata().GetRevision()
	}
	r1 := revision()
	if len(r1) != revisionHexChars {
		t.Fatalf("revision %q", r1)
	}
	other := newTestServer(t, root) // another replica on the same files
	if r, _ := other.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "t", Name: "rev"}); r.GetMetadata().GetRevision() != r1 {
		t.Fatalf("another load: %q, want %q", r.GetMetadata().GetRevision(), r1)
	}
	read := func(rev string) (*baagentv1.ReadSkillResourceResponse, error) {
		return s.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "rev", Path: "references/a.md", Revision: rev})
	}
	if resp, err := read(r1); err != nil || resp.GetContent() != "one\n" || resp.GetRevision() != r1 {
		t.Fatalf("read at %s: %v, %v", r1, resp, err)
	}

	writeFile(t, root, "rev/references/a.md", "two\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	r2 := revision()
	if r2 == r1 {
		t.Fatal("a resource edit kept the revision")
	}
	_, err := read(r1)
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition ||
		!strings.Contains(st.Message(), "revision "+r1+" is no longer available (the current revision is "+r2+")") {
		t.Fatalf("read of a gone revision: %v", err)
	}
	if resp, err := read(""); err != nil || resp.GetContent() != "two\n" {
		t.Fatalf("read current: %v, %v", resp, err)
	}
	// Activating a gone revision activates the current one and says so.
	res, err := activate(s, &baagentv1.SkillActivationRequest{SkillName: "rev", Revision: r1,
		Origin: baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_RESTORED})
	if err != nil || res.GetRevision() != r2 || !strings.Contains(res.GetMessages()[0].GetContent(), "revision "+r1+" is no longer available") {
		t.Fatalf("restore: %v, %v", res, err)
	}
}

// TestReadSkillResourceLines pages a resource by lines as file_read does.
func TestReadSkillResourceLines(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "lines", "Has a long file.")
	var b strings.Builder
	for i := range 2500 {
		b.WriteString(strings.Repeat("x", i%3) + "\n")
	}
	writeFile(t, root, "lines/references/long.md", b.String())
	writeFile(t, root, "lines/references/wide.md", strings.Repeat("é", 2100)+"\nshort\r\n")
	writeFile(t, root, "lines/references/heavy.md", strings.Repeat(strings.Repeat("y", 1900)+"\n", 40))
	s := newTestServer(t, root)
	read := func(p string, off int64, limit int32) *baagentv1.ReadSkillResourceResponse {
		t.Helper()
		r, err := s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{
			Tenant: "t", SkillName: "lines", Path: p, Lines: true, LineOffset: off, LineLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := read("references/long.md", 0, 0)
	if !strings.HasPrefix(r.GetContent(), "     1\t\n     2\tx\n") || !r.GetTruncated() || r.GetNextLineOffset() != 2000 || r.GetTotalLines() != 2500 ||
		!strings.HasSuffix(r.GetContent(), "\n(File has more lines. Use 'offset' parameter to read beyond line 2000)") {
		t.Fatalf("first page: %q…, %v", r.GetContent()[:40], r)
	}
	r = read("references/long.md", 2000, 0)
	if !strings.HasPrefix(r.GetContent(), "  2001\t") || r.GetTruncated() || !strings.HasSuffix(r.GetContent(), "(End of file - total 2500 lines)") {
		t.Fatalf("last page: %v", r)
	}
	r = read("references/long.md", 10, 2)
	if r.GetContent() != "    11\tx\n    12\txx\n\n(File has more lines. Use 'offset' parameter to read beyond line 12)" || r.GetNextLineOffset() != 12 {
		t.Fatalf("window: %q", r.GetContent())
	}
	r = read("references/long.md", 9999, 0)
	if r.GetContent() != "\n(End of file - total 2500 lines)" || r.GetTruncated() {
		t.Fatalf("past the end: %q", r.GetContent())
	}
	r = read("references/wide.md", 0, 0)
	if want := "     1\t" + strings.Repeat("é", 2000) + "...\n     2\tshort\n\n(End of file - total 2 lines)"; r.GetContent() != want {
		t.Fatalf("wide: %q", r.GetContent())
	}
	r = read("references/heavy.md", 0, 0)
	if len(r.GetContent()) > MaxPageBytes+200 || !r.GetTruncated() || r.GetNextLineOffset() != 26 ||
		!strings.HasSuffix(r.GetContent(), "(Output truncated at 51200 bytes. Use 'offset' parameter to read beyond line 26)") {
		t.Fatalf("heavy: %d bytes, next %d, tail %q", len(r.GetContent()), r.GetNextLineOffset(), r.GetContent()[len(r.GetContent())-90:])
	}
	// Line and byte paging do not mix.
	_, err := s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{
		Tenant: "t", SkillName: "lines", Path: "references/long.md", Lines: true, Offset: 5})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("lines with offset: %v", err)
	}
	_, err = s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{
		Tenant: "t", SkillName: "lines", Path: "references/long.md", LineOffset: 5})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "line_offset") {
		t.Fatalf("line_offset without lines: %v", err)
	}
}
