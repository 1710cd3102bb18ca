// Package convindex keeps the orchestrator's index of each tenant's
// conversations in the JetStream KV bucket natsx.BucketConversations: one
// entry per conversation under "<tenant>.<conversation_id>", JSON-encoded,
// written only with compare-and-set (Create, or Update at the revision
// read), so that any number of orchestrator replicas can update one
// conversation at once without losing a write.
package convindex

import (
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
)

// States of an entry.
const (
	StateActive   = "active"
	StateEnded    = "ended"
	StateDeleting = "deleting"
)

// TitleRunes bounds a title: the first question, cut to this many
// characters followed by "…".
const TitleRunes = 120

// maxStarting bounds the runs an entry lists as starting; StartGrace is
// how long such a run may take to store its record.
const (
	maxStarting = 64
	StartGrace  = 30 * time.Second
	// maxCASAttempts bounds the compare-and-set retries of one update.
	maxCASAttempts = 32
)

// Errors.
var (
	// ErrNotFound: no entry for the conversation.
	ErrNotFound = errors.New("conversation not found")
	// ErrContention: the entry kept changing under an update.
	ErrContention = errors.New("conversation index entry changed too often; retry")
)

// Entry is one conversation.
type Entry struct {
	ConversationID string    `json:"conversation_id"`
	Title          string    `json:"title"`
	CreatedAt      time.Time `json:"created_at"`
	LastActivityAt time.Time `json:"last_activity_at"`
	RunCount       int32     `json:"run_count"`
	State          string    `json:"state"`
	LastRunID      string    `json:"last_run_id,omitempty"`
	EndedAt        time.Time `json:"ended_at,omitzero"`
	// PrevState is the state a DELETING entry had before, restored when
	// the deletion is refused.
	PrevState string `json:"prev_state,omitempty"`
	// Starting lists runs accepted into the index whose records may not
	// be stored yet (StartRun reserves the entry first).
	Starting []Start `json:"starting,omitempty"`
}

// Start is a run being started.
type Start struct {
	RunID string    `json:"run_id"`
	At    time.Time `json:"at"`
}

// Title returns the title of a conversation whose first question is input:
// whitespace runs collapsed to one space, at most TitleRunes characters.
func Title(input string) string {
	var b strings.Builder
	n, space := 0, false
	for _, r := range strings.TrimSpace(input) {
		if r == utf8.RuneError || unicode.IsControl(r) && !unicode.IsSpace(r) {
			continue
		}
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && n > 0 {
			if n == TitleRunes {
				return b.String() + "…"
			}
			b.WriteByte(' ')
			n++
		}
		space = false
		if n == TitleRunes {
			return strings.TrimRight(b.String(), " ") + "…"
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// PruneStarting drops starts older than StartGrace and keeps at most
// maxStarting, the newest.
func (e *Entry) PruneStarting(now time.Time) {
	kept := e.Starting[:0]
	for _, s := range e.Starting {
		if now.Sub(s.At) < StartGrace {
			kept = append(kept, s)
		}
	}
	if len(kept) > maxStarting {
		kept = kept[len(kept)-maxStarting:]
	}
	e.Starting = kept
	if len(e.Starting) == 0 {
		e.Starting = nil
	}
}

// Key is a conversation's key; the ids must be NATS tokens.
func Key(tenant, conversationID string) (string, error) {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return "", err
	}
	if err := natsx.ValidateToken("conversation_id", conversationID); err != nil {
		return "", err
	}
	return tenant + "." + conversationID, nil
}

// backfillKey marks a tenant whose conversations were backfilled from its
// run records; three tokens, so no conversation key can take it and the
// listing filter "<tenant>.*" does not match it.
func backfillKey(tenant string) string { return tenant + ".meta.backfilled" }

// Store reads and writes the index.
type Store struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

// New keeps the index in kv (natsx.BucketConversations of js).
func New(js jetstream.JetStream, kv jetstream.KeyValue) *Store { return &Store{js: js, kv: kv} }

// Open opens the bucket.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.KeyValue(ctx, natsx.BucketConversations)
	})
	if err != nil {
		return nil, fmt.Errorf("open KV bucket %s (is JetStream provisioned?): %w", natsx.BucketConversations, err)
	}
	return New(js, kv), nil
}

// Get returns the entry and its revision, or ErrNotFound.
func (s *Store) Get(ctx context.Context, tenant, conversationID string) (*Entry, uint64, error) {
	key, err := Key(tenant, conversationID)
	if err != nil {
		return nil, 0, ErrNotFound // no conversation can have such an id
	}
	e, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.kv.Get(ctx, key) })
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read conversation %s: %w", conversationID, err)
	}
	ent, err := Decode(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("conversation %s: %w", conversationID, err)
	}
	return ent, e.Revision(), nil
}

// Decode decodes a stored entry.
func Decode(b []byte) (*Entry, error) {
	ent := &Entry{}
	if err := json.Unmarshal(b, ent); err != nil {
		return nil, fmt.Errorf("decode conversation index entry: %w", err)
	}
	switch ent.State {
	case StateActive, StateEnded, StateDeleting:
	default:
		return nil, fmt.Errorf("decode conversation index entry: unknown state %q", ent.State)
	}
	if len(ent.Starting) > maxStarting {
		ent.Starting = ent.Starting[len(ent.Starting)-maxStarting:]
	}
	return ent, nil
}

