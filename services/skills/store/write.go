package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
)

// PutOptions are the preconditions of a Put.
type PutOptions struct {
	// IfMatch: replace only if the current revision is this one.
	IfMatch string
	// IfNoneMatch: create only.
	IfNoneMatch bool
}

// RevisionOf is the revision of a skill's files: a hash of their paths and
// contents, independent of the archive they came in.
func RevisionOf(files []File) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Put stores files (sorted, SKILL.md among them, as ReadArchive returns
// them) as the current revision of k. It returns the new manifest and
// whether it replaced a stored skill. The bundle is written before the
// manifest, so a failure leaves at most an unreferenced bundle, which the
// sweep removes; readers never see a manifest without its files.
func (s *Store) Put(ctx context.Context, k Key, files []File, opts PutOptions) (*Manifest, bool, error) {
	m, replaced, err := s.put(ctx, k, files, opts)
	s.metrics.ops.WithLabelValues("put", result(err)).Inc()
	return m, replaced, err
}

func (s *Store) put(ctx context.Context, k Key, files []File, opts PutOptions) (*Manifest, bool, error) {
	i := slices.IndexFunc(files, func(f File) bool { return f.Path == SkillFile })
	if i < 0 {
		return nil, false, fmt.Errorf("no %s", SkillFile)
	}
	rev := RevisionOf(files)
	cur, kvRev, err := s.get(ctx, k)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	switch {
	case opts.IfNoneMatch && cur != nil:
		return nil, false, fmt.Errorf("%w: skill %s exists (revision %s)", ErrConflict, k, cur.Revision)
	case opts.IfMatch != "" && cur == nil:
		return nil, false, fmt.Errorf("%w: skill %s does not exist", ErrConflict, k)
	case opts.IfMatch != "" && cur.Revision != opts.IfMatch:
		return nil, false, fmt.Errorf("%w: skill %s is at revision %s, not %s", ErrConflict, k, cur.Revision, opts.IfMatch)
	}
	m := &Manifest{Tenant: k.Tenant, Project: k.Project, Name: k.Name, Revision: rev,
		SkillMD: string(files[i].Data), UpdatedAt: time.Now().UTC()}
	for _, f := range files {
		m.Size += int64(len(f.Data))
		if f.Path != SkillFile {
			m.Files = append(m.Files, FileInfo{Path: f.Path, Size: int64(len(f.Data))})
		}
	}
	if cur != nil && cur.Revision != rev {
		m.Kept = append(m.Kept, Revision{Revision: cur.Revision, Files: cur.Files, Size: cur.Size})
		for _, r := range cur.Kept {
			if r.Revision != rev {
				m.Kept = append(m.Kept, r)
			}
		}
		if len(m.Kept) > s.cfg.KeepRevisions-1 {
			m.Kept = m.Kept[:s.cfg.KeepRevisions-1]
		}
	} else if cur != nil {
		m.Kept = cur.Kept
	}
	if err := s.checkLimits(k, cur, m); err != nil {
		return nil, false, err
	}
	if cur == nil || !cur.keeps(rev) {
		bundle, err := writeBundle(files)
		if err != nil {
			return nil, false, err
		}
		if _, err := natsx.Call(ctx, func(ctx context.Context) (*jetstream.ObjectInfo, error) {
			return s.files.PutBytes(ctx, bundleName(k, rev), bundle)
		}); err != nil {
			return nil, false, fmt.Errorf("store skill files: %w", err)
		}
	}
	value, err := json.Marshal(m)
	for err == nil && len(value) > maxManifestBytes && len(m.Kept) > 0 {
		// Long file lists of several revisions can outgrow a NATS message:
		// keep fewer earlier revisions rather than fail the upload.
		m.Kept = m.Kept[:len(m.Kept)-1]
		value, err = json.Marshal(m)
	}
	if err != nil {
		return nil, false, err
	}
	var (
		werr   error
		newRev uint64
	)
	if cur == nil {
		newRev, werr = natsx.Call(ctx, func(ctx context.Context) (uint64, error) { return s.manifests.Create(ctx, k.kvKey(), value) })
	} else {
		newRev, werr = natsx.Call(ctx, func(ctx context.Context) (uint64, error) { return s.manifests.Update(ctx, k.kvKey(), value, kvRev) })
	}
	if werr != nil {
		if isWrongSequence(werr) {
			return nil, false, fmt.Errorf("%w: skill %s was changed concurrently; retry", ErrConflict, k)
		}
		return nil, false, fmt.Errorf("store skill manifest: %w", werr)
	}
	s.log.Info("skill store: stored", "tenant", k.Tenant, "project", k.Project, "skill", k.Name, "revision", rev, "bytes", m.Size, "replaced", cur != nil)
	s.awaitApplied(ctx, bucketManifests, newRev)
	return m, cur != nil, nil
}

// checkLimits checks the tenant's limits with next replacing cur, against
// this replica's view (a concurrent upload on another replica can overshoot
// by its own size; the limits bound growth, not bytes exactly).
func (s *Store) checkLimits(k Key, cur, next *Manifest) error {
	count, held := 1, next.bytesHeld()
	for _, m := range s.View().Skills {
		if m.Tenant != k.Tenant || m.Key() == k {
			continue
		}
		count++
		held += m.bytesHeld()
	}
	if cur == nil && count > s.cfg.MaxSkillsPerTenant {
		return fmt.Errorf("%w: tenant %s has %d stored skills, the limit", ErrLimit, k.Tenant, s.cfg.MaxSkillsPerTenant)
	}
	if held > s.cfg.MaxBytesPerTenant && (cur == nil || next.bytesHeld() > cur.bytesHeld()) {
		return fmt.Errorf("%w: tenant %s's stored skills would hold %d bytes, more than the %d byte limit", ErrLimit, k.Tenant, held, s.cfg.MaxBytesPerTenant)
	}
	return nil
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// get reads k's manifest from the bucket (not the View: preconditions need
// the latest revision).
func (s *Store) get(ctx context.Context, k Key) (*Manifest, uint64, error) {
	e, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return s.manifests.Get(ctx, k.kvKey())
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, fmt.Errorf("%w: skill %s", ErrNotFound, k)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read skill manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return nil, 0, fmt.Errorf("read skill manifest %s: %w", k, err)
	}
	return &m, e.Revision(), nil
}

// Get returns k's manifest as stored now.
func (s *Store) Get(ctx context.Context, k Key) (*Manifest, error) {
	m, _, err := s.get(ctx, k)
	return m, err
}

// Delete deletes k (only at revision ifMatch when set) and returns the
// revision deleted. Its bundles go with the next sweep after the grace
// period, so a run reading them finishes its reads first.
func (s *Store) Delete(ctx context.Context, k Key, ifMatch string) (string, error) {
	rev, err := s.del(ctx, k, ifMatch)
	s.metrics.ops.WithLabelValues("delete", result(err)).Inc()
	return rev, err
}

func (s *Store) del(ctx context.Context, k Key, ifMatch string) (string, error) {
	cur, kvRev, err := s.get(ctx, k)
	if err != nil {
		return "", err
	}
	if ifMatch != "" && cur.Revision != ifMatch {
		return "", fmt.Errorf("%w: skill %s is at revision %s, not %s", ErrConflict, k, cur.Revision, ifMatch)
	}
	_, err = natsx.Call(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.manifests.Delete(ctx, k.kvKey(), jetstream.LastRevision(kvRev))
	})
	if err != nil {
		if isWrongSequence(err) {
			return "", fmt.Errorf("%w: skill %s was changed concurrently; retry", ErrConflict, k)
		}
		return "", fmt.Errorf("delete skill manifest: %w", err)
	}
	s.log.Info("skill store: deleted", "tenant", k.Tenant, "project", k.Project, "skill", k.Name, "revision", cur.Revision)
	s.awaitDelete(ctx, s.manifests, bucketManifests)
	return cur.Revision, nil
}

