package skills

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

const testResourceLimit = 1024

// resourceRoot has skill "res" with text, binary, oversized, hidden and
// linked resources, a sibling skill, and secrets outside the root.
func resourceRoot(t *testing.T) string {
	t.Helper()
	outside := t.TempDir()
	writeFile(t, outside, "secret.txt", "outside secret")
	writeFile(t, outside, "dir/secret.txt", "outside secret in a directory")

	root := t.TempDir()
	addSkill(t, root, "", "res", "Has resources.")
	addSkill(t, root, "", "sibling", "A sibling skill.")
	writeFile(t, root, "sibling/references/private.md", "sibling's file")
	writeFile(t, root, "res/references/guide.md", "# Guide\nRevenue is quantity × price.\n")
	writeFile(t, root, "res/scripts/check.py", "print('ok')\n")
	writeFile(t, root, "res/assets/logo.png", "\x89PNG\r\n\x1a\n\x00\x00")
	writeFile(t, root, "res/assets/big.txt", strings.Repeat("b", testResourceLimit+1))
	writeFile(t, root, "res/.env", "API_KEY=secret")
	writeFile(t, root, "res/references/.hidden/x.md", "hidden")
	writeFile(t, root, "res/a/b/c/d/e/too-deep.md", "deeper than the listing goes")
	symlink(t, "guide.md", filepath.Join(root, "res/references/alias.md"))
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(root, "res/references/out.md"))
	symlink(t, "../../sibling/references/private.md", filepath.Join(root, "res/references/sibling.md"))
	symlink(t, filepath.Join(outside, "dir"), filepath.Join(root, "res/outdir"))
	if err := syscall.Mkfifo(filepath.Join(root, "res/references/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestResourceListing(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, resourceRoot(t), func(o *Options) { o.MaxResourceBytes = testResourceLimit })
	resp, err := s.GetSkill(context.Background(), &baagentv1.GetSkillRequest{Tenant: "t", Name: "res"})
	if err != nil {
		t.Fatal(err)
	}
	// Symbolic links are listed only when they stay inside the skill's
	// folder; hidden names, FIFOs and what is too deep are not listed.
	want := []string{"assets/big.txt", "assets/logo.png", "references/alias.md", "references/guide.md", "scripts/check.py"}
	if got := resp.GetMetadata().GetResources(); !slices.Equal(got, want) {
		t.Fatalf("resources %q, want %q", got, want)
	}
	if resp.GetBody() != "" || resp.GetResources() != nil {
		t.Fatal("level 1 returned the body or resource contents")
	}

	resp, err = s.GetSkill(context.Background(), &baagentv1.GetSkillRequest{Tenant: "t", Name: "res", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*baagentv1.SkillResource{}
	for _, r := range resp.GetResources() {
		got[r.GetPath()] = r
	}
	if g := got["references/guide.md"]; g.GetContent() != "# Guide\nRevenue is quantity × price.\n" || g.GetTruncated() {
		t.Errorf("guide: %v", g)
	}
	if g := got["references/alias.md"]; g.GetContent() != got["references/guide.md"].GetContent() {
		t.Errorf("alias inside the folder: %v", g)
	}
	if g := got["assets/logo.png"]; g.GetContent() != "" || g.GetSizeBytes() != 10 {
		t.Errorf("binary resource inlined: %v", g)
	}
	if g := got["assets/big.txt"]; len(g.GetContent()) != testResourceLimit || !g.GetTruncated() || g.GetSizeBytes() != testResourceLimit+1 {
		t.Errorf("oversized resource: %d bytes, truncated %v", len(g.GetContent()), g.GetTruncated())
	}
	if !strings.Contains(resp.GetBody(), "Instructions of res.") {
		t.Errorf("level 3 lacks the body")
	}
}

func TestResourceConfinement(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, resourceRoot(t), func(o *Options) { o.MaxResourceBytes = testResourceLimit })
	c := baagentv1.NewSkillsServiceClient(vt.Serve(t, s.Register))
	read := func(path string) (*baagentv1.ReadSkillResourceResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "res", Path: path})
	}
	resp, err := read("references/guide.md")
	if err != nil || resp.GetContent() != "# Guide\nRevenue is quantity × price.\n" || resp.GetNextOffset() != resp.GetSizeBytes() {
		t.Fatalf("guide: %v, %v", resp, err)
	}
	if resp, err := read("references/alias.md"); err != nil || !strings.HasPrefix(resp.GetContent(), "# Guide") {
		t.Fatalf("symlink inside the folder: %v, %v", resp, err)
	}
	// Refused at the edge: the path is malformed.
	for _, p := range []string{"../sibling/references/private.md", "references/../../sibling/SKILL.md", "/etc/passwd", "..", "./SKILL.md", `references\guide.md`, "C:/x"} {
		_, err := read(p)
		vt.WantInvalid(t, err, "path")
	}
	// Refused by the service.
	for _, c := range []struct {
		path string
		code codes.Code
		msg  string
	}{
		{".env", codes.InvalidArgument, "must not name a hidden file"},
		{"references/.hidden/x.md", codes.InvalidArgument, "must not name a hidden file"},
		{"references/out.md", codes.PermissionDenied, `resource "references/out.md" leaves the folder of skill "res"`},
		{"references/sibling.md", codes.PermissionDenied, "leaves the folder"},
		{"outdir/secret.txt", codes.PermissionDenied, "leaves the folder"},
		{"assets/big.txt", codes.FailedPrecondition, `resource "assets/big.txt" of skill "res" is 1025 bytes, larger than the 1024 byte limit`},
		{"assets/logo.png", codes.FailedPrecondition, "is binary; only text resources can be read"},
		{"references", codes.FailedPrecondition, "is not a regular file"},
		{"references/fifo", codes.FailedPrecondition, "is not a regular file"},
		{"references/missing.md", codes.NotFound, `resource "references/missing.md" not found in skill "res"`},
	} {
		_, err := read(c.path)
		st := status.Convert(err)
		if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
			t.Errorf("%s: %v, want %v %q", c.path, err, c.code, c.msg)
		}
		if strings.Contains(st.Message(), "outside secret") || strings.Contains(st.Message(), os.TempDir()) {
			t.Errorf("%s: message leaks a path or content: %s", c.path, st.Message())
		}
	}
}

