package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/gateway"
)

const cliKey = "acme-cli-key-0123456789"

// skillStore is an in-memory SkillsService behind a real gateway, with the
// skill store's documented codes: Aborted for preconditions, NotFound,
// revisions per write.
type skillStore struct {
	baagentv1.UnimplementedSkillsServiceServer
	mu       sync.Mutex
	stored   map[string]*baagentv1.PutSkillRequest // project/name
	revs     map[string]int
	disabled map[string]bool
	rev      int
	last     *baagentv1.PutSkillRequest
}

func (f *skillStore) PutSkill(_ context.Context, req *baagentv1.PutSkillRequest) (*baagentv1.PutSkillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := req.GetProject() + "/" + req.GetName()
	_, exists := f.stored[key]
	switch {
	case req.GetIfNoneMatch() && exists:
		return nil, status.Errorf(codes.Aborted, "skill %q already exists", req.GetName())
	case req.GetIfMatch() != "" && (!exists || strconv.Itoa(f.revs[key]) != req.GetIfMatch()):
		return nil, status.Errorf(codes.Aborted, "skill %q is not at revision %s", req.GetName(), req.GetIfMatch())
	}
	f.rev++
	f.stored[key], f.revs[key], f.last = req, f.rev, req
	meta := &baagentv1.SkillMetadata{Name: req.GetName(), Revision: strconv.Itoa(f.rev), Warnings: []string{"description is long"}}
	return &baagentv1.PutSkillResponse{Skill: meta, Replaced: exists}, nil
}

func (f *skillStore) DeleteSkill(_ context.Context, req *baagentv1.DeleteSkillRequest) (*baagentv1.DeleteSkillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := req.GetProject() + "/" + req.GetName()
	if _, ok := f.stored[key]; !ok {
		return nil, status.Errorf(codes.NotFound, "skill %q not found", req.GetName())
	}
	delete(f.stored, key)
	return &baagentv1.DeleteSkillResponse{Revision: strconv.Itoa(f.revs[key])}, nil
}

func (f *skillStore) SetSystemSkillState(_ context.Context, req *baagentv1.SetSystemSkillStateRequest) (*baagentv1.SetSystemSkillStateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.GetName() != "sales-analysis" {
		return nil, status.Errorf(codes.NotFound, "no system skill %q", req.GetName())
	}
	f.disabled[req.GetTenant()+"/"+req.GetProject()] = req.GetDisabled()
	return &baagentv1.SetSystemSkillStateResponse{Skill: &baagentv1.SkillMetadata{Name: req.GetName(), IsDisabled: req.GetDisabled()}}, nil
}

func (f *skillStore) ListSkills(_ context.Context, req *baagentv1.ListSkillsRequest) (*baagentv1.ListSkillsResponse, error) {
	if req.GetScope() != baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM {
		return nil, status.Error(codes.Unimplemented, "the fake lists system skills only")
	}
	return &baagentv1.ListSkillsResponse{Skills: []*baagentv1.SkillMetadata{{Name: "sales-analysis", Scope: baagentv1.SkillScope_SKILL_SCOPE_SYSTEM}}}, nil
}

func (f *skillStore) lastPut() *baagentv1.PutSkillRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// startGatewayWithStore serves a real gateway (API key cliKey, tenant
// acme) whose skills peer is a skillStore; it returns the flags that point
// baagentctl at it.
func startGatewayWithStore(t *testing.T) ([]string, *skillStore) {
	t.Helper()
	f := &skillStore{stored: map[string]*baagentv1.PutSkillRequest{}, revs: map[string]int{}, disabled: map[string]bool{}}
	sconn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterSkillsServiceServer(gs, f) })
	srv := gateway.New(gateway.Options{
		Skills:  baagentv1.NewSkillsServiceClient(sconn),
		APIKeys: map[string]string{cliKey: "acme"},
		Logger:  slog.New(slog.DiscardHandler),
	})
	gconn := vt.Serve(t, srv.Register)
	return []string{"--addr=" + gconn.Target()}, f
}

// keyed is the command line flags + args with the API key after the
// skills subcommand (--api-key is a flag of the command, not global).
func keyed(flags []string, args ...string) []string {
	out := append([]string(nil), flags...)
	for i, a := range args {
		if a == "skills" && i+1 < len(args) {
			out = append(out, args[:i+2]...)
			out = append(out, "--api-key="+cliKey)
			return append(out, args[i+2:]...)
		}
	}
	return append(out, args...)
}

