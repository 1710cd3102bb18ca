package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
)

// KV is a Store on a JetStream KV bucket (natsx.BucketToolIdempotency),
// shared by every toolrunner replica; the bucket's TTL expires records.
// Requests are bounded and retried across NATS blips (natsx.Call), so a
// retried write whose first attempt was stored reports ErrExists or
// ErrRevision: callers recognise their own record by its Holder.
type KV struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

var (
	_ Store              = (*KV)(nil)
	_ ConversationPurger = (*KV)(nil)
)

// OpenKV opens the records bucket, which natsx.Provision creates.
func OpenKV(ctx context.Context, js jetstream.JetStream) (*KV, error) {
	kv, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.KeyValue(ctx, natsx.BucketToolIdempotency)
	})
	if err != nil {
		return nil, fmt.Errorf("open KV bucket %s: %w", natsx.BucketToolIdempotency, err)
	}
	return &KV{js: js, kv: kv}, nil
}

// Get implements Store.
func (s *KV) Get(ctx context.Context, key string) (Entry, error) {
	e, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return s.kv.Get(ctx, key)
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read idempotency record: %w", err)
	}
	rec, err := decode(e.Value())
	if err != nil {
		return Entry{}, err
	}
	return Entry{Record: rec, Revision: e.Revision()}, nil
}

// Create implements Store.
func (s *KV) Create(ctx context.Context, key string, rec Record) (uint64, error) {
	b, err := encode(rec)
	if err != nil {
		return 0, err
	}
	rev, err := natsx.Call(ctx, func(ctx context.Context) (uint64, error) {
		return s.kv.Create(ctx, key, b)
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("write idempotency record: %w", err)
	}
	return rev, nil
}

// Update implements Store.
func (s *KV) Update(ctx context.Context, key string, rec Record, revision uint64) (uint64, error) {
	b, err := encode(rec)
	if err != nil {
		return 0, err
	}
	rev, err := natsx.Call(ctx, func(ctx context.Context) (uint64, error) {
		return s.kv.Update(ctx, key, b, revision)
	})
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
		return 0, ErrRevision
	}
	if err != nil {
		return 0, fmt.Errorf("update idempotency record: %w", err)
	}
	return rev, nil
}

// PurgeConversation implements ConversationPurger: it purges the
// subjects of the conversation's keys from the bucket's stream, so no
// delete marker is left either.
func (s *KV) PurgeConversation(ctx context.Context, tenant, conversationID string) (int, error) {
	n, err := natsx.PurgeKeys(ctx, s.js, natsx.BucketToolIdempotency, ConversationTag(tenant, conversationID)+".*")
	if err != nil {
		return 0, fmt.Errorf("purge idempotency records: %w", err)
	}
	return int(n), nil //nolint:gosec // a message count
}
