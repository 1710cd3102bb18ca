package contextsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/internal/natsx"
)

// historyStore keeps conversation history in the JetStream stream
// natsx.StreamHistory, one subject per conversation, and a bounded in-memory
// copy of recently used conversations so that building a window does not
// re-read the stream.
//
// The copy is checked against the stream on every use (one request for the
// subject's last sequence), so replicas that append to the same conversation
// stay consistent. Appends publish with the subject's expected last sequence,
// so two writers never interleave unseen: the loser re-reads and retries, and
// idempotency by message id holds across replicas and restarts, not only
// within JetStream's duplicate window.
type historyStore struct {
	js        jetstream.JetStream
	log       *slog.Logger
	maxRecord int
	now       func() time.Time

	mu     sync.Mutex
	stream jetstream.Stream // resolved lazily: the stream may be provisioned after we start

	convs *lru.Cache[convKey, *conversation]
}

type convKey struct{ tenant, id string }

// conversation is the cached history of one conversation.
type conversation struct {
	mu      sync.Mutex // serialises refresh and append in this replica
	key     convKey
	subject string

	msgs     []*storedMsg // oldest first, unique ids
	ids      map[string]int
	firstSeq uint64 // stream sequence of the subject's first record
	lastSeq  uint64 // stream sequence of the subject's last record seen
	loaded   bool
	bytes    int64
}

// storedMsg is one history message with what the window builder derives from
// it, computed once. msg is never modified after it is stored.
type storedMsg struct {
	msg  *baagentv1.ChatMessage
	seq  uint64
	hash contentHash
	size int

	derivedOnce sync.Once
	derived     derivedForms
}

// appendLimit bounds the retries of an append that keeps losing the race
// against another writer of the same conversation.
const appendLimit = 8

// fetchBatch is how many records one pull of a history load asks for.
const fetchBatch = 512

func newHistoryStore(js jetstream.JetStream, log *slog.Logger, maxConvs int, maxBytes int64, maxRecord int) *historyStore {
	return &historyStore{
		js:        js,
		log:       log,
		maxRecord: maxRecord,
		now:       time.Now,
		convs:     lru.New[convKey, *conversation](lru.Options{MaxEntries: maxConvs, MaxCost: maxBytes}),
	}
}

var errNoStore = errors.New("no history store configured (Options.JetStream is nil)")

func (h *historyStore) getStream(ctx context.Context) (jetstream.Stream, error) {
	if h == nil || h.js == nil {
		return nil, errNoStore
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stream != nil {
		return h.stream, nil
	}
	s, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.Stream, error) { return h.js.Stream(ctx, natsx.StreamHistory) })
	if err != nil {
		return nil, fmt.Errorf("history stream %s: %w (is JetStream provisioned?)", natsx.StreamHistory, err)
	}
	h.stream = s
	return s, nil
}

// conversation returns the cached conversation for key, creating an empty
// unloaded entry when needed.
func (h *historyStore) conversation(key convKey) (*conversation, error) {
	subject, err := historySubject(key.tenant, key.id)
	if err != nil {
		return nil, err
	}
	return h.convs.GetOrAdd(key, func() *conversation {
		return &conversation{key: key, subject: subject, ids: map[string]int{}}
	}), nil
}

// snapshot returns the conversation's messages, brought up to date with the
// stream. The slice is shared and must not be modified.
func (h *historyStore) snapshot(ctx context.Context, key convKey) ([]*storedMsg, error) {
	c, err := h.conversation(key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := h.refresh(ctx, c); err != nil {
		return nil, err
	}
	return c.msgs[:len(c.msgs):len(c.msgs)], nil
}

// refresh brings c up to date: nothing to do when the subject's last
// sequence is the one we saw; new records are fetched incrementally; a
// purge (DeleteConversation, possibly by another replica) forces a reload.
// Called with c.mu held.
func (h *historyStore) refresh(ctx context.Context, c *conversation) error {
	st, err := h.getStream(ctx)
	if err != nil {
		return err
	}
	last, err := natsx.Call(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return st.GetLastMsgForSubject(ctx, c.subject)
	})
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		h.reset(c)
		c.loaded = true
		return nil
	case err != nil:
		return fmt.Errorf("read history: %w", err)
	}
	if c.loaded && last.Sequence == c.lastSeq {
		return nil
	}
	if c.loaded && c.firstSeq > 0 {
		first, err := natsx.Call(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(c.subject))
		})
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("read history: %w", err)
		}
		if err != nil || first.Sequence != c.firstSeq || last.Sequence < c.lastSeq {
			h.reset(c) // purged (and maybe written again) since we loaded
		}
	} else if !c.loaded {
		h.reset(c)
	}
	if err := h.fetch(ctx, st, c, last.Sequence); err != nil {
		h.reset(c) // never serve a partial history
		return err
	}
	c.loaded = true
	return nil
}

