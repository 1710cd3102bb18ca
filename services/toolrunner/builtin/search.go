package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// skippedDirs are never searched (docs/concepts/tools.md).
var skippedDirs = map[string]bool{".git": true, "node_modules": true, "__pycache__": true}

// maxWalkDepth bounds the folders glob and grep descend into: files more
// than this many levels deep are not visited (the output says how many
// folders were left out).
const maxWalkDepth = 128

// walkFiles calls fn for each regular file under dir (a clean workspace
// path), skipping skippedDirs, the folders dirOK (nil: all) refuses and
// those deeper than maxWalkDepth, not following symlinks, at most
// DefaultMaxWalkedFile files; fn returns false to stop. It returns how
// many folders were too deep, and ctx's error when ctx ended.
func walkFiles(ctx context.Context, root *os.Root, dir string, dirOK func(p string) bool, fn func(p string, d fs.DirEntry) bool) (int, error) {
	visited, tooDeep := 0, 0
	done := ctx.Done()
	err := fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		select {
		case <-done:
			return fs.SkipAll
		default:
		}
		if err != nil {
			if p == dir {
				return err
			}
			return nil // an unreadable subdirectory is skipped, not fatal
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			if skippedDirs[d.Name()] || dirOK != nil && !dirOK(p) {
				return fs.SkipDir
			}
			if strings.Count(p, "/")+1 >= maxWalkDepth {
				tooDeep++
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		visited++
		if visited > DefaultMaxWalkedFile {
			return fs.SkipAll
		}
		if !fn(p, d) {
			return fs.SkipAll
		}
		return nil
	})
	if ctx.Err() != nil {
		return tooDeep, ctx.Err()
	}
	return tooDeep, err
}

// splitPath splits a slash path into dst's storage.
func splitPath(dst []string, p string) []string {
	dst = dst[:0]
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(dst, p)
		}
		dst = append(dst, p[:i])
		p = p[i+1:]
	}
}

// tooDeepNote is the output's note on folders walkFiles left out.
func tooDeepNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("\n\n(%s more than %d levels deep not searched)", plural(n, "folder"), maxWalkDepth)
}

// globTool is `glob {pattern}`.
type globTool struct{ opts Options }

