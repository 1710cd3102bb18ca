// Package runstore keeps run records in the JetStream KV bucket
// natsx.BucketRuns.
package runstore

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
)

// Run records live in the bucket under
// natsx.RunKey (<tenant>.<run_id>), encoded as protobuf. Idempotency keys
// are indexed in the same bucket under <tenant>.idem_<sha256 of the key>,
// holding the run id; Create on that key makes the claim atomic.

const idemKeyPrefix = "idem_"

// ErrNotFound is the error of a run that has no record.
var ErrNotFound = errors.New("run not found")

// Store reads and writes run records.
type Store struct {
	kv jetstream.KeyValue
}

// New reads and writes run records in kv.
func New(kv jetstream.KeyValue) *Store { return &Store{kv: kv} }

// Put stores run.
func (s *Store) Put(ctx context.Context, run *baagentv1.Run) error {
	key, err := natsx.RunKey(run.GetTenant(), run.GetRunId())
	if err != nil {
		return err
	}
	data, err := proto.Marshal(run)
	if err != nil {
		return fmt.Errorf("encode run %s: %w", run.GetRunId(), err)
	}
	if _, err := s.kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("store run %s: %w", run.GetRunId(), err)
	}
	return nil
}

// Get returns the run and its KV revision, or ErrNotFound.
func (s *Store) Get(ctx context.Context, tenant, runID string) (*baagentv1.Run, uint64, error) {
	key, err := natsx.RunKey(tenant, runID)
	if err != nil {
		return nil, 0, err
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read run %s: %w", runID, err)
	}
	run := &baagentv1.Run{}
	if err := proto.Unmarshal(e.Value(), run); err != nil {
		return nil, 0, fmt.Errorf("decode run %s: %w", runID, err)
	}
	return run, e.Revision(), nil
}

// Update writes run only if the record is still at revision rev, so a
// writer that is not the run's executor never overwrites newer state.
func (s *Store) Update(ctx context.Context, run *baagentv1.Run, rev uint64) error {
	key, err := natsx.RunKey(run.GetTenant(), run.GetRunId())
	if err != nil {
		return err
	}
	data, err := proto.Marshal(run)
	if err != nil {
		return fmt.Errorf("encode run %s: %w", run.GetRunId(), err)
	}
	if _, err := s.kv.Update(ctx, key, data, rev); err != nil {
		return fmt.Errorf("update run %s: %w", run.GetRunId(), err)
	}
	return nil
}

// idemKey is the index key of a client idempotency key.
func idemKey(tenant, clientKey string) string {
	sum := sha256.Sum256([]byte(clientKey))
	return tenant + "." + idemKeyPrefix + hex.EncodeToString(sum[:20])
}

// ClaimIdempotencyKey records runID under the client's key. When the key is
// already claimed it returns the run id that holds it and claimed=false.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, tenant, clientKey, runID string) (holder string, claimed bool, err error) {
	key := idemKey(tenant, clientKey)
	if _, err := s.kv.Create(ctx, key, []byte(runID)); err == nil {
		return runID, true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", false, fmt.Errorf("claim idempotency key: %w", err)
	}
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return "", false, fmt.Errorf("read idempotency key: %w", err)
	}
	return string(e.Value()), false, nil
}

// Filter selects runs for List.
type Filter struct {
	ConversationID string
	States         []baagentv1.RunState
	// Before, when set, keeps only run ids that sort before it (the page
	// token: the last id of the previous page).
	Before string
	Limit  int
}

func (f Filter) match(run *baagentv1.Run) bool {
	if f.Before != "" && run.GetRunId() >= f.Before {
		return false
	}
	if f.ConversationID != "" && run.GetConversationId() != f.ConversationID {
		return false
	}
	return len(f.States) == 0 || slices.Contains(f.States, run.GetState())
}

// List returns up to f.Limit of tenant's runs matching f, each reduced
// by summarize, newest first (run ids sort by creation time), and whether
// more match. It streams the tenant's records and keeps only the
// best f.Limit+1 summaries in a heap, so memory is bounded by the page
// size, not by the number of runs or the size of their records.
func (s *Store) List(ctx context.Context, tenant string, f Filter, summarize func(*baagentv1.Run)) ([]*baagentv1.Run, bool, error) {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return nil, false, err
	}
	w, err := s.kv.WatchFiltered(ctx, []string{tenant + ".*"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, false, fmt.Errorf("list runs: %w", err)
	}
	defer func() { _ = w.Stop() }()
	keep := f.Limit + 1
	h := &newestRuns{}
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case e = <-w.Updates():
		}
		if e == nil { // all current values delivered
			break
		}
		if strings.HasPrefix(strings.TrimPrefix(e.Key(), tenant+"."), idemKeyPrefix) {
			continue
		}
		run := &baagentv1.Run{}
		if err := proto.Unmarshal(e.Value(), run); err != nil || !f.match(run) {
			continue
		}
		summarize(run)
		heap.Push(h, run)
		if h.Len() > keep {
			heap.Pop(h) // drop the oldest
		}
	}
	out := make([]*baagentv1.Run, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(*baagentv1.Run)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	return out, more, nil
}

// newestRuns is a min-heap by run id: the root is the oldest kept run.
type newestRuns []*baagentv1.Run

func (h newestRuns) Len() int           { return len(h) }
func (h newestRuns) Less(i, j int) bool { return h[i].GetRunId() < h[j].GetRunId() }
func (h newestRuns) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newestRuns) Push(x any)        { *h = append(*h, x.(*baagentv1.Run)) }
func (h *newestRuns) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Scan calls run for every run record of tenant and idem for every
// idempotency key (its KV key and the run id it holds), streaming them.
// Undecodable records are skipped.
func (s *Store) Scan(ctx context.Context, tenant string, run func(*baagentv1.Run), idem func(key, runID string)) error {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return err
	}
	w, err := s.kv.WatchFiltered(ctx, []string{tenant + ".*"}, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("scan runs: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e = <-w.Updates():
		}
		if e == nil {
			return nil
		}
		if strings.HasPrefix(strings.TrimPrefix(e.Key(), tenant+"."), idemKeyPrefix) {
			if idem != nil {
				idem(e.Key(), string(e.Value()))
			}
			continue
		}
		r := &baagentv1.Run{}
		if err := proto.Unmarshal(e.Value(), r); err == nil && run != nil {
			run(r)
		}
	}
}

// ReleaseIdempotencyKey removes the claim of clientKey when runID holds
// it (a run refused after claiming it never existed).
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, tenant, clientKey, runID string) error {
	key := idemKey(tenant, clientKey)
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read idempotency key: %w", err)
	}
	if string(e.Value()) != runID {
		return nil
	}
	if err := s.kv.Purge(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