func (h *historyStore) reset(c *conversation) {
	h.convs.AddCost(c.key, -c.bytes)
	c.msgs, c.ids, c.firstSeq, c.lastSeq, c.loaded, c.bytes = nil, map[string]int{}, 0, 0, false, 0
}

// fetch reads the subject's records after c.lastSeq up to and including
// target with an ordered consumer.
func (h *historyStore) fetch(ctx context.Context, st jetstream.Stream, c *conversation, target uint64) error {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{c.subject},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: 30 * time.Second,
	}
	if c.lastSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = c.lastSeq + 1
	}
	cons, err := natsx.Call(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return st.OrderedConsumer(ctx, cfg) })
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	for empty := 0; c.lastSeq < target; {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Everything up to target is stored: take what is there without
		// waiting for a full batch.
		batch, err := cons.FetchNoWait(fetchBatch)
		if err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("read history: %w", err)
			}
			h.add(c, meta.Sequence.Stream, m.Headers(), m.Data())
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("read history: %w", err)
		}
		if got > 0 {
			empty = 0
			continue
		}
		if empty++; empty > 50 {
			return fmt.Errorf("read history: stream returned no records before sequence %d", target)
		}
		select { // the consumer may not have caught up yet: brief backoff
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(empty) * time.Millisecond):
		}
	}
	return nil
}

// add decodes one record into c. A record that is not a stored message, or
// repeats an id, is skipped: history stays readable whatever else was
// published on the subject.
func (h *historyStore) add(c *conversation, seq uint64, hdr nats.Header, data []byte) {
	if seq > c.lastSeq {
		c.lastSeq = seq
	}
	if c.firstSeq == 0 {
		c.firstSeq = seq
	}
	m, err := decodeRecord(hdr.Get(formatHeader), data)
	if err != nil {
		h.log.Warn("skipping history record", "tenant", c.key.tenant, "conversation_id", c.key.id, "seq", seq, "err", err)
		return
	}
	if _, dup := c.ids[m.GetId()]; dup {
		return
	}
	h.store(c, m, seq, len(data))
}

func (h *historyStore) store(c *conversation, m *baagentv1.ChatMessage, seq uint64, size int) {
	if c.firstSeq == 0 {
		c.firstSeq = seq
	}
	c.ids[m.GetId()] = len(c.msgs)
	c.msgs = append(c.msgs, &storedMsg{msg: m, seq: seq, hash: hashContent(m), size: size})
	c.lastSeq = max(c.lastSeq, seq)
	// Counted twice the encoded size: the decoded message and derived forms.
	c.bytes += int64(2 * size)
	h.convs.AddCost(c.key, int64(2*size))
}

// appendResult reports an append.
type appendResult struct {
	appended, duplicates int
	count                int
	ids                  []string
}

// recordTooLargeError names a message whose record exceeds the store's limit.
type recordTooLargeError struct {
	index, size, limit int
}

func (e *recordTooLargeError) Error() string {
	return fmt.Sprintf("encoded message is %d bytes; the history store takes at most %d bytes per message", e.size, e.limit)
}

// errConflict is returned when appends keep racing another writer.
var errConflict = errors.New("conversation is being appended to concurrently; retry")

