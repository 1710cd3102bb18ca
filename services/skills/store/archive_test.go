package store

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

const testSkillMD = "---\nname: demo\ndescription: A demo skill.\n---\nDo the demo.\n"

type entry struct {
	name string
	data string
	mode fs.FileMode // zip; 0 is a regular file
	typ  byte        // tar; 0 is a regular file
	link string
}

func zipOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: typ, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func paths(files []File) string {
	var p []string
	for _, f := range files {
		p = append(p, f.Path)
	}
	return strings.Join(p, ",")
}

func TestReadArchiveAccepts(t *testing.T) {
	t.Parallel()
	skill := entry{name: "SKILL.md", data: testSkillMD}
	ref := entry{name: "references/guide.md", data: "guide"}
	cases := []struct {
		name    string
		content []byte
		format  Format
		want    string
	}{
		{"plain SKILL.md", []byte(testSkillMD), FormatDetect, "SKILL.md"},
		{"zip at root", zipOf(t, skill, ref), FormatDetect, "SKILL.md,references/guide.md"},
		{"zip in one top folder", zipOf(t, entry{name: "demo/", mode: fs.ModeDir | 0o755}, entry{name: "demo/SKILL.md", data: testSkillMD}, entry{name: "demo/scripts/run.py", data: "print(1)"}), FormatZip, "SKILL.md,scripts/run.py"},
		{"tar with ./ prefix and dirs", tarOf(t, entry{name: "./", typ: tar.TypeDir}, entry{name: "./SKILL.md", data: testSkillMD}, entry{name: "./assets/", typ: tar.TypeDir}, entry{name: "./assets/a.txt", data: "a"}), FormatDetect, "SKILL.md,assets/a.txt"},
		{"tar.gz", gz(t, tarOf(t, skill, ref)), FormatDetect, "SKILL.md,references/guide.md"},
		{"hidden and macOS entries skipped", zipOf(t, skill, entry{name: ".git/config", data: "x"}, entry{name: "__MACOSX/._SKILL.md", data: "x"}, entry{name: "references/.env", data: "x"}), FormatZip, "SKILL.md"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			files, err := ReadArchive(c.content, c.format)
			if err != nil {
				t.Fatalf("ReadArchive: %v", err)
			}
			if got := paths(files); got != c.want {
				t.Errorf("paths = %s, want %s", got, c.want)
			}
		})
	}
}