func (globTool) Spec() tool.Spec {
	return spec("glob",
		"Find files in the workspace by glob pattern: * and ? match within a path segment, [abc] and [!abc] sets, "+
			"** any number of directories (`**/*.csv`). Returns matching paths, sorted, with their sizes; "+
			".git, node_modules and __pycache__ are skipped.",
		`{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","minLength":1,"maxLength":1024,"description":"Glob pattern relative to the workspace, e.g. **/*.csv"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (t globTool) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	if c.Workspace == nil {
		return tool.Result{}, errNoWorkspace
	}
	pattern := argString(c.Args, "pattern")
	g, terr := compileGlob(pattern)
	if terr != nil {
		return tool.Result{}, terr
	}
	bctx, cancel := context.WithTimeout(ctx, t.opts.SearchTimeout)
	defer cancel()
	type hit struct {
		path string
		size int64
	}
	var hits []hit
	more := false
	var segs []string
	tooDeep, err := walkFiles(bctx, c.Workspace, ".", func(p string) bool {
		segs = splitPath(segs, p)
		return g.mayContain(segs)
	}, func(p string, d fs.DirEntry) bool {
		segs = splitPath(segs, p)
		if !g.match(segs) {
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
	if bctx.Err() != nil {
		return tool.Result{}, stopped(ctx, t.opts.SearchTimeout, "glob", "use a more specific pattern, e.g. start it with a folder instead of **")
	}
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
	return tool.Result{Data: tool.Document{Text: strings.TrimSuffix(b.String(), "\n") + tooDeepNote(tooDeep), Brief: brief}}, nil
}

// grepTool is `grep {pattern, path, glob, case_insensitive, context_lines}`.
type grepTool struct {
	opts Options
	// slots bounds the greps searching at once, fairly among tenants.
	slots *fairSlots
}

func newGrep(opts Options) grepTool {
	return grepTool{opts: opts, slots: newFairSlots(opts.MaxConcurrentGreps, opts.MaxGrepsPerTenant)}
}

func (t grepTool) Spec() tool.Spec {
	return spec("grep",
		"Search file contents in the workspace with a regular expression (RE2 syntax). Output lines are "+
			"`path:line:text`, context lines `path-line-text`, groups separated by `--`. Binary files are skipped. "+
			fmt.Sprintf("One call reads at most %s.", mib(t.opts.GrepMaxBytes)),
		`{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","minLength":1,"maxLength":1024,"description":"Regular expression"},
			"path":{"type":"string","minLength":1,"maxLength":1024,"description":"File or directory to search, relative to the workspace (default: the whole workspace)"},
			"glob":{"type":"string","minLength":1,"maxLength":256,"description":"Only search files whose name (or path, if the glob has a '/') matches, e.g. *.csv"},
			"case_insensitive":{"type":"boolean","description":"Ignore case (default false)"},
			"context_lines":{"type":"integer","minimum":0,"maximum":20,"description":"Lines of context before and after each match (default 0)"}}}`,
		true, baagentv1.OutputLevel_OUTPUT_LEVEL_UNSPECIFIED)
}

func (t grepTool) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
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
	var filter *glob
	if gp := argString(c.Args, "glob"); gp != "" {
		var terr *tool.Error
		if filter, terr = compileGlob(gp); terr != nil {
			return tool.Result{}, terr
		}
	}
	ctxLines := argInt(c.Args, "context_lines", 0, 0, 20)
	fi, err := c.Workspace.Stat(dir)
	if err != nil {
		return tool.Result{}, fsError(dir, err)
	}

	// Wait for a slot within the call's deadline; SearchTimeout bounds
	// the search only.
	release, err := t.slots.acquire(ctx, c.Tenant)
	if err != nil {
		return tool.Result{}, slotWaitError(ctx, "grep")
	}
	defer release()
	bctx, cancel := context.WithTimeout(ctx, t.opts.SearchTimeout)
	defer cancel()

	g := grepper{re: re, ctxLines: ctxLines, done: bctx.Done(), budget: t.opts.GrepMaxBytes}
	tooDeep := 0
	if !fi.IsDir() {
		err = g.file(c.Workspace, dir)
	} else {
		var name []string
		tooDeep, err = walkFiles(bctx, c.Workspace, dir, nil, func(p string, d fs.DirEntry) bool {
			if filter != nil {
				if filter.stars == 0 && len(filter.head) == 1 {
					name = append(name[:0], d.Name())
				} else {
					name = splitPath(name, p)
				}
				if !filter.match(name) {
					return true
				}
			}
			if fi, err := d.Info(); err != nil || fi.Size() > DefaultMaxGrepFile {
				return true
			}
			if err := g.file(c.Workspace, p); err != nil {
				return false
			}
			return !g.full && !g.spent
		})
	}
	if bctx.Err() != nil {
		return tool.Result{}, stopped(ctx, t.opts.SearchTimeout, "grep", "narrow the path or glob, or simplify the pattern")
	}
	if err != nil {
		return tool.Result{}, fsError(dir, err)
	}
	text := strings.TrimSuffix(g.out.String(), "\n")
	brief := fmt.Sprintf("Found %s in %s", plural(g.matches, "match"), plural(g.files, "file"))
	if g.matches == 0 {
		text = "No matches for " + argString(c.Args, "pattern")
	}
	switch {
	case g.full:
		text += fmt.Sprintf("\n\n(Stopped after %d output lines; narrow the pattern, path or glob)", DefaultMaxMatches)
		brief = fmt.Sprintf("Found more than %s (output limit reached)", plural(g.matches, "match"))
	case g.spent:
		text += fmt.Sprintf("\n\n(Stopped after reading %s, grep's limit for one call; narrow the path or glob)", mib(t.opts.GrepMaxBytes))
		brief += fmt.Sprintf(" (stopped after reading %s)", mib(t.opts.GrepMaxBytes))
	}
	text += tooDeepNote(tooDeep)
	return tool.Result{Data: tool.Document{Text: text, Brief: brief}}, nil
}

// slotWaitError is the error of a call whose context ended while it
// waited for a slot: other calls were busy, so a retry may find one.
func slotWaitError(ctx context.Context, name string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TIMEOUT, "BUSY",
			"%s waited for a free slot until the call's deadline: other calls were running; try again", name)
	}
	return ctx.Err()
}

// grepper accumulates grep output across files.
type grepper struct {
	re       *regexp.Regexp
	ctxLines int
	done     <-chan struct{} // the search's context
	budget   int64           // bytes left to read
	out      strings.Builder
	lines    int // output lines written
	matches  int
	files    int
	full     bool // DefaultMaxMatches output lines written
	spent    bool // the byte budget ran out
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

// file searches one file, skipping it when binary. It reads at most the
// bytes left in the budget, and returns errStopped when the search's
// context ends: it looks after every line, and a line costs at most
// truncate's 8 KB of matching (longer lines are read but not matched
// beyond that), so a slow expression cannot hold it for long.
func (g *grepper) file(root *os.Root, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return nil // vanished or unreadable: skipped
	}
	defer f.Close()
	lr := &io.LimitedReader{R: f, N: g.budget}
	defer func() {
		g.budget = lr.N
		if lr.N <= 0 {
			var one [1]byte
			if n, _ := f.Read(one[:]); n > 0 {
				g.spent = true
			}
		}
	}()
	br := bufio.NewReaderSize(lr, 64<<10)
	if head, _ := br.Peek(binarySniffBytes); isBinary(head) {
		return nil
	}
	var before []string // ring of context lines before the next match
	after := 0          // context lines still to print after a match
	lastPrinted := 0    // line number last printed, for `--` separators
	found := false
	for n := 1; ; n++ {
		select {
		case <-g.done:
			return errStopped
		default:
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

// errStopped ends a walk when the search's context ended.
var errStopped = errors.New("search stopped")
