package builtin

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// skippedDirs are never searched (seed 004 §7.2.4).
var skippedDirs = map[string]bool{".git": true, "node_modules": true, "__pycache__": true}

// maxGlobStars bounds `**` segments so that matching stays polynomial.
const maxGlobStars = 4

// compileGlob checks a glob: `*`, `?`, `[seq]`, `[!seq]` within a path
// segment and `**` for any number of directories. It returns the segments.
func compileGlob(pattern string) ([]string, *tool.Error) {
	if pattern == "" {
		return nil, invalid("INVALID_GLOB", "pattern is required")
	}
	if strings.ContainsRune(pattern, '\\') || path.IsAbs(pattern) {
		return nil, invalid("INVALID_GLOB", "pattern %q must be relative to the workspace and use '/'", pattern)
	}
	segs := strings.Split(path.Clean(pattern), "/")
	stars := 0
	for i, s := range segs {
		if s == ".." {
			return nil, outside(pattern)
		}
		if s == "**" {
			stars++
			continue
		}
		s = strings.ReplaceAll(s, "[!", "[^")
		if _, err := path.Match(s, ""); err != nil {
			return nil, invalid("INVALID_GLOB", "pattern %q: %v", pattern, err)
		}
		segs[i] = s
	}
	if stars > maxGlobStars {
		return nil, invalid("INVALID_GLOB", "pattern %q has more than %d '**' segments", pattern, maxGlobStars)
	}
	return segs, nil
}