// prepare fills ids, importance and created_at of messages that lack them,
// and checks every record's size, before anything is written.
func (h *historyStore) prepare(msgs []*baagentv1.ChatMessage) ([]*baagentv1.ChatMessage, [][]byte, error) {
	out := make([]*baagentv1.ChatMessage, len(msgs))
	recs := make([][]byte, len(msgs))
	for i, in := range msgs {
		m := proto.Clone(in).(*baagentv1.ChatMessage)
		if m.Id == "" {
			m.Id = newMessageID()
		}
		if m.Importance == baagentv1.MessageImportance_MESSAGE_IMPORTANCE_UNSPECIFIED {
			m.Importance = defaultImportance(m)
		}
		if m.CreatedAt == nil {
			m.CreatedAt = timestampNow(h.now())
		}
		b, err := encodeRecord(m)
		if err != nil {
			return nil, nil, fmt.Errorf("messages[%d]: encode: %w", i, err)
		}
		if len(b) > h.maxRecord {
			return nil, nil, &recordTooLargeError{index: i, size: len(b), limit: h.maxRecord}
		}
		out[i], recs[i] = m, b
	}
	return out, recs, nil
}

// append stores msgs in order, skipping ids already stored.
func (h *historyStore) append(ctx context.Context, key convKey, in []*baagentv1.ChatMessage) (appendResult, error) {
	msgs, recs, err := h.prepare(in)
	if err != nil {
		return appendResult{}, err
	}
	c, err := h.conversation(key)
	if err != nil {
		return appendResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()

	res := appendResult{ids: make([]string, len(msgs))}
	for i, m := range msgs {
		res.ids[i] = m.GetId()
	}
	done := make([]bool, len(msgs))
	for attempt := 0; ; attempt++ {
		// A loaded conversation is appended to without reading the
		// stream first: each publish is a compare-and-set on the
		// subject's last sequence, so a record another replica wrote (or
		// a purge) since we loaded fails it, and only then do we catch
		// up (and find a duplicate id) before trying again.
		if attempt > 0 || !c.loaded {
			if err := h.refresh(ctx, c); err != nil {
				return res, err
			}
		}
		conflict := false
		for i, m := range msgs {
			if done[i] {
				continue
			}
			if _, dup := c.ids[m.GetId()]; dup {
				done[i] = true
				res.duplicates++
				continue
			}
			ack, err := h.publish(ctx, c, recs[i])
			if isWrongLastSequence(err) {
				conflict = true
				break
			}
			if err != nil {
				return res, fmt.Errorf("append to history: %w", err)
			}
			done[i] = true
			h.store(c, m, ack.Sequence, len(recs[i]))
			res.appended++
		}
		if !conflict {
			break
		}
		if attempt+1 >= appendLimit {
			return res, errConflict
		}
	}
	res.count = len(c.msgs)
	return res, nil
}

// publish stores one record if the subject's last record is still the one
// we saw. This compare-and-set is what makes appends idempotent by id: no
// Nats-Msg-Id is used, because JetStream's duplicate window would also
// swallow a legitimate re-append after DeleteConversation.
func (h *historyStore) publish(ctx context.Context, c *conversation, rec []byte) (*jetstream.PubAck, error) {
	msg := &nats.Msg{Subject: c.subject, Data: rec, Header: nats.Header{}}
	msg.Header.Set(formatHeader, formatVersion)
	return natsx.Call(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
		return h.js.PublishMsg(ctx, msg,
			jetstream.WithExpectStream(natsx.StreamHistory),
			jetstream.WithExpectLastSequencePerSubject(c.lastSeq),
		)
	})
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

// delete purges a conversation and returns how many messages it had.
func (h *historyStore) delete(ctx context.Context, key convKey) (int, error) {
	c, err := h.conversation(key)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := h.refresh(ctx, c); err != nil {
		return 0, err
	}
	n := len(c.msgs)
	st, err := h.getStream(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := natsx.Call(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, st.Purge(ctx, jetstream.WithPurgeSubject(c.subject))
	}); err != nil {
		return 0, fmt.Errorf("delete history: %w", err)
	}
	h.reset(c)
	h.convs.Remove(key)
	return n, nil
}