// settings is the value of a BucketSettings entry.
type settings struct {
	Disabled []string `json:"disabled,omitempty"`
}

// scopesOf counts the tenant's scopes (itself and its projects) that have
// settings in this replica's view: a tenant cannot create settings for
// more projects than it may have stored skills.
func (s *Store) scopesOf(tenant string) int {
	n := 0
	for sc := range s.View().Disabled {
		if sc.Tenant == tenant {
			n++
		}
	}
	return n
}

// maxDisabled bounds one scope's disabled list (the system layer is an
// operator's set of skills, far smaller).
const maxDisabled = 1000

// SetDisabled disables or enables the system skill name in sc.
func (s *Store) SetDisabled(ctx context.Context, sc Scope, name string, disabled bool) error {
	err := s.setDisabled(ctx, sc, name, disabled)
	s.metrics.ops.WithLabelValues("settings", result(err)).Inc()
	return err
}

func (s *Store) setDisabled(ctx context.Context, sc Scope, name string, disabled bool) error {
	key := scopeKey(sc.Tenant, sc.Project)
	for attempt := 0; attempt < 5; attempt++ {
		var (
			st     settings
			kvRev  uint64
			exists bool
		)
		e, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.settings.Get(ctx, key) })
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return fmt.Errorf("read skill settings: %w", err)
		default:
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				return fmt.Errorf("read skill settings: %w", err)
			}
			kvRev, exists = e.Revision(), true
		}
		has := slices.Contains(st.Disabled, name)
		if has == disabled {
			// Already so in the bucket; this replica may not show it yet.
			s.awaitApplied(ctx, bucketSettings, kvRev)
			return nil
		}
		if disabled {
			if !exists && s.scopesOf(sc.Tenant) >= s.cfg.MaxSkillsPerTenant {
				return fmt.Errorf("%w: tenant %s has settings for %d projects, the limit", ErrLimit, sc.Tenant, s.cfg.MaxSkillsPerTenant)
			}
			if len(st.Disabled) >= maxDisabled {
				return fmt.Errorf("%w: more than %d disabled system skills", ErrLimit, maxDisabled)
			}
			st.Disabled = append(st.Disabled, name)
			slices.Sort(st.Disabled)
		} else {
			st.Disabled = slices.DeleteFunc(st.Disabled, func(n string) bool { return n == name })
		}
		value, err := json.Marshal(st)
		if err != nil {
			return err
		}
		var newRev uint64
		deleted := exists && len(st.Disabled) == 0
		switch {
		case deleted:
			// Nothing disabled any more: the scope needs no entry (and no
			// longer counts against the tenant's scopes).
			_, err = natsx.Call(ctx, func(ctx context.Context) (struct{}, error) {
				return struct{}{}, s.settings.Delete(ctx, key, jetstream.LastRevision(kvRev))
			})
		case exists:
			newRev, err = natsx.Call(ctx, func(ctx context.Context) (uint64, error) { return s.settings.Update(ctx, key, value, kvRev) })
		default:
			newRev, err = natsx.Call(ctx, func(ctx context.Context) (uint64, error) { return s.settings.Create(ctx, key, value) })
		}
		if err == nil {
			s.log.Info("skill store: system skill state set", "tenant", sc.Tenant, "project", sc.Project, "skill", name, "disabled", disabled)
			if deleted {
				s.awaitDelete(ctx, s.settings, bucketSettings)
			} else {
				s.awaitApplied(ctx, bucketSettings, newRev)
			}
			return nil
		}
		if !isWrongSequence(err) {
			return fmt.Errorf("write skill settings: %w", err)
		}
		// Another writer changed the settings in between: read again.
	}
	return fmt.Errorf("%w: settings of %s changed concurrently; retry", ErrConflict, sc.Tenant)
}

// awaitDelete waits for a delete just written to show in the View: its
// marker's revision is at most the bucket's last sequence.
func (s *Store) awaitDelete(ctx context.Context, kv jetstream.KeyValue, bucket int) {
	if !s.running.Load() {
		return
	}
	seq, err := lastSequence(ctx, kv)
	if err != nil {
		s.log.Warn("skill store: cannot tell when a delete shows on this replica", "bucket", kv.Bucket(), "error", err)
		return
	}
	s.awaitApplied(ctx, bucket, seq)
}