// writeSkill writes a skill folder named dir under root with the given
// SKILL.md name and extra files (path → content), returning its path.
func writeSkill(t testing.TB, root, dir, name string, files map[string]string) string {
	t.Helper()
	p := filepath.Join(root, dir)
	all := map[string]string{"SKILL.md": "---\nname: " + name + "\ndescription: Test skill.\n---\n# " + name + "\n"}
	for k, v := range files {
		all[k] = v
	}
	for rel, content := range all {
		full := filepath.Join(p, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// untar lists a tar.gz's entries as path → content (directories as "").
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(hdr.ModTime.Truncate(0)) || hdr.ModTime.Unix() != 0 || hdr.Uid != 0 {
			t.Errorf("%s: time %v uid %d: the archive is not reproducible", hdr.Name, hdr.ModTime, hdr.Uid)
		}
		b, _ := io.ReadAll(tr)
		out[hdr.Name] = string(b)
	}
}

func TestSkillsPushFolder(t *testing.T) {
	t.Parallel()
	flags, f := startGatewayWithStore(t)
	dir := writeSkill(t, t.TempDir(), "brief", "board-brief", map[string]string{"references/notes.md": "notes", "scripts/run.sh": "#!/bin/sh\n"})

	code, stdout, stderr := ctl(t, keyed(flags, "skills", "push", dir)...)
	if code != 0 || !strings.Contains(stdout, "created skill board-brief for the tenant: revision 1 (3 files") || !strings.Contains(stdout, "warning: description is long") {
		t.Fatalf("push: exit %d\n%s%s", code, stdout, stderr)
	}
	p := f.lastPut()
	if p.GetTenant() != "acme" || p.GetName() != "board-brief" || p.GetFormat() != baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ || p.GetIfNoneMatch() || p.GetIfMatch() != "" {
		t.Fatalf("forwarded %v", p)
	}
	files := untar(t, p.GetContent())
	if files["SKILL.md"] == "" || files["references/notes.md"] != "notes" || files["scripts/run.sh"] != "#!/bin/sh\n" {
		t.Errorf("archive: %v", files)
	}
	first := p.GetContent()

	// The same files pack to the same bytes; the second push replaces.
	code, stdout, _ = ctl(t, keyed(flags, "skills", "push", "--if-match", "1", dir)...)
	if code != 0 || !strings.Contains(stdout, "replaced skill board-brief") || !bytes.Equal(f.lastPut().GetContent(), first) || f.lastPut().GetIfMatch() != "1" {
		t.Fatalf("replace: exit %d %s", code, stdout)
	}
	// Create-only on an existing skill: the store's Aborted.
	code, _, stderr = ctl(t, keyed(flags, "skills", "push", dir, "--create")...)
	if code != 1 || !strings.Contains(stderr, "already exists") || !strings.Contains(stderr, "Aborted") {
		t.Fatalf("--create: exit %d %s", code, stderr)
	}
	// A project skill, as JSON.
	code, stdout, stderr = ctl(t, keyed(flags, "--json", "skills", "push", dir, "--project", "north")...)
	var resp baagentv1.GatewayServicePutSkillResponse
	if code != 0 || protojson.Unmarshal([]byte(stdout), &resp) != nil || resp.GetSkill().GetRevision() != "3" || f.lastPut().GetProject() != "north" {
		t.Fatalf("--json --project: exit %d %s %s", code, stdout, stderr)
	}
}

func TestSkillsPushFiles(t *testing.T) {
	t.Parallel()
	flags, f := startGatewayWithStore(t)
	root := t.TempDir()
	dir := writeSkill(t, root, "md", "md-skill", nil)

	code, _, stderr := ctl(t, keyed(flags, "skills", "push", filepath.Join(dir, "SKILL.md"))...)
	if code != 0 || f.lastPut().GetFormat() != baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD || f.lastPut().GetName() != "md-skill" {
		t.Fatalf("SKILL.md: exit %d %s %v", code, stderr, f.lastPut())
	}

	// A zip with the skill in one top folder, sent as it is.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("zipped/SKILL.md")
	_, _ = io.WriteString(w, "---\r\nname: zipped\r\ndescription: x\r\n---\r\nbody\r\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zpath := filepath.Join(root, "skill.bin")
	if err := os.WriteFile(zpath, zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = ctl(t, keyed(flags, "skills", "push", zpath)...)
	if code != 0 || f.lastPut().GetFormat() != baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP || f.lastPut().GetName() != "zipped" || !bytes.Equal(f.lastPut().GetContent(), zb.Bytes()) {
		t.Fatalf("zip: exit %d %s", code, stderr)
	}

	// A tar.gz made by pushing a folder, saved and pushed as a file.
	p, err := packSkillDir(dir, defaultMaxSkillBytes)
	if err != nil {
		t.Fatal(err)
	}
	tgz := filepath.Join(root, "skill.tgz")
	if err := os.WriteFile(tgz, p.content, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = ctl(t, keyed(flags, "skills", "push", tgz)...)
	if code != 0 || f.lastPut().GetFormat() != baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ || f.lastPut().GetName() != "md-skill" {
		t.Fatalf("tar.gz: exit %d %s", code, stderr)
	}
}

func TestSkillsPushRefuses(t *testing.T) {
	t.Parallel()
	flags, f := startGatewayWithStore(t)
	root := t.TempDir()

	linked := writeSkill(t, root, "linked", "linked", nil)
	if err := os.Symlink("/etc/passwd", filepath.Join(linked, "passwd")); err != nil {
		t.Fatal(err)
	}
	big := writeSkill(t, root, "big", "big", nil)
	noise := make([]byte, 4096)
	_, _ = rand.Read(noise)
	if err := os.WriteFile(filepath.Join(big, "noise.bin"), noise, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	nameless := filepath.Join(root, "nameless.md")
	if err := os.WriteFile(nameless, []byte("---\ndescription: x\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"skills", "push", linked}, 1, "is a symbolic link"},
		{[]string{"skills", "push", big, "--max-bytes", "2048"}, 1, "larger than 2048 bytes"},
		{[]string{"skills", "push", filepath.Join(big, "noise.bin"), "--max-bytes", "2048"}, 1, "larger than 2048 bytes"},
		{[]string{"skills", "push", empty}, 1, "has no SKILL.md"},
		{[]string{"skills", "push", nameless}, 1, "front matter has no name"},
		{[]string{"skills", "push", filepath.Join(root, "missing")}, 1, "no such file"},
		{[]string{"skills", "push"}, 2, "want exactly one skill folder or file"},
		{[]string{"skills", "push", big, "--create", "--if-match", "1"}, 2, "exclude each other"},
		{[]string{"skills", "rm"}, 2, "want exactly one skill NAME"},
		{[]string{"skills", "disable"}, 2, "want exactly one system skill NAME"},
		{[]string{"skills", "override", "sales-analysis"}, 2, "want the system skill NAME"},
	}
	for _, c := range cases {
		code, _, stderr := ctl(t, keyed(flags, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: exit %d %q; want %d and %q", c.args, code, stderr, c.code, c.stderr)
		}
	}
	if p := f.lastPut(); p != nil {
		t.Errorf("a refused push reached the store: %v", p.GetName())
	}
	// The gateway refuses what the CLI let through: a bad project.
	code, _, stderr := ctl(t, keyed(flags, "skills", "push", big, "--project", "a.b")...)
	if code != 1 || !strings.Contains(stderr, "project") || !strings.Contains(stderr, "InvalidArgument") {
		t.Errorf("bad project: exit %d %s", code, stderr)
	}
}

func TestSkillsRmDisableEnableOverride(t *testing.T) {
	t.Parallel()
	flags, f := startGatewayWithStore(t)
	root := t.TempDir()
	dir := writeSkill(t, root, "brief", "board-brief", nil)
	if code, _, stderr := ctl(t, keyed(flags, "skills", "push", dir)...); code != 0 {
		t.Fatalf("push: %s", stderr)
	}
	code, stdout, stderr := ctl(t, keyed(flags, "skills", "rm", "board-brief", "--if-match", "1")...)
	if code != 0 || !strings.Contains(stdout, "deleted skill board-brief of the tenant (revision 1)") {
		t.Fatalf("rm: exit %d %s %s", code, stdout, stderr)
	}
	code, _, stderr = ctl(t, keyed(flags, "skills", "rm", "board-brief")...)
	if code != 1 || !strings.Contains(stderr, "NotFound") {
		t.Fatalf("rm twice: exit %d %s", code, stderr)
	}

	code, stdout, _ = ctl(t, keyed(flags, "skills", "disable", "sales-analysis", "--project", "p1")...)
	f.mu.Lock()
	disabled := f.disabled["acme/p1"]
	f.mu.Unlock()
	if code != 0 || !disabled || !strings.Contains(stdout, "disabled system skill sales-analysis for project p1") {
		t.Fatalf("disable: exit %d %s", code, stdout)
	}
	code, stdout, _ = ctl(t, keyed(flags, "--json", "skills", "enable", "sales-analysis", "--project", "p1")...)
	var st baagentv1.GatewayServiceSetSystemSkillStateResponse
	if code != 0 || protojson.Unmarshal([]byte(stdout), &st) != nil || st.GetSkill().GetIsDisabled() {
		t.Fatalf("enable --json: exit %d %s", code, stdout)
	}
	if code, _, stderr = ctl(t, keyed(flags, "skills", "disable", "nope")...); code != 1 || !strings.Contains(stderr, "NotFound") {
		t.Fatalf("disable an unknown skill: exit %d %s", code, stderr)
	}

	over := writeSkill(t, root, "over", "sales-analysis", nil)
	code, stdout, stderr = ctl(t, keyed(flags, "skills", "override", "sales-analysis", over)...)
	if code != 0 || !strings.Contains(stdout, "overrode system skill sales-analysis for the tenant") || f.lastPut().GetName() != "sales-analysis" {
		t.Fatalf("override: exit %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr = ctl(t, keyed(flags, "skills", "override", "board-brief", dir)...); code != 1 || !strings.Contains(stderr, `no such system skill "board-brief"`) {
		t.Fatalf("override of no system skill: exit %d %s", code, stderr)
	}
	if code, _, stderr = ctl(t, keyed(flags, "skills", "override", "sales-analysis", dir)...); code != 1 || !strings.Contains(stderr, `is skill "board-brief", not "sales-analysis"`) {
		t.Fatalf("override with another name: exit %d %s", code, stderr)
	}
}

func TestSkillsListScope(t *testing.T) {
	t.Parallel()
	addr := startSkills(t)
	code, stdout, stderr := ctl(t, addr, "skills", "list", "--scope", "system")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"SOURCE", "REVISION", "DISABLED", "OVERRIDDEN", "sales-analysis"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, stdout)
		}
	}
	for _, c := range []struct{ args []string }{
		{[]string{"skills", "list", "--scope", "everything"}},
		{[]string{"skills", "list", "--scope", "project"}},
	} {
		if code, _, _ := ctl(t, append([]string{addr}, c.args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
	}
}

func TestFrontMatterName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"---\nname: a-b\n---\nbody":          "a-b",
		"\ufeff---\r\nname: x\r\n---\r\n":    "x",
		"---\nname: \"quoted\"\nx: 1\n---\n": "quoted",
	} {
		if got, err := frontMatterName([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"", "name: x", "---\nname: x\n", "---\n---\n", "---\nname: [1]\n---\n", "---\nname: : :\n---\n"} {
		if got, err := frontMatterName([]byte(in)); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}

// FuzzSkillFile reads arbitrary bytes as each kind of pushed file: never a
// panic, and a name only from a SKILL.md that has one.
func FuzzSkillFile(f *testing.F) {
	f.Add([]byte("---\nname: a\n---\n"))
	p, err := packSkillDir(writeSkill(f, f.TempDir(), "s", "s", map[string]string{"r.md": "r"}), defaultMaxSkillBytes)
	if err == nil {
		f.Add(p.content)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("SKILL.md")
	_, _ = io.WriteString(w, "---\nname: z\n---\n")
	_ = zw.Close()
	f.Add(zb.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []baagentv1.SkillArchiveFormat{
			baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP,
			baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR,
			baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ,
		} {
			if md, err := archiveSkillMD(data, format); err == nil && len(md) > maxSkillMDBytes {
				t.Fatalf("%v: SKILL.md of %d bytes", format, len(md))
			}
		}
		if name, err := frontMatterName(data); err == nil && name == "" {
			t.Fatal("empty name accepted")
		}
		_ = skillFormat("x", data)
	})
}
