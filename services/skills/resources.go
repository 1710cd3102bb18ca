package skills

import (
	"bytes"
	"context"
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

// resourceFS reads the files bundled with one revision of a skill. A file
// skill reads its folder; a backend that keeps skills elsewhere (stored
// skills) provides its own.
type resourceFS interface {
	// open opens the regular file rel (relative, checked) for reading, with
	// its size. Errors are fs errors (fs.ErrNotExist, fs.ErrPermission),
	// errNotRegular, an escape from the folder, or a gRPC status when the
	// backend itself cannot answer (a store that is unavailable).
	open(ctx context.Context, rel string) (io.ReadCloser, int64, error)
}

// folderFS is a file skill's folder under the skills root. Every level-3
// read goes through an os.Root opened on the folder, so `..`, absolute paths
// and symbolic links that leave it are refused by the kernel-backed root,
// not by string checks.
type folderFS struct {
	root *os.Root
	dir  string
}

func (f folderFS) open(_ context.Context, rel string) (io.ReadCloser, int64, error) {
	sr, err := f.root.OpenRoot(f.dir)
	if err != nil {
		return nil, 0, err
	}
	defer sr.Close() // the opened file stays valid
	file, fi, err := openRegular(sr, rel)
	if err != nil {
		return nil, 0, err
	}
	return file, fi.Size(), nil
}

// readAll reads a whole resource of at most limit bytes.
func readAll(ctx context.Context, files resourceFS, rel string, limit int64) ([]byte, error) {
	f, size, err := files.open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, errTooLarge{size, limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge{int64(len(data)), limit}
	}
	return data, nil
}

// inlineResources reads the skill's resources for a level-3 response: each
// text file up to maxBytes and all of them together up to maxInlineBytes.
// Binary files are listed with their size and no content. A file removed
// since the load is left out; a backend that cannot answer fails the call
// rather than answering with some of the files.
func inlineResources(ctx context.Context, sk *skill, maxBytes int64) ([]*baagentv1.SkillResource, error) {
	if len(sk.resources) == 0 || sk.files == nil {
		return nil, nil
	}
	remaining := int64(maxInlineBytes)
	out := make([]*baagentv1.SkillResource, 0, len(sk.resources))
	for _, p := range sk.resources {
		r, n, ok, err := readInline(ctx, sk.files, p.path, min(maxBytes, remaining))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
			remaining -= n
		}
	}
	return out, nil
}

// readInline reads one resource for inlineResources: ok is false for a file
// that cannot be read, err is set only when the backend is unavailable.
func readInline(ctx context.Context, files resourceFS, p string, limit int64) (_ *baagentv1.SkillResource, _ int64, ok bool, _ error) {
	f, size, err := files.open(ctx, p)
	if err != nil {
		if st, isStatus := status.FromError(err); isStatus {
			return nil, 0, false, st.Err()
		}
		return nil, 0, false, nil
	}
	defer f.Close()
	r := &baagentv1.SkillResource{Path: p, SizeBytes: size}
	if limit <= 0 {
		r.Truncated = size > 0
		return r, 0, true, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, 0, false, nil
	}
	cut := int64(len(data)) < size
	text, ok := asText(data, cut)
	if !ok {
		return r, 0, true, nil // binary: listed, not inlined
	}
	r.Content = text
	r.Truncated = cut
	return r, int64(len(text)), true, nil
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

// resourcePage is what ReadSkillResource asks for.
type resourcePage struct {
	rel           string
	offset, limit int64
	// byLines selects line paging (lineOffset, lineLimit) over bytes.
	byLines    bool
	lineOffset int64
	lineLimit  int
}

// readResource serves one page of a resource file (ReadSkillResource): a
// byte range, or numbered lines as the skill_read tool shows them.
func readResource(ctx context.Context, sk *skill, pg resourcePage, maxBytes int64) (*baagentv1.ReadSkillResourceResponse, error) {
	rel := pg.rel
	if err := checkResourcePath(rel); err != nil {
		return nil, err
	}
	if sk.files == nil {
		return nil, status.Errorf(codes.NotFound, "resource %q not found in skill %q", rel, sk.name)
	}
	data, err := readAll(ctx, sk.files, rel, maxBytes)
	if err != nil {
		return nil, resourceError(sk.name, rel, err)
	}
	if _, ok := asText(data, false); !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "resource %q of skill %q is binary; only text resources can be read", rel, sk.name)
	}
	size := int64(len(data))
	if pg.byLines {
		p := formatLines(splitLines(string(data)), pg.lineOffset, pg.lineLimit)
		resp := &baagentv1.ReadSkillResourceResponse{
			Content:    p.text,
			SizeBytes:  size,
			NextOffset: size,
			Revision:   sk.revision,
			TotalLines: p.total,
			Truncated:  p.next >= 0,
		}
		if p.next >= 0 {
			resp.NextLineOffset = p.next
		}
		return resp, nil
	}
	offset, limit := pg.offset, pg.limit
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
		Revision:   sk.revision,
		Truncated:  end < size,
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
	if st, ok := status.FromError(err); ok {
		return st.Err() // the backend's own answer (a store unavailable)
	}
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
