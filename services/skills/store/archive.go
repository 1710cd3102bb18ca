package store

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits of an uploaded skill. They are checked while reading, against the
// bytes actually produced, never against sizes an archive header claims: a
// zip bomb stops at MaxUnpackedBytes whatever its directory says.
const (
	// MaxArchiveBytes caps the upload as sent (compressed).
	MaxArchiveBytes = 10 << 20
	// MaxUnpackedBytes caps the files of a skill together, uncompressed.
	MaxUnpackedBytes = 10 << 20
	// MaxFiles caps the files of a skill, SKILL.md included: the file
	// loader lists at most 512 resources beside SKILL.md.
	MaxFiles = 513
	// maxEntries caps the entries read from an archive (directories and
	// skipped hidden files included), so that an archive of empty
	// directories cannot cost unbounded work.
	maxEntries = 4 * MaxFiles
	// maxPathLen and maxPathDepth bound a file's path inside the skill.
	maxPathLen   = 512
	maxPathDepth = 8
	// tarOverhead is what a tar reader may consume beyond the files'
	// contents (headers, PAX records, padding): a tar.gz that inflates to
	// endless headers stops there.
	tarOverhead = maxEntries * 3 * 512
)

// Limits bound what ReadArchiveLimits accepts; [DefaultLimits] are the
// service's.
type Limits struct {
	ArchiveBytes  int64 // the upload as sent
	UnpackedBytes int64 // the files together
	Files         int   // SKILL.md included
}

// DefaultLimits are the limits of an upload.
var DefaultLimits = Limits{ArchiveBytes: MaxArchiveBytes, UnpackedBytes: MaxUnpackedBytes, Files: MaxFiles}

// SkillFile is the name of a skill's instructions file.
const SkillFile = "SKILL.md"

// Format is the encoding of an upload.
type Format int

// Formats of an upload.
const (
	FormatDetect Format = iota // sniffed from the content
	FormatSkillMD
	FormatZip
	FormatTar
	FormatTarGz
)

func (f Format) String() string {
	switch f {
	case FormatSkillMD:
		return "SKILL.md"
	case FormatZip:
		return "zip"
	case FormatTar:
		return "tar"
	case FormatTarGz:
		return "tar.gz"
	}
	return "detect"
}

// File is one file of a skill, its path relative to the skill folder.
type File struct {
	Path string
	Data []byte
}

// ArchiveError is an upload refused by ReadArchive; its message says what
// is wrong in terms an uploader can act on.
type ArchiveError struct{ msg string }

func (e *ArchiveError) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &ArchiveError{msg: fmt.Sprintf(format, args...)}
}

// ReadArchive unpacks an upload into the skill's files, sorted by path,
// SKILL.md among them. The skill folder is the archive's root, or its single
// top-level folder when SKILL.md is not at the root. Hidden entries (a
// segment starting with "."), and `__MACOSX/` metadata, are skipped, as the
// file loader skips them. Refused: more than MaxArchiveBytes in, more than
// MaxUnpackedBytes or MaxFiles out, `..` or absolute paths, backslashes,
// symbolic and hard links, devices and other special entries, encrypted zip
// entries, duplicate paths, a file that is also a directory, and a missing
// SKILL.md.
func ReadArchive(content []byte, format Format) ([]File, error) {
	return ReadArchiveLimits(content, format, DefaultLimits)
}

// ReadArchiveLimits is ReadArchive with other limits.
func ReadArchiveLimits(content []byte, format Format, lim Limits) ([]File, error) {
	if int64(len(content)) > lim.ArchiveBytes {
		return nil, refuse("upload is %d bytes, larger than the %d byte limit", len(content), lim.ArchiveBytes)
	}
	u := &unpacker{lim: lim}
	if format == FormatDetect {
		format = Detect(content)
	}
	var (
		files []File
		err   error
	)
	switch format {
	case FormatSkillMD:
		if int64(len(content)) > lim.UnpackedBytes {
			return nil, refuse("archive unpacks to more than %d bytes", lim.UnpackedBytes)
		}
		files = []File{{Path: SkillFile, Data: bytes.Clone(content)}}
	case FormatZip:
		files, err = u.readZip(content)
	case FormatTar:
		files, err = u.readTar(bytes.NewReader(content))
	case FormatTarGz:
		zr, gerr := gzip.NewReader(bytes.NewReader(content))
		if gerr != nil {
			return nil, refuse("not a gzip stream: %v", gerr)
		}
		files, err = u.readTar(zr)
	default:
		return nil, refuse("unknown archive format %d", format)
	}
	if err != nil {
		return nil, err
	}
	return finish(files)
}

// Detect sniffs an upload's format from its first bytes: zip, gzip and tar
// magic numbers, otherwise a SKILL.md.
func Detect(content []byte) Format {
	switch {
	case bytes.HasPrefix(content, []byte("PK\x03\x04")), bytes.HasPrefix(content, []byte("PK\x05\x06")):
		return FormatZip
	case bytes.HasPrefix(content, []byte{0x1f, 0x8b}):
		return FormatTarGz
	case len(content) >= 262 && string(content[257:262]) == "ustar":
		return FormatTar
	}
	return FormatSkillMD
}

// unpacker collects files within the limits.
type unpacker struct {
	lim     Limits
	files   []File
	total   int64
	entries int
}

// entry counts an archive entry against maxEntries.
func (u *unpacker) entry() error {
	u.entries++
	if u.entries > maxEntries {
		return refuse("archive has more than %d entries", maxEntries)
	}
	return nil
}

