package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// binarySniffBytes is how much of a file is checked for NUL bytes.
const binarySniffBytes = 8 << 10

// fileRead is `file_read {path, offset, limit}`: numbered lines, paged, with
// truncation and hints (docs/concepts/tools.md#truncation).
type fileRead struct{}

func (fileRead) Spec() tool.Spec {
	return spec("file_read",
		"Read a text file from the workspace. Returns numbered lines (cat -n style); long files are paged: "+
			"offset is the 0-based line to start at and limit the number of lines (default and maximum 2000). "+
			"Lines longer than 2000 characters are cut and output stops at 50 KiB, with a hint telling how to read further.",
		`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","minLength":1,"maxLength":1024,"description":"File path relative to the workspace, e.g. orders.csv"},
			"offset":{"type":"integer","minimum":0,"description":"0-based line to start reading at (default 0)"},
			"limit":{"type":"integer","minimum":1,"maximum":2000,"description":"Number of lines to read (default 2000)"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD)
}

func (fileRead) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	p, terr := workspacePath(argString(c.Args, "path"))
	if terr != nil {
		return tool.Result{}, terr
	}
	offset := argInt(c.Args, "offset", 0, 0, 1<<40)
	limit := argInt(c.Args, "limit", truncate.DefaultReadLimit, 1, truncate.DefaultReadLimit)

	f, err := c.Workspace.Open(p)
	if err != nil {
		return tool.Result{}, fsError(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tool.Result{}, fsError(p, err)
	}
	if fi.IsDir() {
		return tool.Result{}, invalid("IS_A_DIRECTORY", "%s is a directory; use glob to list its files", p)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniffBytes); isBinary(head) {
		return tool.Result{}, invalid("BINARY_FILE", "%s is a binary file and cannot be read as text", p)
	}

	var window []string
	n, more := 0, false
	for {
		if n&1023 == 0 && ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		line, err := truncate.ReadLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return tool.Result{}, fsError(p, err)
		}
		n++
		if n <= offset {
			continue
		}
		if len(window) == limit {
			more = true
			break
		}
		window = append(window, string(line))
	}
	total := n
	if more {
		total = -1
	}
	page := truncate.Format(window, min(offset, n), total, truncate.MaxOutputBytes)
	first, last := min(offset, n)+1, min(offset, n)+page.Shown
	var brief string
	switch {
	case page.Shown == 0 && n == 0:
		brief = fmt.Sprintf("%s is empty", p)
	case page.Shown == 0:
		brief = fmt.Sprintf("%s has %s; offset %d is past the end", p, plural(n, "line"), offset)
	case more || page.CutByBytes:
		brief = fmt.Sprintf("Read lines %d-%d of %s (more lines follow)", first, last, p)
	default:
		brief = fmt.Sprintf("Read lines %d-%d of %s (%s in total)", first, last, p, plural(n, "line"))
	}
	return tool.Result{Data: tool.Document{Text: page.Text, Brief: brief}}, nil
}

// fileWrite is `file_write {path, content}`: create or replace a file,
// creating parent directories; the write is atomic.
type fileWrite struct{ opts Options }

func (fileWrite) Spec() tool.Spec {
	return spec("file_write",
		"Create a file in the workspace or replace its whole content; parent directories are created. "+
			"Use file_edit to change part of an existing file.",
		`{"type":"object","additionalProperties":false,"required":["path","content"],"properties":{
			"path":{"type":"string","minLength":1,"maxLength":1024,"description":"File path relative to the workspace"},
			"content":{"type":"string","description":"The complete new content of the file"}}}`,
		false, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (t fileWrite) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	p, terr := workspacePath(argString(c.Args, "path"))
	if terr != nil {
		return tool.Result{}, terr
	}
	if p == "." {
		return tool.Result{}, invalid("IS_A_DIRECTORY", "path must name a file")
	}
	if terr := refuseSymlinkOut(c.Workspace, p); terr != nil {
		return tool.Result{}, terr
	}
	content := argString(c.Args, "content")
	if len(content) > t.opts.MaxFileBytes {
		return tool.Result{}, invalid("CONTENT_TOO_LARGE", "content is %d bytes; the limit is %d", len(content), t.opts.MaxFileBytes)
	}
	if fi, err := c.Workspace.Lstat(p); err == nil && fi.IsDir() {
		return tool.Result{}, invalid("IS_A_DIRECTORY", "%s is a directory", p)
	}
	_, existed := c.Workspace.Lstat(p)
	err := quotaWrite(c, p, len(content), func() error {
		if dir := path.Dir(p); dir != "." {
			if err := c.Workspace.MkdirAll(dir, 0o750); err != nil {
				return fsError(dir, err)
			}
		}
		if err := writeAtomic(c.Workspace, p, []byte(content)); err != nil {
			return fsError(p, err)
		}
		return nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	verb := "Created"
	if existed == nil {
		verb = "Wrote"
	}
	lines := len(truncate.SplitLines(content))
	msg := fmt.Sprintf("%s %s (%s, %s)", verb, p, plural(len(content), "byte"), plural(lines, "line"))
	return tool.Result{Data: tool.Document{Text: msg, Brief: msg}}, nil
}

// quotaWrite runs write, which creates or replaces the file name with size
// bytes, through the call's workspace quota if there is one.
func quotaWrite(c tool.Call, name string, size int, write func() error) error {
	if c.QuotaWrite == nil {
		return write()
	}
	return c.QuotaWrite(name, int64(size), write)
}

// writeAtomic replaces name with data through a temporary file in the same
// directory and a rename, so a reader never sees half a file.
func writeAtomic(root *os.Root, name string, data []byte) error {
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp")
	mode := fs.FileMode(0o640)
	if fi, err := root.Stat(name); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return nil
}

// fileEdit is `file_edit {path, old_string, new_string, replace_all}`: exact
// replacement, refusing a missing or ambiguous match.
type fileEdit struct{ opts Options }

func (fileEdit) Spec() tool.Spec {
	return spec("file_edit",
		"Replace text in a workspace file. old_string must match the file exactly (whitespace included) and be unique, "+
			"unless replace_all is true; include surrounding lines to make it unique. The file's line endings are kept.",
		`{"type":"object","additionalProperties":false,"required":["path","old_string","new_string"],"properties":{
			"path":{"type":"string","minLength":1,"maxLength":1024,"description":"File path relative to the workspace"},
			"old_string":{"type":"string","minLength":1,"description":"Exact text to replace"},
			"new_string":{"type":"string","description":"Replacement text (must differ from old_string)"},
			"replace_all":{"type":"boolean","description":"Replace every occurrence (default false)"}}}`,
		false, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (t fileEdit) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	p, terr := workspacePath(argString(c.Args, "path"))
	if terr != nil {
		return tool.Result{}, terr
	}
	oldS, newS := argString(c.Args, "old_string"), argString(c.Args, "new_string")
	if oldS == "" {
		return tool.Result{}, invalid("EMPTY_OLD_STRING", "old_string must not be empty; use file_write to create a file")
	}
	if oldS == newS {
		return tool.Result{}, invalid("NO_CHANGE", "old_string and new_string are identical")
	}
	fi, err := c.Workspace.Stat(p)
	if err != nil {
		return tool.Result{}, fsError(p, err)
	}
	if fi.IsDir() {
		return tool.Result{}, invalid("IS_A_DIRECTORY", "%s is a directory", p)
	}
	if fi.Size() > int64(t.opts.MaxFileBytes) {
		return tool.Result{}, invalid("FILE_TOO_LARGE", "%s is %d bytes; file_edit edits files up to %d bytes", p, fi.Size(), t.opts.MaxFileBytes)
	}
	data, err := c.Workspace.ReadFile(p)
	if err != nil {
		return tool.Result{}, fsError(p, err)
	}
	text := string(data)
	// Keep CRLF files CRLF: the model writes \n.
	if strings.Contains(text, "\r\n") && !strings.Contains(oldS, "\r\n") {
		oldS = strings.ReplaceAll(oldS, "\n", "\r\n")
		newS = strings.ReplaceAll(newS, "\n", "\r\n")
	}
	count := strings.Count(text, oldS)
	switch {
	case count == 0:
		return tool.Result{}, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "MATCH_NOT_FOUND",
			"old_string was not found in %s; read the file and copy the text exactly, whitespace included", p)
	case count > 1 && !argBool(c.Args, "replace_all"):
		return tool.Result{}, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, "AMBIGUOUS_MATCH",
			"old_string occurs %d times in %s; add surrounding lines to make it unique, or set replace_all to true", count, p)
	}
	if !argBool(c.Args, "replace_all") {
		count = 1
	}
	out := strings.Replace(text, oldS, newS, count)
	if len(out) > t.opts.MaxFileBytes {
		return tool.Result{}, invalid("FILE_TOO_LARGE", "the edited file would be %d bytes; the limit is %d", len(out), t.opts.MaxFileBytes)
	}
	err = quotaWrite(c, p, len(out), func() error {
		if err := writeAtomic(c.Workspace, p, []byte(out)); err != nil {
			return fsError(p, err)
		}
		return nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	removed := (strings.Count(oldS, "\n") + 1) * count
	added := (strings.Count(newS, "\n") + 1) * count
	msg := fmt.Sprintf("Edited %s: replaced %s (+%d -%d lines)", p, plural(count, "occurrence"), added, removed)
	return tool.Result{Data: tool.Document{Text: msg, Brief: msg}}, nil
}
