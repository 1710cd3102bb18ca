package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Bounds of what one load reads, so that a runaway directory (a million
// entries, a deep tree under references/) costs a bounded amount. What is
// cut is logged.
const (
	maxDirEntries    = 10000
	maxResources     = 512
	maxResourceDepth = 4
	// racyWindow is how recent a modification time must be for the loader
	// to distrust it: file systems record times with a granularity (from a
	// few milliseconds on ext4 to 2 s on FAT), and two writes within one
	// tick leave the same time. A snapshot that saw such a recent time is
	// reloaded once more after the window has passed.
	racyWindow = 2 * time.Second
)

// watchEntry is one path the loader looked at and what it saw; a poll that
// sees a different modification time or size reloads. Directories are
// watched for added and removed entries, SKILL.md and tenant.yaml for edits.
// Resource contents are read on demand, so they need no watching.
type watchEntry struct {
	path  string // relative to the root, slash separated; "." is the root
	mtime int64  // UnixNano
	size  int64
}

// loader builds one snapshot: it walks the layers' directories, collecting
// skill folders as jobs, then loads the jobs in parallel.
type loader struct {
	root  *os.Root
	log   *slog.Logger
	start time.Time
	watch []watchEntry
	jobs  []skillJob
	// hashBuf is the goroutine's read buffer for revision hashes.
	hashBuf []byte
}

// skillJob is one skill folder to load into a layer.
type skillJob struct {
	ly          *layer
	dir, folder string
	scope       baagentv1.SkillScope
}

// skillResult is a loaded job: the skill, or why it was refused, and what
// the load looked at.
type skillResult struct {
	sk      *skill
	refusal *baagentv1.SkillLoadError
	watch   []watchEntry
}

// loadSnapshot reads the whole skills root into a new snapshot. Only an
// unreadable root is an error; every problem with a skill or a tenant
// configuration is recorded in the snapshot and logged by the caller.
func loadSnapshot(root *os.Root, log *slog.Logger) (*snapshot, error) {
	l := &loader{root: root, log: log, start: time.Now()}
	snap := &snapshot{
		root:    root,
		system:  newLayer(),
		tenants: map[string]*tenantLayer{},
	}
	entries, err := l.dir(".")
	if err != nil {
		return nil, fmt.Errorf("read skills root: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case hiddenName(name):
		case name == tenantsDir:
			if l.isDir(name, e) {
				l.tenants(snap)
			}
		default:
			l.skillEntry(snap.system, name, name, baagentv1.SkillScope_SKILL_SCOPE_SYSTEM, e)
		}
	}
	l.runJobs()
	snap.system.seal()
	for _, t := range snap.tenants {
		snap.sealTenant(t)
	}
	snap.watch = l.watch
	snap.racy = l.isRacy()
	snap.loadedAt = l.start
	return snap, nil
}

// tenants loads `tenants/<tenant>/` for every directory with a valid tenant
// name; other names could never be asked for and are logged.
func (l *loader) tenants(snap *snapshot) {
	entries, err := l.dir(tenantsDir)
	if err != nil {
		l.log.Warn("skills: cannot read tenants directory", "error", fsReason(err))
		return
	}
	for _, e := range entries {
		name := e.Name()
		if hiddenName(name) || !l.isDir(path.Join(tenantsDir, name), e) {
			continue
		}
		var ve validate.Errors
		validate.Tenant(&ve, "tenant", name)
		if ve.Len() > 0 {
			l.log.Warn("skills: ignoring tenant directory with an invalid tenant name", "dir", path.Join(tenantsDir, name))
			continue
		}
		snap.tenants[name] = l.tenant(path.Join(tenantsDir, name))
	}
}

func (l *loader) tenant(dir string) *tenantLayer {
	t := &tenantLayer{layer: newLayer(), rules: &tenantRules{}, projects: map[string]*layer{}}
	entries, err := l.dir(dir)
	if err != nil {
		// Fail closed: without its configuration the tenant might see a
		// system skill it disabled.
		t.rules.invalid = "tenant directory unreadable: " + fsReason(err)
		t.addInvalid(&baagentv1.SkillLoadError{Folder: ".", Scope: baagentv1.SkillScope_SKILL_SCOPE_TENANT, Reason: t.rules.invalid})
		return t
	}
	for _, e := range entries {
		name := e.Name()
		p := path.Join(dir, name)
		switch {
		case hiddenName(name):
		case name == TenantConfigFile:
			l.tenantConfig(t, p)
		case name == projectsDir:
			if l.isDir(p, e) {
				l.projects(t, p)
			}
		default:
			l.skillEntry(t.layer, p, name, baagentv1.SkillScope_SKILL_SCOPE_TENANT, e)
		}
	}
	return t
}

func (l *loader) tenantConfig(t *tenantLayer, p string) {
	data, fi, err := readRegular(l.root, p, maxTenantConfigBytes)
	if fi != nil {
		l.record(p, fi)
	}
	var rules *tenantRules
	if err == nil {
		rules, err = parseTenantConfig(data)
	} else {
		err = errors.New(fsReason(err))
	}
	if err != nil {
		t.rules.invalid = err.Error()
		t.addInvalid(&baagentv1.SkillLoadError{
			Folder: TenantConfigFile,
			Scope:  baagentv1.SkillScope_SKILL_SCOPE_TENANT,
			Reason: fmt.Sprintf("%s: %v; system skills are hidden from this tenant until it is fixed", TenantConfigFile, err),
		})
		return
	}
	t.rules = rules
}

func (l *loader) projects(t *tenantLayer, dir string) {
	entries, err := l.dir(dir)
	if err != nil {
		l.log.Warn("skills: cannot read projects directory", "dir", dir, "error", fsReason(err))
		return
	}
	for _, e := range entries {
		name := e.Name()
		p := path.Join(dir, name)
		if hiddenName(name) || !l.isDir(p, e) {
			continue
		}
		var ve validate.Errors
		validate.ID(&ve, "project", name)
		if ve.Len() > 0 {
			l.log.Warn("skills: ignoring project directory with an invalid project id", "dir", p)
			continue
		}
		pl := newLayer()
		skills, err := l.dir(p)
		if err != nil {
			l.log.Warn("skills: cannot read project directory", "dir", p, "error", fsReason(err))
		}
		for _, se := range skills {
			sp := path.Join(p, se.Name())
			if !hiddenName(se.Name()) {
				l.skillEntry(pl, sp, se.Name(), baagentv1.SkillScope_SKILL_SCOPE_PROJECT, se)
			}
		}
		t.projects[name] = pl
	}
}

// skillEntry loads the directory entry e at dir as a skill folder. Plain
// files beside skills (a README) are ignored; a symbolic link that leaves the
// skills root is reported, so that an operator learns why it is not loaded.
func (l *loader) skillEntry(ly *layer, dir, folder string, scope baagentv1.SkillScope, e fs.DirEntry) {
	if l.isDir(dir, e) {
		l.jobs = append(l.jobs, skillJob{ly: ly, dir: dir, folder: folder, scope: scope})
		return
	}
	if e.Type()&fs.ModeSymlink != 0 {
		if _, err := l.root.Stat(dir); isEscape(err) {
			ly.addInvalid(&baagentv1.SkillLoadError{Folder: folder, Scope: scope, Reason: "folder: " + fsReason(err)})
		}
	}
}

// runJobs loads the collected skill folders on up to GOMAXPROCS goroutines
// (reading and parsing a skill is independent of every other), which all end
// before it returns, and adds the results to their layers in walk order.
func (l *loader) runJobs() {
	results := make([]skillResult, len(l.jobs))
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(runtime.GOMAXPROCS(0), len(l.jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, hashBufBytes)
			for i := int(next.Add(1) - 1); i < len(l.jobs); i = int(next.Add(1) - 1) {
				j := l.jobs[i]
				jl := &loader{root: l.root, log: l.log, start: l.start, hashBuf: buf}
				sk, refusal := jl.skill(j.dir, j.folder, j.scope)
				results[i] = skillResult{sk: sk, refusal: refusal, watch: jl.watch}
			}
		}()
	}
	wg.Wait()
	// A name is one skill per layer. Folder names are unique, but a name
	// that differs from its folder in case only is loaded in lowercase, so
	// two folders can claim one name: which one is meant is ambiguous, and
	// both are refused.
	type claim struct {
		ly   *layer
		name string
	}
	claims := map[claim][]int{}
	for i, r := range results {
		if r.sk != nil {
			k := claim{l.jobs[i].ly, r.sk.name}
			claims[k] = append(claims[k], i)
		}
	}
	for i, r := range results {
		l.watch = append(l.watch, r.watch...)
		j := l.jobs[i]
		switch {
		case r.sk == nil:
			j.ly.addInvalid(r.refusal)
		case len(claims[claim{j.ly, r.sk.name}]) > 1:
			var folders []string
			for _, k := range claims[claim{j.ly, r.sk.name}] {
				folders = append(folders, strconv.Quote(l.jobs[k].folder))
			}
			j.ly.addInvalid(&baagentv1.SkillLoadError{Folder: j.folder, Scope: j.scope, Reason: fmt.Sprintf(
				"name: %q is claimed by more than one folder of this layer (%s); rename all but one", r.sk.name, strings.Join(folders, ", "))})
		default:
			j.ly.skills[r.sk.name] = r.sk
		}
	}
	l.jobs = nil
}

