package store

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
)

// ReadFiles returns the files of k at revision rev (empty: the current
// one), SKILL.md included, from the replica's cache or the object store.
// A revision the manifest no longer keeps is ErrNotFound.
func (s *Store) ReadFiles(ctx context.Context, k Key, rev string) ([]File, string, error) {
	var m *Manifest
	for _, v := range s.View().Skills {
		if v.Key() == k {
			m = v
			break
		}
	}
	if m == nil {
		return nil, "", fmt.Errorf("%w: skill %s", ErrNotFound, k)
	}
	if rev == "" {
		rev = m.Revision
	}
	if !m.keeps(rev) {
		return nil, "", fmt.Errorf("%w: revision %s of skill %s is no longer kept", ErrNotFound, rev, k)
	}
	name := bundleName(k, rev)
	if files := s.cache.get(name); files != nil {
		return files, rev, nil
	}
	data, err := natsx.Call(ctx, func(ctx context.Context) ([]byte, error) { return s.files.GetBytes(ctx, name) })
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, "", fmt.Errorf("%w: files of revision %s of skill %s", ErrNotFound, rev, k)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read skill files: %w", err)
	}
	// A bundle holds what ReadArchive accepted, plus tar headers.
	files, err := ReadArchiveLimits(data, FormatTar, Limits{ArchiveBytes: MaxUnpackedBytes + tarOverhead, UnpackedBytes: MaxUnpackedBytes, Files: MaxFiles})
	if err != nil {
		return nil, "", fmt.Errorf("skill %s revision %s: stored bundle unreadable: %w", k, rev, err)
	}
	s.cache.put(name, files)
	return files, rev, nil
}

// Sweep deletes bundles that no manifest references and that are older
// than SweepGrace, and returns how many it deleted. Manifests are read from
// the bucket, not the View, so a lagging replica cannot delete a new
// revision.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	objs, err := natsx.Call(ctx, func(ctx context.Context) ([]*jetstream.ObjectInfo, error) { return s.files.List(ctx) })
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list skill files: %w", err)
	}
	referenced := map[string]bool{}
	lister, err := s.manifests.ListKeys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, fmt.Errorf("list skill manifests: %w", err)
	}
	if lister != nil {
		for key := range lister.Keys() {
			e, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.manifests.Get(ctx, key) })
			if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
				continue
			}
			if err != nil {
				_ = lister.Stop()
				return 0, fmt.Errorf("read skill manifest: %w", err)
			}
			var m Manifest
			if json.Unmarshal(e.Value(), &m) != nil {
				continue
			}
			referenced[bundleName(m.Key(), m.Revision)] = true
			for _, r := range m.Kept {
				referenced[bundleName(m.Key(), r.Revision)] = true
			}
		}
	}
	cutoff := time.Now().Add(-s.cfg.SweepGrace)
	n := 0
	for _, o := range objs {
		if o.Deleted || referenced[o.Name] || o.ModTime.After(cutoff) {
			continue
		}
		// An upload of the same revision may have rewritten the bundle
		// since the listing: look again just before deleting.
		if info, err := s.files.GetInfo(ctx, o.Name); err != nil || info.ModTime.After(cutoff) {
			continue
		}
		if err := s.files.Delete(ctx, o.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return n, fmt.Errorf("delete skill files %s: %w", o.Name, err)
		}
		s.cache.drop(o.Name)
		n++
	}
	s.metrics.swept.Add(float64(n))
	return n, nil
}

// writeBundle encodes files as a tar (read back with ReadArchive).
func writeBundle(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: 0o644, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrLimit):
		return "limit"
	}
	return "error"
}