func TestResourcePaging(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "pages", "Paged.")
	text := strings.Repeat("ab€", 100) // 5 bytes a repetition, € is 3 bytes
	writeFile(t, root, "pages/references/long.md", text)
	s := newTestServer(t, root)
	var got strings.Builder
	offset := int64(0)
	for range 1000 {
		resp, err := s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "pages",
			Path: "references/long.md", Offset: offset, Limit: 7})
		if err != nil {
			t.Fatalf("offset %d: %v", offset, err)
		}
		if resp.GetNextOffset() <= offset && offset < resp.GetSizeBytes() {
			t.Fatalf("no progress at offset %d", offset)
		}
		got.WriteString(resp.GetContent())
		offset = resp.GetNextOffset()
		if offset == resp.GetSizeBytes() {
			break
		}
	}
	if got.String() != text {
		t.Fatalf("paged read differs: %d bytes, want %d", got.Len(), len(text))
	}
	// A limit of 1 still makes progress over a 3-byte character.
	resp, err := s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "pages", Path: "references/long.md", Offset: 2, Limit: 1})
	if err != nil || resp.GetContent() != "€" || resp.GetNextOffset() != 5 {
		t.Fatalf("limit 1 at a 3-byte character: %q %v", resp.GetContent(), err)
	}
	_, err = s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "pages", Path: "references/long.md", Offset: 3})
	vt.WantInvalid(t, err, "offset")
	_, err = s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "pages", Path: "references/long.md", Offset: 501})
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("offset past the end: %v", err)
	}
	resp, err = s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "t", SkillName: "pages", Path: "references/long.md", Offset: 500})
	if err != nil || resp.GetContent() != "" || resp.GetNextOffset() != 500 {
		t.Fatalf("offset at the end: %v %v", resp, err)
	}
}

func TestResourceOfAnotherTenantsSkill(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "tenants/acme", "private", "Acme only.")
	writeFile(t, root, "tenants/acme/private/references/r.md", "acme data")
	s := newTestServer(t, root)
	_, err := s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "globex", SkillName: "private", Path: "references/r.md"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("another tenant's resource: %v", err)
	}
	resp, err := s.ReadSkillResource(context.Background(), &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "private", Path: "references/r.md"})
	if err != nil || resp.GetContent() != "acme data" {
		t.Fatalf("own resource: %v %v", resp, err)
	}
}

func TestDefaultResourceLimit(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, t.TempDir())
	if s.opts.MaxResourceBytes != 1<<20 || s.opts.PollInterval <= 0 || s.opts.MaxHistoryMessages != DefaultMaxHistoryMessages {
		t.Fatalf("defaults: %+v", s.opts)
	}
}