// skill loads the skill folder dir (relative to the root), or says why it
// cannot be loaded.
func (l *loader) skill(dir, folder string, scope baagentv1.SkillScope) (*skill, *baagentv1.SkillLoadError) {
	refuse := func(reason string) (*skill, *baagentv1.SkillLoadError) {
		return nil, &baagentv1.SkillLoadError{Folder: folder, Scope: scope, Reason: reason}
	}
	// Everything of the skill is read through a root opened on its folder,
	// so a symbolic link cannot pull in a file from outside it. The folder
	// itself is recorded for the watch when resources lists it, first, so
	// that a SKILL.md added to a folder without one is noticed.
	sr, err := l.root.OpenRoot(dir)
	if err != nil {
		if fi, serr := l.root.Stat(dir); serr == nil {
			l.record(dir, fi)
		}
		return refuse("folder: " + fsReason(err))
	}
	defer sr.Close()
	resources := l.resources(sr, dir)
	data, fi, err := readRegular(sr, skillFile, MaxSkillFileBytes)
	if fi != nil {
		l.record(path.Join(dir, skillFile), fi)
	}
	if err != nil {
		return refuse(skillFile + ": " + fsReason(err))
	}
	sk, err := parseSkillMD(data, folder)
	if err != nil {
		return refuse(err.Error())
	}
	sk.dir = dir
	sk.finish(scope, baagentv1.SkillSource_SKILL_SOURCE_FILES, resources,
		contentRevision(sr, data, resources, l.hashBuf), folderFS{root: l.root, dir: dir})
	return sk, nil
}