// Update applies fn to the conversation's entry (nil when there is none)
// and stores what it returns, with compare-and-set, retrying on a
// concurrent write. fn returning nil, nil leaves the entry as it is; an
// error from fn is returned as it is.
func (s *Store) Update(ctx context.Context, tenant, conversationID string, fn func(cur *Entry) (*Entry, error)) (*Entry, error) {
	key, err := Key(tenant, conversationID)
	if err != nil {
		return nil, err
	}
	for range maxCASAttempts {
		cur, rev, err := s.Get(ctx, tenant, conversationID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		next, err := fn(cur)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		data, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode conversation index entry: %w", err)
		}
		if cur == nil {
			_, err = s.kv.Create(ctx, key, data)
		} else {
			_, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return next, nil
		}
		if !isConflict(err) {
			return nil, fmt.Errorf("write conversation %s: %w", conversationID, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, ErrContention
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Remove purges the conversation's entry so that no marker names it.
func (s *Store) Remove(ctx context.Context, tenant, conversationID string) error {
	key, err := Key(tenant, conversationID)
	if err != nil {
		return nil // never stored
	}
	if _, err := natsx.PurgeKeys(ctx, s.js, natsx.BucketConversations, key); err != nil {
		return fmt.Errorf("remove conversation %s from the index: %w", conversationID, err)
	}
	return nil
}

// Backfilled says whether the tenant's conversations were backfilled.
func (s *Store) Backfilled(ctx context.Context, tenant string) (bool, error) {
	_, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.kv.Get(ctx, backfillKey(tenant)) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil
	}
	return false, fmt.Errorf("read the backfill mark of tenant %s: %w", tenant, err)
}

// MarkBackfilled records that the tenant's conversations were backfilled.
func (s *Store) MarkBackfilled(ctx context.Context, tenant string, at time.Time) error {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return err
	}
	_, err := natsx.Call(ctx, func(ctx context.Context) (uint64, error) {
		return s.kv.Put(ctx, backfillKey(tenant), []byte(at.UTC().Format(time.RFC3339Nano)))
	})
	if err != nil {
		return fmt.Errorf("mark tenant %s backfilled: %w", tenant, err)
	}
	return nil
}

// Cursor is a position in the listing order (newest activity first, then
// conversation id descending): a page continues after it.
type Cursor struct {
	Activity time.Time
	ID       string
}

// before says whether e comes after c in listing order.
func (c Cursor) before(e *Entry) bool {
	a := e.LastActivityAt.UnixNano()
	ca := c.Activity.UnixNano()
	return a < ca || a == ca && e.ConversationID < c.ID
}

// newer orders entries newest first.
func newer(a, b *Entry) bool {
	x, y := a.LastActivityAt.UnixNano(), b.LastActivityAt.UnixNano()
	if x != y {
		return x > y
	}
	return a.ConversationID > b.ConversationID
}

const pageTokenPrefix = "conv1:"

// ErrBadPageToken is the error of a token no listing made.
var ErrBadPageToken = errors.New("not a page token from a previous ListConversations response")

// EncodePageToken makes the token of the page that follows e.
func EncodePageToken(e *Entry) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pageTokenPrefix + strconv.FormatInt(e.LastActivityAt.UnixNano(), 10) + ":" + e.ConversationID))
}

// DecodePageToken reads a token made by EncodePageToken.
func DecodePageToken(tok string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return Cursor{}, ErrBadPageToken
	}
	rest, ok := strings.CutPrefix(string(raw), pageTokenPrefix)
	if !ok {
		return Cursor{}, ErrBadPageToken
	}
	ns, id, ok := strings.Cut(rest, ":")
	if !ok || natsx.ValidateToken("conversation_id", id) != nil {
		return Cursor{}, ErrBadPageToken
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != ns {
		return Cursor{}, ErrBadPageToken
	}
	return Cursor{Activity: time.Unix(0, n), ID: id}, nil
}

// List returns up to limit of the tenant's entries after cursor (nil: from
// the newest), newest activity first, and whether more follow. It streams
// the tenant's entries and keeps the best limit+1 in a heap, so memory is
// bounded by the page size.
func (s *Store) List(ctx context.Context, tenant string, after *Cursor, limit int) ([]*Entry, bool, error) {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return nil, false, err
	}
	w, err := s.kv.WatchFiltered(ctx, []string{tenant + ".*"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, false, fmt.Errorf("list conversations: %w", err)
	}
	defer func() { _ = w.Stop() }()
	h := &oldestFirst{}
	for {
		var kve jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case kve = <-w.Updates():
		}
		if kve == nil {
			break
		}
		e, err := Decode(kve.Value())
		if err != nil || after != nil && !after.before(e) {
			continue
		}
		e.Starting = nil
		heap.Push(h, e)
		if h.Len() > limit+1 {
			heap.Pop(h)
		}
	}
	out := make([]*Entry, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(*Entry)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// oldestFirst is a min-heap in listing order: the root is the entry that
// comes last.
type oldestFirst []*Entry

func (h oldestFirst) Len() int           { return len(h) }
func (h oldestFirst) Less(i, j int) bool { return newer(h[j], h[i]) }
func (h oldestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *oldestFirst) Push(x any)        { *h = append(*h, x.(*Entry)) }
func (h *oldestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
