package skills

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Run polls the skills root every Options.PollInterval and reloads it when
// something changed, until ctx is cancelled; it then returns nil. Polling
// costs one stat per watched path (directories, SKILL.md and tenant.yaml
// files), compared by modification time and size. A reload builds a new
// snapshot off to the side and swaps it in atomically, so requests see
// either the old set or the new one, never a mix. A failed reload keeps the
// last good set. With a skill store (Options.Store), Run also runs the
// store's watch and merges every change it reports into a new snapshot the
// same way. Only one Run may be active at a time.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("skills: Run is already running")
	}
	defer s.running.Store(false)
	changed, stopStore := s.runStore(ctx)
	defer stopStore()
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.poll()
		case <-changed:
			s.storeChanged()
		}
	}
}

// Reload loads the skills root now, whether or not it changed, and swaps in
// the result. On error the previous set stays in service.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	return s.reloadLocked()
}

func (s *Server) poll() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.changedLocked() {
		_ = s.reloadLocked() // logged and counted there
	}
}

// changedLocked reports whether the root may have changed since the current
// snapshot was loaded.
func (s *Server) changedLocked() bool {
	snap := s.snap.Load()
	if snap.racy {
		return true
	}
	// The root path itself may have been replaced (a symbolic link
	// repointed at a new release, a volume remounted).
	fi, err := os.Stat(s.opts.Root)
	if err != nil || !os.SameFile(fi, s.rootInfo) {
		return true
	}
	for _, w := range snap.watch {
		fi, err := snap.root.Stat(w.path)
		if err != nil || fi.ModTime().UnixNano() != w.mtime || fi.Size() != w.size {
			return true
		}
	}
	return false
}

func (s *Server) reloadLocked() error {
	start := time.Now()
	snap, root, fi, err := s.loadRoot()
	if err != nil {
		s.metrics.reloads.WithLabelValues("error").Inc()
		// A vanished root would otherwise log on every poll.
		if msg := err.Error(); msg != s.lastReloadErr {
			s.lastReloadErr = msg
			s.log.Error("skills: reload failed; keeping the previous skills", "error", err)
		}
		return err
	}
	s.lastReloadErr = ""
	prev := s.snap.Load()
	if prev != nil {
		snap.gen = prev.gen + 1
	}
	s.root, s.rootInfo = root, fi
	s.publishLocked(snap)
	s.observe(prev, snap, time.Since(start))
	return nil
}

// loadRoot loads a snapshot, reopening the root when its path now names a
// different directory.
func (s *Server) loadRoot() (*snapshot, *os.Root, os.FileInfo, error) {
	fi, err := os.Stat(s.opts.Root)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("skills root: %w", err)
	}
	if !fi.IsDir() {
		return nil, nil, nil, fmt.Errorf("skills root %s: not a directory", s.opts.Root)
	}
	root := s.root
	if root == nil || !os.SameFile(fi, s.rootInfo) {
		// The previous root stays open for snapshots still in use; os.Root
		// closes itself when no longer referenced.
		if root, err = os.OpenRoot(s.opts.Root); err != nil {
			return nil, nil, nil, fmt.Errorf("skills root: %w", err)
		}
	}
	snap, err := loadSnapshot(root, s.log)
	if err != nil {
		return nil, nil, nil, err
	}
	return snap, root, fi, nil
}