// finish fills what a parsed SKILL.md does not say: where the skill is and
// comes from, its files and revision, and its catalog line. File and stored
// skills go through it alike.
func (sk *skill) finish(scope baagentv1.SkillScope, source baagentv1.SkillSource, resources []resourceInfo, revision string, files resourceFS) {
	sk.scope = scope
	sk.source = source
	sk.resources = resources
	sk.revision = revision
	sk.files = files
	sk.catalogLine = catalogLine(sk.name, scopeName(scope), catalogDescription(sk))
	sk.catalogTokens = int64(EstimateTokens(sk.catalogLine))
}

// resources lists the files of a skill folder other than SKILL.md (its
// scripts/, references/, assets/ and any other file), breadth first, up to
// maxResources files and maxResourceDepth directories deep. Hidden names are
// skipped, symbolic links to directories are not followed, and symbolic
// links to files are listed only when they resolve inside the folder.
func (l *loader) resources(sr *os.Root, dir string) []resourceInfo {
	var out []resourceInfo
	queue := []string{"."}
	for depth := 0; len(queue) > 0 && depth <= maxResourceDepth; depth++ {
		var next []string
		for _, d := range queue {
			entries, fi, truncated, err := readDirCapped(sr, d, maxDirEntries)
			if fi != nil {
				l.record(path.Join(dir, d), fi)
			}
			if err != nil {
				continue
			}
			if truncated {
				l.log.Warn("skills: resource directory has too many entries; the rest are not listed", "dir", path.Join(dir, d), "max", maxDirEntries)
			}
			for _, e := range entries {
				name := e.Name()
				p := path.Join(d, name)
				switch {
				case hiddenName(name) || p == skillFile:
				case e.IsDir():
					next = append(next, p)
				case e.Type().IsRegular():
					// Resource files are watched too: their contents make
					// the skill's revision.
					if fi, err := e.Info(); err == nil {
						l.record(path.Join(dir, p), fi)
						out = append(out, resourceInfo{path: p, size: fi.Size()})
					}
				case e.Type()&fs.ModeSymlink != 0:
					if fi, err := sr.Stat(p); err == nil && fi.Mode().IsRegular() {
						l.record(path.Join(dir, p), fi)
						out = append(out, resourceInfo{path: p, size: fi.Size()})
					}
				}
				if len(out) > maxResources {
					l.log.Warn("skills: skill has too many resource files; the rest are not listed", "dir", dir, "max", maxResources)
					out = out[:maxResources]
					sortResources(out)
					return out
				}
			}
		}
		queue = next
	}
	sortResources(out)
	return out
}

func sortResources(rs []resourceInfo) {
	slices.SortFunc(rs, func(a, b resourceInfo) int { return strings.Compare(a.path, b.path) })
}

// dir records and lists a directory, ordered by name.
func (l *loader) dir(p string) ([]fs.DirEntry, error) {
	entries, fi, truncated, err := readDirCapped(l.root, p, maxDirEntries)
	if fi != nil {
		l.record(p, fi)
	}
	if err != nil {
		return nil, err
	}
	if truncated {
		l.log.Warn("skills: directory has too many entries; the rest are ignored", "dir", p, "max", maxDirEntries)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// isDir reports whether e (at p) is a directory, following a symbolic link
// when it stays inside the root.
func (l *loader) isDir(p string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := l.root.Stat(p)
	return err == nil && fi.IsDir()
}

func (l *loader) record(p string, fi fs.FileInfo) {
	l.watch = append(l.watch, watchEntry{path: p, mtime: fi.ModTime().UnixNano(), size: fi.Size()})
}

func (l *loader) isRacy() bool {
	limit := l.start.Add(-racyWindow).UnixNano()
	for _, w := range l.watch {
		if w.mtime >= limit {
			return true
		}
	}
	return false
}

func hiddenName(name string) bool { return strings.HasPrefix(name, ".") }