func TestReadArchiveRefuses(t *testing.T) {
	t.Parallel()
	skill := entry{name: "SKILL.md", data: testSkillMD}
	big := strings.Repeat("a", MaxUnpackedBytes/4+1)
	many := []entry{skill}
	for i := range MaxFiles {
		many = append(many, entry{name: "r/" + strings.Repeat("x", 3) + string(rune('a'+i%26)) + strings.Repeat("y", i/26), data: "z"})
	}
	cases := []struct {
		name    string
		content []byte
		format  Format
		want    string
	}{
		{"too large in", make([]byte, MaxArchiveBytes+1), FormatSkillMD, "larger than"},
		{"traversal", zipOf(t, skill, entry{name: "../evil", data: "x"}), FormatZip, "leaves the skill folder"},
		{"traversal inside", tarOf(t, skill, entry{name: "a/../../evil", data: "x"}), FormatTar, "leaves the skill folder"},
		{"absolute", tarOf(t, skill, entry{name: "/etc/passwd", data: "x"}), FormatTar, "absolute"},
		{"backslash", zipOf(t, skill, entry{name: "a\\..\\b", data: "x"}), FormatZip, "backslash"},
		{"tar symlink", tarOf(t, skill, entry{name: "link", typ: tar.TypeSymlink, link: "/etc/passwd"}), FormatTar, "not a regular file"},
		{"tar hard link", tarOf(t, skill, entry{name: "link", typ: tar.TypeLink, link: "SKILL.md"}), FormatTar, "not a regular file"},
		{"tar device", tarOf(t, skill, entry{name: "dev", typ: tar.TypeChar}), FormatTar, "not a regular file"},
		{"zip symlink", zipOf(t, skill, entry{name: "link", data: "/etc/passwd", mode: fs.ModeSymlink | 0o777}), FormatZip, "not a regular file"},
		{"duplicate", tarOf(t, skill, entry{name: "a", data: "1"}, entry{name: "./a", data: "2"}), FormatTar, "appears twice"},
		{"file and dir", tarOf(t, skill, entry{name: "a", data: "1"}, entry{name: "a/b", data: "2"}), FormatTar, "both a file and a directory"},
		{"no SKILL.md", zipOf(t, entry{name: "README.md", data: "x"}), FormatZip, "no SKILL.md"},
		{"two top folders", zipOf(t, entry{name: "a/SKILL.md", data: testSkillMD}, entry{name: "b/x", data: "x"}), FormatZip, "no SKILL.md"},
		{"too many files", zipOf(t, many...), FormatZip, "more than"},
		{"unpacked too large", gz(t, tarOf(t, skill, entry{name: "a", data: big}, entry{name: "b", data: big}, entry{name: "c", data: big}, entry{name: "d", data: big})), FormatTarGz, "unpacks to more than"},
		{"not a zip", []byte("PK\x03\x04garbage"), FormatDetect, "not a zip"},
		{"not gzip", []byte("garbage"), FormatTarGz, "not a gzip"},
		{"empty tar", tarOf(t), FormatTar, "no files"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReadArchive(c.content, c.format)
			var ae *ArchiveError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an ArchiveError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// A zip bomb: a highly compressible entry whose header claims a small size.
// The reader stops at the unpacked limit while inflating, whatever the
// header says.
func TestReadArchiveZipBomb(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if w, err := zw.Create("SKILL.md"); err != nil {
		t.Fatal(err)
	} else if _, err := w.Write([]byte(testSkillMD)); err != nil {
		t.Fatal(err)
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "bomb", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range 2 * MaxUnpackedBytes / len(zeros) {
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > MaxArchiveBytes {
		t.Fatalf("bomb is %d bytes, not compact enough for the test", buf.Len())
	}
	_, err = ReadArchive(buf.Bytes(), FormatDetect)
	if err == nil || !strings.Contains(err.Error(), "unpacks to more than") {
		t.Fatalf("err = %v, want the unpacked limit", err)
	}
}

// A gzip bomb of a tar: endless zero blocks after a valid header.
func TestReadArchiveTarGzBomb(t *testing.T) {
	t.Parallel()
	raw := tarOf(t, entry{name: "SKILL.md", data: testSkillMD}, entry{name: "big", data: strings.Repeat("\x00", 2*MaxUnpackedBytes)})
	_, err := ReadArchive(gz(t, raw), FormatDetect)
	if err == nil || !strings.Contains(err.Error(), "unpacks to more than") {
		t.Fatalf("err = %v, want the unpacked limit", err)
	}
}

func TestDetect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []byte
		want Format
	}{
		{zipOf(t, entry{name: "SKILL.md", data: "x"}), FormatZip},
		{tarOf(t, entry{name: "SKILL.md", data: "x"}), FormatTar},
		{gz(t, []byte("x")), FormatTarGz},
		{[]byte(testSkillMD), FormatSkillMD},
		{nil, FormatSkillMD},
	} {
		if got := Detect(c.in); got != c.want {
			t.Errorf("Detect = %v, want %v", got, c.want)
		}
	}
}

func FuzzReadArchive(f *testing.F) {
	skill := entry{name: "SKILL.md", data: testSkillMD}
	f.Add(zipOf(f, skill, entry{name: "references/a.md", data: "a"}), uint8(0))
	f.Add(tarOf(f, skill, entry{name: "link", typ: tar.TypeSymlink, link: "../x"}), uint8(0))
	f.Add(gz(f, tarOf(f, entry{name: "d/SKILL.md", data: testSkillMD}, entry{name: "d/../x", data: "x"})), uint8(0))
	f.Add([]byte(testSkillMD), uint8(1))
	f.Add(zipOf(f, entry{name: "a/", mode: fs.ModeDir}, entry{name: "a/SKILL.md", data: "x"}), uint8(2))
	f.Fuzz(func(t *testing.T, content []byte, format uint8) {
		// Small limits, so that a mutated bomb hits them in microseconds
		// rather than inflating megabytes on every execution.
		lim := Limits{ArchiveBytes: 1 << 20, UnpackedBytes: 64 << 10, Files: 16}
		files, err := ReadArchiveLimits(content, Format(format%5), lim)
		if err != nil {
			var ae *ArchiveError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an ArchiveError", err)
			}
			return
		}
		var total int
		seen := map[string]bool{}
		hasSkill := false
		for _, f := range files {
			total += len(f.Data)
			if seen[f.Path] {
				t.Fatalf("duplicate %q", f.Path)
			}
			seen[f.Path] = true
			hasSkill = hasSkill || f.Path == SkillFile
			if strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") && strings.Contains("/"+f.Path+"/", "/../") {
				t.Fatalf("unsafe path %q", f.Path)
			}
			if _, _, err := cleanPath(f.Path); err != nil {
				t.Fatalf("returned path %q is not clean: %v", f.Path, err)
			}
		}
		if !hasSkill || len(files) > lim.Files || total > int(lim.UnpackedBytes) {
			t.Fatalf("accepted %d files, %d bytes, SKILL.md %v", len(files), total, hasSkill)
		}
	})
}
