package skills

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Limits of level-3 reads.
const (
	// DefaultMaxResourceBytes is the default of Options.MaxResourceBytes:
	// larger resource files are listed, ReadSkillResource refuses them, and
	// level-3 responses carry only their first MaxResourceBytes, marked
	// truncated.
	DefaultMaxResourceBytes = 1 << 20
	// MaxReadLimit is the default and cap of ReadSkillResourceRequest.limit
	// (contract: 256 KiB).
	MaxReadLimit = 256 << 10
	// maxInlineBytes caps the resource text one GetSkill or ActivateSkill
	// response carries at level 3, well under gRPC's default 4 MiB message
	// limit; what does not fit is marked truncated and read page by page.
	maxInlineBytes = 2 << 20
)

// skillRoot opens the skill's folder as a root: every level-3 read goes
// through it, so `..`, absolute paths and symbolic links that leave the
// folder are refused by the kernel-backed os.Root, not by string checks.
func (s *snapshot) skillRoot(sk *skill) (*os.Root, error) {
	return s.root.OpenRoot(sk.dir)
}

// inlineResources reads the skill's resources for a level-3 response: each
// text file up to maxBytes and all of them together up to maxInlineBytes.
// Binary files are listed with their size and no content. A file removed
// since the load is left out.
func (s *snapshot) inlineResources(sk *skill, maxBytes int64) ([]*baagentv1.SkillResource, error) {
	if len(sk.resources) == 0 {
		return nil, nil
	}
	sr, err := s.skillRoot(sk)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "skill %q: folder not readable: %s", sk.name, fsReason(err))
	}
	defer sr.Close()
	remaining := int64(maxInlineBytes)
	out := make([]*baagentv1.SkillResource, 0, len(sk.resources))
	for _, p := range sk.resources {
		r, n, ok := readInline(sr, p, min(maxBytes, remaining))
		if ok {
			out = append(out, r)
			remaining -= n
		}
	}
	return out, nil
}

func readInline(sr *os.Root, p string, limit int64) (*baagentv1.SkillResource, int64, bool) {
	f, fi, err := openRegular(sr, p)
	if err != nil {
		return nil, 0, false
	}
	defer f.Close()
	r := &baagentv1.SkillResource{Path: p, SizeBytes: fi.Size()}
	if limit <= 0 {
		r.Truncated = fi.Size() > 0
		return r, 0, true
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, 0, false
	}
	cut := int64(len(data)) < fi.Size()
	text, ok := asText(data, cut)
	if !ok {
		return r, 0, true // binary: listed, not inlined
	}
	r.Content = text
	r.Truncated = cut
	return r, int64(len(text)), true
}

// asText returns data as a string when it is text: valid UTF-8 without NUL
// bytes. When data was cut, a character split by the cut is dropped first.
func asText(data []byte, cut bool) (string, bool) {
	if cut {
		i := len(data) - 1
		for i > 0 && len(data)-i < utf8.UTFMax && !utf8.RuneStart(data[i]) {
			i--
		}
		if i >= 0 && !utf8.FullRune(data[i:]) {
			data = data[:i]
		}
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	return string(data), true
}

// readResource serves one page of a resource file (ReadSkillResource).
func (s *snapshot) readResource(sk *skill, rel string, offset, limit, maxBytes int64) (*baagentv1.ReadSkillResourceResponse, error) {
	if err := checkResourcePath(rel); err != nil {
		return nil, err
	}
	sr, err := s.skillRoot(sk)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "skill %q: folder not readable: %s", sk.name, fsReason(err))
	}
	defer sr.Close()
	data, _, err := readRegular(sr, rel, maxBytes)
	if err != nil {
		return nil, resourceError(sk.name, rel, err)
	}
	if _, ok := asText(data, false); !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "resource %q of skill %q is binary; only text resources can be read", rel, sk.name)
	}
	size := int64(len(data))
	if offset > size {
		return nil, status.Errorf(codes.OutOfRange, "offset %d is past the end of resource %q (%d bytes)", offset, rel, size)
	}
	if offset < size && !utf8.RuneStart(data[offset]) {
		var e validate.Errors
		e.Add("offset", "must be at a character boundary; pass the previous next_offset")
		return nil, e.Err()
	}
	if limit <= 0 || limit > MaxReadLimit {
		limit = MaxReadLimit
	}
	end := min(size, offset+limit)
	if end < size {
		// End the page at a character boundary, but always make progress.
		e := end
		for e > offset && !utf8.RuneStart(data[e]) {
			e--
		}
		if e == offset {
			_, n := utf8.DecodeRune(data[offset:])
			e = offset + int64(n)
		}
		end = e
	}
	return &baagentv1.ReadSkillResourceResponse{
		Content:    string(data[offset:end]),
		SizeBytes:  size,
		NextOffset: end,
	}, nil
}

// checkResourcePath refuses hidden names (`.env`, `.git/config`) that the
// listing does not show either: an author's stray secrets are not resources.
// `..`, absolute and malformed paths were refused at the edge.
func checkResourcePath(rel string) error {
	for seg := range strings.SplitSeq(rel, "/") {
		if hiddenName(seg) {
			var e validate.Errors
			e.Add("path", "must not name a hidden file or directory (a segment starting with '.')")
			return e.Err()
		}
	}
	return nil
}

func resourceError(skillName, rel string, err error) error {
	var tl errTooLarge
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return status.Errorf(codes.NotFound, "resource %q not found in skill %q", rel, skillName)
	case isEscape(err):
		return status.Errorf(codes.PermissionDenied, "resource %q leaves the folder of skill %q", rel, skillName)
	case errors.Is(err, errNotRegular):
		return status.Errorf(codes.FailedPrecondition, "resource %q of skill %q is not a regular file", rel, skillName)
	case errors.As(err, &tl):
		return status.Errorf(codes.FailedPrecondition, "resource %q of skill %q is %d bytes, larger than the %d byte limit", rel, skillName, tl.size, tl.limit)
	case errors.Is(err, fs.ErrPermission):
		return status.Errorf(codes.PermissionDenied, "resource %q of skill %q is not readable", rel, skillName)
	}
	return status.Errorf(codes.Unavailable, "resource %q of skill %q: %s", rel, skillName, fsReason(err))
}