// matchGlob matches a slash path against compiled segments.
func matchGlob(segs, name []string) bool {
	for len(segs) > 0 {
		if segs[0] == "**" {
			rest := segs[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchGlob(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(segs[0], name[0]); !ok {
			return false
		}
		segs, name = segs[1:], name[1:]
	}
	return len(name) == 0
}

// walkFiles calls fn for each regular file under dir (a clean workspace
// path), skipping skippedDirs and not following symlinks, at most
// DefaultMaxWalkedFile files; fn returns false to stop.
func walkFiles(ctx context.Context, root *os.Root, dir string, fn func(p string, d fs.DirEntry) bool) error {
	visited := 0
	err := fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // an unreadable subdirectory is skipped, not fatal
		}
		if d.IsDir() {
			if p != dir && skippedDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		visited++
		if visited > DefaultMaxWalkedFile || ctx.Err() != nil {
			return fs.SkipAll
		}
		if !fn(p, d) {
			return fs.SkipAll
		}
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// globTool is `glob {pattern}`.
type globTool struct{}

func (globTool) Spec() tool.Spec {
	return spec("glob",
		"Find files in the workspace by glob pattern: * and ? match within a path segment, [abc] and [!abc] sets, "+
			"** any number of directories (`**/*.csv`). Returns matching paths, sorted, with their sizes; "+
			".git, node_modules and __pycache__ are skipped.",
		`{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","minLength":1,"maxLength":1024,"description":"Glob pattern relative to the workspace, e.g. **/*.csv"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (globTool) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	pattern := argString(c.Args, "pattern")
	segs, terr := compileGlob(pattern)
	if terr != nil {
		return tool.Result{}, terr
	}
	type hit struct {
		path string
		size int64
	}
	var hits []hit
	more := false
	err := walkFiles(ctx, c.Workspace, ".", func(p string, d fs.DirEntry) bool {
		if !matchGlob(segs, strings.Split(p, "/")) {
			return true
		}
		if len(hits) == DefaultMaxMatches {
			more = true
			return false
		}
		var size int64
		if fi, err := d.Info(); err == nil {
			size = fi.Size()
		}
		hits = append(hits, hit{p, size})
		return true
	})
	if err != nil {
		return tool.Result{}, fsError(".", err)
	}
	slices.SortFunc(hits, func(a, b hit) int { return strings.Compare(a.path, b.path) })
	var b strings.Builder
	if len(hits) == 0 {
		fmt.Fprintf(&b, "No files match %s", pattern)
	}
	for _, h := range hits {
		fmt.Fprintf(&b, "%s (%s)\n", h.path, plural(int(h.size), "byte"))
	}
	brief := fmt.Sprintf("Found %s matching %s", plural(len(hits), "file"), pattern)
	if more {
		fmt.Fprintf(&b, "\n(Showing the first %d matches; use a more specific pattern)", DefaultMaxMatches)
		brief = fmt.Sprintf("Found more than %d files matching %s", DefaultMaxMatches, pattern)
	}
	return tool.Result{Data: tool.Document{Text: strings.TrimSuffix(b.String(), "\n"), Brief: brief}}, nil
}

// grepTool is `grep {pattern, path, glob, case_insensitive, context_lines}`.
type grepTool struct{}

func (grepTool) Spec() tool.Spec {
	return spec("grep",
		"Search file contents in the workspace with a regular expression (RE2 syntax). Output lines are "+
			"`path:line:text`, context lines `path-line-text`, groups separated by `--`. Binary files are skipped.",
		`{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","minLength":1,"maxLength":1024,"description":"Regular expression"},
			"path":{"type":"string","minLength":1,"maxLength":1024,"description":"File or directory to search, relative to the workspace (default: the whole workspace)"},
			"glob":{"type":"string","minLength":1,"maxLength":256,"description":"Only search files whose name (or path, if the glob has a '/') matches, e.g. *.csv"},
			"case_insensitive":{"type":"boolean","description":"Ignore case (default false)"},
			"context_lines":{"type":"integer","minimum":0,"maximum":20,"description":"Lines of context before and after each match (default 0)"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (grepTool) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	expr := argString(c.Args, "pattern")
	if argBool(c.Args, "case_insensitive") {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return tool.Result{}, invalid("INVALID_REGEX", "pattern: %v", err)
	}
	dir := "."
	if p := argString(c.Args, "path"); p != "" {
		var terr *tool.Error
		if dir, terr = workspacePath(p); terr != nil {
			return tool.Result{}, terr
		}
	}
	var filter []string
	if g := argString(c.Args, "glob"); g != "" {
		var terr *tool.Error
		if filter, terr = compileGlob(g); terr != nil {
			return tool.Result{}, terr
		}
	}
	ctxLines := argInt(c.Args, "context_lines", 0, 0, 20)

	g := grepper{re: re, ctxLines: ctxLines}
	fi, err := c.Workspace.Stat(dir)
	if err != nil {
		return tool.Result{}, fsError(dir, err)
	}
	if !fi.IsDir() {
		if err := g.file(ctx, c.Workspace, dir); err != nil {
			return tool.Result{}, err
		}
	} else {
		err = walkFiles(ctx, c.Workspace, dir, func(p string, d fs.DirEntry) bool {
			if filter != nil {
				name := []string{d.Name()}
				if len(filter) > 1 {
					name = strings.Split(p, "/")
				}
				if !matchGlob(filter, name) {
					return true
				}
			}
			if fi, err := d.Info(); err != nil || fi.Size() > DefaultMaxGrepFile {
				return true
			}
			if err := g.file(ctx, c.Workspace, p); err != nil {
				return false
			}
			return !g.full
		})
		if err != nil {
			return tool.Result{}, fsError(dir, err)
		}
	}
	text := strings.TrimSuffix(g.out.String(), "\n")
	brief := fmt.Sprintf("Found %s in %s", plural(g.matches, "match"), plural(g.files, "file"))
	if g.matches == 0 {
		text = "No matches for " + argString(c.Args, "pattern")
	}
	if g.full {
		text += fmt.Sprintf("\n\n(Stopped after %d output lines; narrow the pattern, path or glob)", DefaultMaxMatches)
		brief = fmt.Sprintf("Found more than %s (output limit reached)", plural(g.matches, "match"))
	}
	return tool.Result{Data: tool.Document{Text: text, Brief: brief}}, nil
}

// grepper accumulates grep output across files.
type grepper struct {
	re       *regexp.Regexp
	ctxLines int
	out      strings.Builder
	lines    int // output lines written
	matches  int
	files    int
	full     bool
}

func (g *grepper) emit(s string) {
	if g.lines >= DefaultMaxMatches {
		g.full = true
		return
	}
	g.out.WriteString(s)
	g.out.WriteByte('\n')
	g.lines++
}

// file searches one file, skipping it when binary.
func (g *grepper) file(ctx context.Context, root *os.Root, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return nil // vanished or unreadable: skipped
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniffBytes); isBinary(head) {
		return nil
	}
	var before []string // ring of context lines before the next match
	after := 0          // context lines still to print after a match
	lastPrinted := 0    // line number last printed, for `--` separators
	found := false
	for n := 1; ; n++ {
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		raw, err := truncate.ReadLine(br)
		if err != nil {
			break // io.EOF or a read error ends this file
		}
		line := truncate.Line(string(raw))
		if g.re.Match(raw) {
			if !found {
				found = true
				g.files++
			}
			first := n - len(before)
			if lastPrinted > 0 && first > lastPrinted+1 {
				g.emit("--")
			}
			for i, b := range before {
				g.emit(p + "-" + strconv.Itoa(first+i) + "-" + b)
			}
			before = before[:0]
			g.emit(p + ":" + strconv.Itoa(n) + ":" + line)
			g.matches++
			lastPrinted = n
			after = g.ctxLines
		} else if after > 0 {
			g.emit(p + "-" + strconv.Itoa(n) + "-" + line)
			lastPrinted = n
			after--
		} else if g.ctxLines > 0 {
			before = append(before, line)
			if len(before) > g.ctxLines {
				before = before[1:]
			}
		}
		if g.full {
			return nil
		}
	}
	return nil
}
