package skillmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FileName is the file that makes a folder a skill.
const FileName = "SKILL.md"

// Report is the result of checking one skill folder.
type Report struct {
	// Dir is the folder as given.
	Dir string `json:"dir"`
	// Name is the skill's name when the front matter could be read.
	Name string `json:"name,omitempty"`
	// Violations lists every broken rule, in the order found.
	Violations []Violation `json:"violations"`
}

// Valid reports whether the folder breaks no rule.
func (r Report) Valid() bool { return len(r.Violations) == 0 }

// ValidateDir checks the skill folder dir strictly, as the reference
// validator does: every violation is reported, lenient ones included. The
// folder name is the last element of dir.
func ValidateDir(dir string) Report {
	r := Report{Dir: dir, Violations: []Violation{}}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		r.Violations = append(r.Violations, Violation{Field: "folder", Message: reason(err)})
		return r
	case !fi.IsDir():
		r.Violations = append(r.Violations, Violation{Field: "folder", Message: "not a directory"})
		return r
	}
	data, err := readFile(filepath.Join(dir, FileName))
	if err != nil {
		r.Violations = append(r.Violations, Violation{Field: FileName, Message: reason(err)})
		return r
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sk, vs := Parse(data, filepath.Base(abs))
	if sk != nil {
		r.Name = sk.Name
	}
	r.Violations = append(r.Violations, vs...)
	return r
}

func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSkillFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSkillFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxSkillFileBytes)
	}
	return data, nil
}

func reason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "not found"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
