package skillstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
)

// A conversation's active skills outlive the round (run) that activated
// them: at the end of a round the stack is saved under the conversation,
// and the next round restores it before its first model call. The
// checkpoint bucket holds it (so its replicas and time to live are the
// checkpoints'), under a three-part key that no run checkpoint
// ("<tenant>.<run_id>") can take.

// maxSavedFrames bounds a saved stack read back: more frames than any
// depth limit allows is a damaged record.
const maxSavedFrames = 64

// Saved is a conversation's stack as the round that ended left it.
type Saved struct {
	// RunID is the round that saved it.
	RunID  string       `json:"run_id"`
	At     time.Time    `json:"at"`
	Frames []SavedFrame `json:"frames"`
}

// SavedFrame is one active skill of a saved stack.
type SavedFrame struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Revision string `json:"revision,omitempty"`
	Modifier []byte `json:"modifier,omitempty"` // a ContextModifier
}

// Snapshot returns the stack's frames as they are saved.
func (s *Stack) Snapshot() []SavedFrame {
	out := make([]SavedFrame, 0, len(s.frames))
	for _, f := range s.frames {
		out = append(out, SavedFrame{Name: f.Name, ID: f.ID, Revision: f.Revision, Modifier: protoenc.Marshal(f.Modifier)})
	}
	return out
}

// Activation decodes a saved frame.
func (f SavedFrame) Activation() (Activation, error) {
	mod, err := protoenc.Unmarshal[baagentv1.ContextModifier](f.Modifier)
	if err != nil {
		return Activation{}, fmt.Errorf("decode the context modifier of skill %q: %w", f.Name, err)
	}
	return Activation{Name: f.Name, ID: f.ID, Revision: f.Revision, Modifier: mod}, nil
}

// Key is where a conversation's stack is kept: "<tenant>.skills.<conversation_id>".
func Key(tenant, conversationID string) (string, error) {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return "", err
	}
	if err := natsx.ValidateToken("conversation_id", conversationID); err != nil {
		return "", err
	}
	return tenant + ".skills." + conversationID, nil
}

// Store keeps conversations' stacks in a KV bucket.
type Store struct {
	kv jetstream.KeyValue
}

// NewStore keeps stacks in kv.
func NewStore(kv jetstream.KeyValue) *Store { return &Store{kv: kv} }

// Load returns the conversation's saved stack, nil when none is saved.
func (s *Store) Load(ctx context.Context, tenant, conversationID string) (*Saved, error) {
	key, err := Key(tenant, conversationID)
	if err != nil {
		return nil, err
	}
	e, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.kv.Get(ctx, key) })
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the skill stack of conversation %s: %w", conversationID, err)
	}
	saved := &Saved{}
	if err := json.Unmarshal(e.Value(), saved); err != nil {
		return nil, fmt.Errorf("decode the skill stack of conversation %s: %w", conversationID, err)
	}
	if len(saved.Frames) > maxSavedFrames {
		return nil, fmt.Errorf("the skill stack of conversation %s holds %d skills, more than %d", conversationID, len(saved.Frames), maxSavedFrames)
	}
	return saved, nil
}

// Save stores the conversation's stack; an empty stack deletes it.
func (s *Store) Save(ctx context.Context, tenant, conversationID string, saved *Saved) error {
	key, err := Key(tenant, conversationID)
	if err != nil {
		return err
	}
	if len(saved.Frames) == 0 {
		_, err := natsx.Call(ctx, func(ctx context.Context) (struct{}, error) {
			err := s.kv.Purge(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				err = nil
			}
			return struct{}{}, err
		})
		if err != nil {
			return fmt.Errorf("clear the skill stack of conversation %s: %w", conversationID, err)
		}
		return nil
	}
	data, err := json.Marshal(saved)
	if err != nil {
		return fmt.Errorf("encode the skill stack: %w", err)
	}
	if _, err := natsx.Call(ctx, func(ctx context.Context) (uint64, error) { return s.kv.Put(ctx, key, data) }); err != nil {
		return fmt.Errorf("save the skill stack of conversation %s: %w", conversationID, err)
	}
	return nil
}
