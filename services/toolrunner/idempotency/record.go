// Package idempotency holds the toolrunner's idempotency records: what
// became of a tool call sent with an idempotency key. A record is written
// as started before a tool with side effects executes, refreshed by a
// heartbeat while it runs, and completed with the call's result, so a
// retry of the same call — after its caller went away, on another replica,
// or after a toolrunner restart — is answered from the record instead of
// executing the tool again.
//
// The records live behind [Store]: [KV] keeps them in a JetStream KV
// bucket shared by every toolrunner replica (what the service runs with);
// [Memory] keeps them in the process (for tests and tools that embed the
// toolrunner without NATS).
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// State is where a recorded call stands.
type State string

const (
	// Started: a toolrunner is executing the call (or died doing so; its
	// heartbeat tells which).
	Started State = "started"
	// Done: the call ended and Result holds what it returned.
	Done State = "done"
)

// Errors of a [Store].
var (
	// ErrNotFound: no record under the key.
	ErrNotFound = errors.New("idempotency record not found")
	// ErrExists: Create found a record under the key already.
	ErrExists = errors.New("idempotency record exists")
	// ErrRevision: Update's revision is not the record's latest.
	ErrRevision = errors.New("idempotency record changed since it was read")
)

// Record is what is stored under a key.
type Record struct {
	State State `json:"state"`
	// Fingerprint is the derived key of the call (tool, version,
	// arguments, caller, scope): a key reused for another call is refused.
	Fingerprint string `json:"fingerprint"`
	// Holder names the execution that wrote the record (replica and a
	// nonce), so a writer whose reply was lost recognises its own record.
	Holder string `json:"holder"`
	// Tool is the tool's name, for operators reading the bucket.
	Tool      string    `json:"tool"`
	StartedAt time.Time `json:"started_at"`
	// HeartbeatAt is refreshed while the call runs; waiters do not compare
	// it with their own clock (clocks differ between hosts) but watch the
	// revision change.
	HeartbeatAt time.Time `json:"heartbeat_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	// Result is the call's ToolExecutionResult in protobuf wire format.
	Result []byte `json:"result,omitempty"`
}

// Entry is a record with the revision it was read or written at.
type Entry struct {
	Record
	Revision uint64
}

// Store keeps records. Implementations are safe for concurrent use.
type Store interface {
	// Get returns the record under key, or ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)
	// Create stores rec under key unless a record is there (ErrExists).
	Create(ctx context.Context, key string, rec Record) (uint64, error)
	// Update replaces the record last written at revision; ErrRevision
	// when it has been written since.
	Update(ctx context.Context, key string, rec Record, revision uint64) (uint64, error)
}

// Key is the store key of an idempotency key sent by tenant: a hash, so
// any client string is a valid key and tenants never share one.
func Key(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + idempotencyKey))
	return hex.EncodeToString(sum[:20])
}

// ConversationKey is Key tagged with the conversation the call was made
// in: "<conversation tag>.<key>", where the tag is a hash of the tenant and
// the conversation id. A conversation's records can then be found, and
// removed with it (ConversationPurger), without the store naming the
// conversation.
func ConversationKey(tenant, conversationID, idempotencyKey string) string {
	return ConversationTag(tenant, conversationID) + "." + Key(tenant, idempotencyKey)
}

// ConversationTag is the prefix of a conversation's keys.
func ConversationTag(tenant, conversationID string) string {
	sum := sha256.Sum256([]byte("conversation\x00" + tenant + "\x00" + conversationID))
	return "c" + hex.EncodeToString(sum[:12])
}

// ConversationPurger is a Store that can remove every record of a
// conversation (those stored under its ConversationKey).
type ConversationPurger interface {
	// PurgeConversation removes the conversation's records, leaving
	// nothing that names them, and returns how many there were.
	PurgeConversation(ctx context.Context, tenant, conversationID string) (int, error)
}

func encode(rec Record) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode idempotency record: %w", err)
	}
	return b, nil
}

func decode(b []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("decode idempotency record: %w", err)
	}
	if rec.State != Started && rec.State != Done {
		return Record{}, fmt.Errorf("decode idempotency record: unknown state %q", rec.State)
	}
	return rec, nil
}
