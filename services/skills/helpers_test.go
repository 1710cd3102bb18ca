package skills

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFile writes content at root/rel, creating directories.
func writeFile(tb testing.TB, root, rel, content string) {
	tb.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// skillMD returns a SKILL.md with the given name and description and extra
// front matter lines.
func skillMD(name, description string, extra ...string) string {
	var b strings.Builder
	b.WriteString("---\nname: " + name + "\ndescription: " + description + "\n")
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	b.WriteString("---\n# " + name + "\n\nInstructions of " + name + ".\n")
	return b.String()
}

// addSkill writes dir/name/SKILL.md (dir relative to root, "" for system).
func addSkill(tb testing.TB, root, dir, name, description string, extra ...string) {
	tb.Helper()
	writeFile(tb, root, filepath.ToSlash(filepath.Join(dir, name, "SKILL.md")), skillMD(name, description, extra...))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer returns a Server on root with a quiet logger.
func newTestServer(tb testing.TB, root string, mutate ...func(*Options)) *Server {
	tb.Helper()
	opts := Options{Root: root, Logger: quietLogger(), PollInterval: 10 * time.Millisecond}
	for _, m := range mutate {
		m(&opts)
	}
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return s
}

// names returns the names of the skills in a list.
func skillNames[T interface{ GetName() string }](list []T) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.GetName()
	}
	return out
}

// symlink creates newname pointing at oldname.
func symlink(tb testing.TB, oldname, newname string) {
	tb.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		tb.Fatal(err)
	}
}

// examplesDir is the repository's sample skills root.
const examplesDir = "../../examples/skills"
