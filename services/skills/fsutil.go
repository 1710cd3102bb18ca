package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// errNotRegular refuses directories, devices, sockets and FIFOs where a file
// is expected.
var errNotRegular = errors.New("not a regular file")

// errTooLarge reports a file over the caller's size limit.
type errTooLarge struct{ size, limit int64 }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("%d bytes, larger than the %d byte limit", e.size, e.limit)
}

// openRegular opens name inside r for reading and checks that it is a
// regular file. O_NONBLOCK makes opening a FIFO return at once instead of
// blocking the loader or a request until a writer appears; it has no effect
// on regular files. The check is on the opened file, so a file swapped
// between a stat and the open cannot slip through.
func openRegular(r *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, errNotRegular
	}
	return f, fi, nil
}

// readRegular reads a whole regular file of at most limit bytes from r.
func readRegular(r *os.Root, name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := openRegular(r, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fi, errTooLarge{fi.Size(), limit}
	}
	// Read into a buffer of the stat's size plus one byte, so that a file
	// of the expected size takes one read and the end of file one more,
	// with one allocation. The file may grow after the stat: at most
	// limit+1 bytes are read to know.
	data := make([]byte, 0, fi.Size()+1)
	lr := io.LimitReader(f, limit+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fi, err
		}
	}
	if int64(len(data)) > limit {
		return nil, fi, errTooLarge{int64(len(data)), limit}
	}
	return data, fi, nil
}

// readDirCapped lists at most max entries of the directory name inside r,
// with the directory's own FileInfo (from the open handle, which saves a
// stat by path); more reports truncation, so a directory with millions of
// entries costs a bounded amount.
func readDirCapped(r *os.Root, name string, max int) (entries []fs.DirEntry, fi fs.FileInfo, truncated bool, err error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, nil, false, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, false, err
	}
	entries, err = f.ReadDir(max + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fi, false, err
	}
	if len(entries) > max {
		return entries[:max], fi, true, nil
	}
	return entries, fi, false, nil
}

// fsReason turns a file system error into a short reason without the
// absolute path of the skills root, which clients and models must not see.
func fsReason(err error) string {
	var te errTooLarge
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "not found"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, errNotRegular):
		return errNotRegular.Error()
	case errors.As(err, &te):
		return te.Error()
	case isEscape(err):
		return "leaves its folder (symbolic link or '..')"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root (through `..` or a symbolic link). The os package does not export the
// error value, so this matches its text.
func isEscape(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