// add reads one regular file from r, stopping at the unpacked limit.
func (u *unpacker) add(name string, r io.Reader) error {
	p, skip, err := cleanPath(name)
	if err != nil || skip {
		return err
	}
	if len(u.files) == u.lim.Files {
		return refuse("archive has more than %d files", u.lim.Files)
	}
	remaining := u.lim.UnpackedBytes - u.total
	data, err := io.ReadAll(io.LimitReader(r, remaining+1))
	if err != nil {
		return refuse("%s: %v", p, err)
	}
	if int64(len(data)) > remaining {
		return refuse("archive unpacks to more than %d bytes", u.lim.UnpackedBytes)
	}
	u.total += int64(len(data))
	u.files = append(u.files, File{Path: p, Data: data})
	return nil
}

func (u *unpacker) readZip(content []byte) ([]File, error) {
	zr, err := zip.NewReader(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		return nil, refuse("not a zip archive: %v", err)
	}
	if len(zr.File) > maxEntries {
		return nil, refuse("archive has more than %d entries", maxEntries)
	}
	for _, f := range zr.File {
		if err := u.entry(); err != nil {
			return nil, err
		}
		mode := f.Mode()
		switch {
		case mode.IsDir():
			if _, _, err := cleanPath(f.Name); err != nil {
				return nil, err
			}
			continue
		case !mode.IsRegular():
			return nil, refuse("%q is not a regular file (%s); links and special files are not allowed", f.Name, mode.Type())
		case f.Flags&0x1 != 0:
			return nil, refuse("%q is encrypted", f.Name)
		}
		if _, skip, err := cleanPath(f.Name); err != nil || skip {
			if err != nil {
				return nil, err
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, refuse("%q: %v", f.Name, err)
		}
		err = u.add(f.Name, rc)
		_ = rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return u.files, nil
}

func (u *unpacker) readTar(r io.Reader) ([]File, error) {
	lr := &io.LimitedReader{R: r, N: u.lim.UnpackedBytes + tarOverhead + 1}
	tr := tar.NewReader(lr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if lr.N <= 0 {
			return nil, refuse("archive unpacks to more than %d bytes", u.lim.UnpackedBytes)
		}
		if err != nil {
			return nil, refuse("not a valid tar archive: %v", err)
		}
		if err := u.entry(); err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if _, _, err := cleanPath(h.Name); err != nil {
				return nil, err
			}
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is what old tars write for a file
			if err := u.add(h.Name, tr); err != nil {
				return nil, err
			}
		case tar.TypeXGlobalHeader:
		default:
			return nil, refuse("%q is not a regular file (tar type %q); links and special files are not allowed", h.Name, h.Typeflag)
		}
		if lr.N <= 0 {
			return nil, refuse("archive unpacks to more than %d bytes", u.lim.UnpackedBytes)
		}
	}
	return u.files, nil
}

// cleanPath checks an archive path and returns it without a leading "./"
// or trailing "/"; skip is set for hidden entries and macOS metadata.
func cleanPath(name string) (p string, skip bool, err error) {
	switch {
	case name == "":
		return "", false, refuse("an entry has an empty name")
	case len(name) > maxPathLen:
		return "", false, refuse("an entry's path is longer than %d bytes", maxPathLen)
	case !utf8.ValidString(name):
		return "", false, refuse("%q is not valid UTF-8", name)
	case strings.ContainsAny(name, "\\\x00"):
		return "", false, refuse("%q contains a backslash or NUL", name)
	case strings.HasPrefix(name, "/"):
		return "", false, refuse("%q is an absolute path", name)
	}
	p = strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	if p == "" || p == "." {
		return "", true, nil
	}
	segs := strings.Split(p, "/")
	if len(segs) > maxPathDepth {
		return "", false, refuse("%q is nested deeper than %d levels", name, maxPathDepth)
	}
	for _, s := range segs {
		switch {
		case s == "..":
			return "", false, refuse("%q leaves the skill folder", name)
		case s == "" || s == ".":
			return "", false, refuse("%q is not a clean path", name)
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f {
				return "", false, refuse("%q contains a control character", name)
			}
		}
	}
	for _, s := range segs {
		if strings.HasPrefix(s, ".") || s == "__MACOSX" {
			return p, true, nil
		}
	}
	if path.Clean(p) != p {
		return "", false, refuse("%q is not a clean path", name)
	}
	return p, false, nil
}

// finish strips a single top folder, checks for duplicates and SKILL.md,
// and sorts the files.
func finish(files []File) ([]File, error) {
	if len(files) == 0 {
		return nil, refuse("archive has no files; it needs a %s", SkillFile)
	}
	if !slices.ContainsFunc(files, func(f File) bool { return f.Path == SkillFile }) {
		top, _, _ := strings.Cut(files[0].Path, "/")
		prefix := top + "/"
		for i := range files {
			if !strings.HasPrefix(files[i].Path, prefix) {
				return nil, refuse("no %s at the archive's root or in a single top folder", SkillFile)
			}
		}
		for i := range files {
			files[i].Path = strings.TrimPrefix(files[i].Path, prefix)
		}
		if !slices.ContainsFunc(files, func(f File) bool { return f.Path == SkillFile }) {
			return nil, refuse("no %s at the archive's root or in a single top folder", SkillFile)
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for i := 1; i < len(files); i++ {
		prev, cur := files[i-1].Path, files[i].Path
		if prev == cur {
			return nil, refuse("%q appears twice", cur)
		}
	}
	// A file that is also a directory ("a" and "a/b"): with sorted paths,
	// "a/…" sorts after "a" but not always right after it ("a-x" sorts
	// between), so check each file against the set.
	set := make(map[string]bool, len(files))
	for _, f := range files {
		set[f.Path] = true
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if set[d] {
				return nil, refuse("%q is both a file and a directory", d)
			}
		}
	}
	return files, nil
}
