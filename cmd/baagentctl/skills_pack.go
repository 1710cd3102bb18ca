package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Packing a skill for upload: a folder becomes a tar.gz in memory, built
// reproducibly (sorted, no times or owners) so that the same files make the
// same bytes; a SKILL.md, zip, tar or tar.gz file is sent as it is. The
// skill's name comes from its SKILL.md front matter.

// defaultMaxSkillBytes is the gateway's default upload limit
// (-gateway-max-skill-bytes), which is the skills store's limit on an
// upload as sent; --max-bytes follows a gateway configured otherwise.
const defaultMaxSkillBytes = 10 << 20

// maxUnpackedSkillBytes is the skills store's limit on a skill's files
// together, uncompressed (10 MiB, whatever the gateway's upload limit): a
// folder over it is refused here rather than after the upload.
const maxUnpackedSkillBytes = 10 << 20

// maxSkillMDBytes bounds the SKILL.md read from an archive to learn the
// skill's name.
const maxSkillMDBytes = 1 << 20

// packedSkill is what push sends.
type packedSkill struct {
	name    string // from the SKILL.md front matter
	content []byte
	format  baagentv1.SkillArchiveFormat
	files   int // files packed from a folder (0 for a file sent as is)
}

// errTooLarge reports a skill over the limit.
type errTooLarge struct {
	what  string
	limit int64
}

func (e errTooLarge) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes, the upload limit (--max-bytes, the gateway's -gateway-max-skill-bytes)", e.what, e.limit)
}

// packSkill reads what push was given: a folder or a file.
func packSkill(p string, limit int64) (*packedSkill, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return packSkillDir(p, limit)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is neither a folder nor a regular file", p)
	}
	if st.Size() > limit {
		return nil, errTooLarge{p, limit}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge{p, limit}
	}
	format := skillFormat(p, data)
	md := data
	if format != baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD {
		if md, err = archiveSkillMD(data, format); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	name, err := frontMatterName(md)
	if err != nil {
		return nil, fmt.Errorf("%s: SKILL.md: %w", p, err)
	}
	return &packedSkill{name: name, content: data, format: format}, nil
}

// skillFormat is a file's encoding, from its content (zip, gzip and tar
// signatures), else its name; anything else is taken for a SKILL.md.
func skillFormat(name string, data []byte) baagentv1.SkillArchiveFormat {
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ
	case len(data) >= 262 && string(data[257:262]) == "ustar":
		return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR
	}
	switch lower := strings.ToLower(name); {
	case strings.HasSuffix(lower, ".zip"):
		return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP
	case strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ
	case strings.HasSuffix(lower, ".tar"):
		return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR
	}
	return baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD
}

// packSkillDir packs a skill folder as a tar.gz with its files at the
// root. Symbolic links and special files are refused (a link could pull
// in files from outside the folder); so is a folder whose files add up to
// more than the store accepts unpacked (maxUnpackedSkillBytes), without
// reading them.
func packSkillDir(dir string, limit int64) (*packedSkill, error) {
	// The folder itself may be a link (the user's choice); links inside
	// it may not.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	md, err := os.ReadFile(filepath.Join(dir, "SKILL.md"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s has no SKILL.md at its top", dir)
		}
		return nil, err
	}
	name, err := frontMatterName(md)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "SKILL.md"), err)
	}
	out := &capped{limit: limit, what: "the packed folder " + dir}
	gz, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	var raw int64
	files := 0
	epoch := time.Unix(0, 0).UTC()
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: rel, ModTime: epoch, Format: tar.FormatPAX}
		switch mode := info.Mode(); {
		case mode&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: copy the file into the skill folder instead", p)
		case mode.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, rel+"/", 0o755
			return tw.WriteHeader(hdr)
		case !mode.IsRegular():
			return fmt.Errorf("%s is not a regular file (%s)", p, mode.Type())
		default:
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, info.Size(), 0o644
			if mode&0o111 != 0 {
				hdr.Mode = 0o755 // scripts stay executable
			}
		}
		if raw += info.Size(); raw > maxUnpackedSkillBytes {
			return fmt.Errorf("the files of %s add up to more than %d bytes, the skill store's limit on a skill's files uncompressed", dir, maxUnpackedSkillBytes)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		files++
		return copyFile(tw, p, info.Size())
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, err
	}
	return &packedSkill{name: name, content: out.Bytes(), format: baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ, files: files}, nil
}

// copyFile writes exactly size bytes of the file at p (a file that changed
// size while packing is an error, not a corrupt archive).
func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s changed while it was packed", p)
	}
	return err
}

// capped is a buffer that refuses to grow past limit.
type capped struct {
	bytes.Buffer
	limit int64
	what  string
}

func (c *capped) Write(p []byte) (int, error) {
	if int64(c.Len()+len(p)) > c.limit {
		return 0, errTooLarge{c.what, c.limit}
	}
	return c.Buffer.Write(p)
}

// archiveSkillMD returns the SKILL.md of an archive: at its root or in its
// one top folder, as the skills service reads it.
func archiveSkillMD(data []byte, format baagentv1.SkillArchiveFormat) ([]byte, error) {
	isSkillMD := func(name string) bool {
		name = strings.TrimPrefix(path.Clean("/"+name), "/")
		dir, file := path.Split(name)
		return file == "SKILL.md" && strings.Count(dir, "/") <= 1
	}
	switch format {
	case baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP:
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("not a zip archive: %w", err)
		}
		for _, f := range zr.File {
			if !isSkillMD(f.Name) {
				continue
			}
			return readZipFile(f)
		}
	case baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR, baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ:
		var r io.Reader = bytes.NewReader(data)
		if format == baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ {
			gz, err := gzip.NewReader(r)
			if err != nil {
				return nil, fmt.Errorf("not a gzip file: %w", err)
			}
			defer gz.Close()
			r = gz
		}
		tr := tar.NewReader(r)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("not a tar archive: %w", err)
			}
			if hdr.Typeflag == tar.TypeReg && isSkillMD(hdr.Name) {
				return readAtMost(tr, maxSkillMDBytes)
			}
		}
	default:
		return nil, fmt.Errorf("unknown archive format %v", format)
	}
	return nil, errors.New("no SKILL.md at the archive's root or in its top folder")
}

func readZipFile(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readAtMost(rc, maxSkillMDBytes)
}

func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("SKILL.md is larger than %d bytes", limit)
	}
	return data, nil
}

// frontMatterName reads the name of a SKILL.md from its YAML front matter
// (between the opening `---` line and the next one).
func frontMatterName(md []byte) (string, error) {
	s := strings.TrimPrefix(string(md), "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if !strings.HasPrefix(s, "---\n") {
		return "", errors.New("no front matter: SKILL.md must start with a --- line")
	}
	body := s[len("---\n"):]
	end := strings.Index(body, "\n---")
	if strings.HasPrefix(body, "---") {
		end = 0
	} else if end < 0 {
		return "", errors.New("front matter not closed by a --- line")
	} else {
		end++ // keep the newline before ---
	}
	var fm struct {
		Name any `yaml:"name"`
	}
	if err := yaml.Unmarshal([]byte(body[:end]), &fm); err != nil {
		return "", fmt.Errorf("front matter: %w", err)
	}
	name, ok := fm.Name.(string)
	if !ok || name == "" {
		return "", errors.New("front matter has no name")
	}
	return name, nil
}