// observe updates the metrics and logs what changed: a summary when the
// files changed, and every refused skill that is new or refused for a new
// reason (so that a broken skill is logged once, not on every reload).
func (s *Server) observe(prev, snap *snapshot, took time.Duration) {
	counts := map[string]int{"system": len(snap.system.skills)}
	inv := map[string]int{"system": len(snap.system.invalidList)}
	for _, t := range snap.tenants {
		counts["tenant"] += len(t.skills)
		inv["tenant"] += len(t.invalidList)
		for _, p := range t.projects {
			counts["project"] += len(p.skills)
			inv["project"] += len(p.invalidList)
		}
	}
	for _, l := range []string{"system", "tenant", "project"} {
		s.metrics.loaded.WithLabelValues(l).Set(float64(counts[l]))
		s.metrics.invalid.WithLabelValues(l).Set(float64(inv[l]))
	}
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.metrics.reloadSeconds.Observe(took.Seconds())
	s.metrics.lastReloadStamp.Set(float64(snap.loadedAt.Unix()))

	var before map[string]refusalEntry
	if prev != nil {
		before = refusals(prev)
	}
	for key, r := range refusals(snap) {
		if b, ok := before[key]; !ok || b.err.GetReason() != r.err.GetReason() {
			s.log.Warn("skills: skill refused", "layer", scopeName(r.err.GetScope()), "tenant", r.tenant,
				"project", r.project, "folder", r.err.GetFolder(), "reason", r.err.GetReason())
		}
	}
	s.observeWarnings(prev, snap)
	level := s.log.Info
	if prev != nil && slices.Equal(prev.watch, snap.watch) {
		level = s.log.Debug // a re-check of a racy snapshot found nothing new
	}
	level("skills: loaded", "generation", snap.gen, "system", counts["system"], "tenant", counts["tenant"],
		"project", counts["project"], "tenants", len(snap.tenants),
		"invalid", inv["system"]+inv["tenant"]+inv["project"], "took", took)
}

// refusalEntry is a load error with where it was found.
type refusalEntry struct {
	tenant, project string
	err             *baagentv1.SkillLoadError
}

func refusalKey(tenant, project, folder string) string {
	return tenant + "\x00" + project + "\x00" + folder
}

// refusals maps each refused folder of a snapshot, by where it is, to its
// entry.
func refusals(snap *snapshot) map[string]refusalEntry {
	out := map[string]refusalEntry{}
	snap.eachRefusal(func(r refusalEntry) {
		out[refusalKey(r.tenant, r.project, r.err.GetFolder())] = r
	})
	return out
}

func (snap *snapshot) eachRefusal(f func(refusalEntry)) {
	for _, e := range snap.system.invalidList {
		f(refusalEntry{err: e})
	}
	for tn, t := range snap.tenants {
		for _, e := range t.invalidList {
			f(refusalEntry{tenant: tn, err: e})
		}
		for pn, p := range t.projects {
			for _, e := range p.invalidList {
				f(refusalEntry{tenant: tn, project: pn, err: e})
			}
		}
	}
}

// observeWarnings logs and counts the warnings of each skill loaded with
// warnings it did not have in the previous snapshot, so that a skill is
// logged once per change, not on every reload.
func (s *Server) observeWarnings(prev, snap *snapshot) {
	before := map[string][]string{}
	if prev != nil {
		prev.eachSkill(func(tenant, project string, sk *skill) {
			before[refusalKey(tenant, project, sk.name)] = sk.warnings
		})
	}
	snap.eachSkill(func(tenant, project string, sk *skill) {
		if len(sk.warnings) == 0 || slices.Equal(before[refusalKey(tenant, project, sk.name)], sk.warnings) {
			return
		}
		s.metrics.loadWarnings.WithLabelValues(scopeName(sk.scope)).Add(float64(len(sk.warnings)))
		s.log.Warn("skills: skill loaded with warnings", "layer", scopeName(sk.scope), "tenant", tenant,
			"project", project, "skill", sk.name, "warnings", sk.warnings)
	})
}

// eachSkill calls f for every loaded skill of every layer.
func (snap *snapshot) eachSkill(f func(tenant, project string, sk *skill)) {
	for _, sk := range snap.system.skills {
		f("", "", sk)
	}
	for tn, t := range snap.tenants {
		for _, sk := range t.skills {
			f(tn, "", sk)
		}
		for pn, p := range t.projects {
			for _, sk := range p.skills {
				f(tn, pn, sk)
			}
		}
	}
}
