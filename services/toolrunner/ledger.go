package toolrunner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Defaults of the idempotency records' liveness.
const (
	// DefaultHeartbeat is how often an execution refreshes its record.
	DefaultHeartbeat = time.Second
	// DefaultLease is how long a record may go without a heartbeat before
	// a waiting retry concludes its toolrunner died mid-call.
	DefaultLease = 5 * time.Second
	// DefaultDrainTimeout is how long Close lets calls that outlived their
	// callers finish before cancelling them.
	DefaultDrainTimeout = 10 * time.Second
	// recordWriteTimeout bounds writing a call's outcome (retries across a
	// NATS blip included); the caller may have gone long ago.
	recordWriteTimeout = 30 * time.Second
)

// recordPoll is the wait between reads of another delivery's record:
// 20 ms, doubling up to 500 ms.
var recordPoll = retry.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}

// Error codes of the idempotency records.
const (
	codeOutcomeUnknown    = "TOOL_OUTCOME_UNKNOWN"
	codeRecordUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE"
	codeKeyReused         = "IDEMPOTENCY_KEY_REUSED"
)

// Outcomes of keyed calls, the label of the idempotency metric.
const (
	keyedExecuted = "executed"    // this delivery ran the tool
	keyedReplayed = "replayed"    // answered from a completed record
	keyedUnknown  = "unknown"     // its execution died mid-call
	keyedRefused  = "unavailable" // no record could be written; nothing ran
	keyedReused   = "key_reused"  // the key belongs to another call
)

// ledger runs tool calls with side effects under an idempotency record:
// claim a key (or find what became of it), execute detached from the
// caller with a heartbeat on the record, record the result. Liveness uses
// the real clock, not the server's injected one: heartbeats and leases are
// about processes dying, not about cache ages.
type ledger struct {
	store     idempotency.Store
	replica   string
	heartbeat time.Duration
	lease     time.Duration
	log       *slog.Logger
}

// claimKind is what a claim found.
type claimKind int

const (
	claimOwned    claimKind = iota // the caller executes; record written
	claimDone                      // result recorded by an earlier delivery
	claimUnknown                   // the earlier execution died mid-call
	claimMismatch                  // the key belongs to another call
)

type claim struct {
	kind   claimKind
	rec    idempotency.Record // owned: the record as written
	rev    uint64             // owned: its revision
	result *baagentv1.ToolExecutionResult
}

func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claim finds the call's record or writes it as started. A record started
// by another execution is waited for while its heartbeat goes on; one
// whose heartbeat stopped for the lease is marked done with an unknown
// outcome (so every later retry gets the same answer at once).
func (l *ledger) claim(ctx context.Context, key, fingerprint, toolName string) (claim, error) {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	holder := l.replica + "/" + hex.EncodeToString(nonce[:])
	create := func() (claim, error) {
		now := time.Now()
		rec := idempotency.Record{State: idempotency.Started, Fingerprint: fingerprint, Holder: holder, Tool: toolName, StartedAt: now, HeartbeatAt: now}
		rev, err := l.store.Create(ctx, key, rec)
		return claim{kind: claimOwned, rec: rec, rev: rev}, err
	}
	// The first delivery of a call is the common case: write first, and
	// read only when a record is there (another delivery's, or our own
	// retried write's).
	if c, err := create(); !errors.Is(err, idempotency.ErrExists) {
		return c, err
	}
	var seenRev uint64
	var seenAt time.Time
	polls := 0
	for {
		e, err := l.store.Get(ctx, key)
		switch {
		case errors.Is(err, idempotency.ErrNotFound): // expired or purged meanwhile
			if c, err := create(); !errors.Is(err, idempotency.ErrExists) {
				return c, err
			}
			continue
		case err != nil && seenRev == 0:
			return claim{}, err
		case err != nil:
			// The store is unreachable while we wait: that time does not
			// count against the execution's lease.
			if ctx.Err() != nil {
				return claim{}, ctx.Err()
			}
			seenAt = time.Now()
		case e.Fingerprint != fingerprint:
			return claim{kind: claimMismatch}, nil
		case e.State == idempotency.Done:
			res := &baagentv1.ToolExecutionResult{}
			if err := proto.Unmarshal(e.Result, res); err != nil {
				return claim{}, fmt.Errorf("decode recorded result: %w", err)
			}
			return claim{kind: claimDone, result: res}, nil
		case e.Holder == holder:
			return claim{kind: claimOwned, rec: e.Record, rev: e.Revision}, nil
		case e.Revision != seenRev:
			seenRev, seenAt = e.Revision, time.Now()
		case time.Since(seenAt) >= l.lease:
			rec := e.Record
			rec.State, rec.EndedAt = idempotency.Done, time.Now()
			rec.Result, _ = proto.Marshal(outcomeUnknown(toolName, e.StartedAt))
			if _, err := l.store.Update(ctx, key, rec, e.Revision); errors.Is(err, idempotency.ErrRevision) {
				continue // it moved after all: look again
			} else if err != nil {
				l.log.WarnContext(ctx, "unknown outcome not recorded", "tool", toolName, "error", err)
			}
			l.log.WarnContext(ctx, "tool call's execution stopped without an outcome", "tool", toolName,
				"holder", e.Holder, "started_at", e.StartedAt, "lease", l.lease.String())
			return claim{kind: claimUnknown, rec: e.Record}, nil
		}
		if !retry.Sleep(ctx, recordPoll.Delay(polls)) {
			return claim{}, ctx.Err()
		}
		polls++
	}
}

// beat refreshes the owned record every heartbeat until ctx ends and
// returns the record's latest revision. It stops early if the record was
// taken over (another replica declared the outcome unknown).
func (l *ledger) beat(ctx context.Context, key string, rec idempotency.Record, rev uint64) uint64 {
	t := time.NewTicker(l.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return rev
		case <-t.C:
		}
		rec.HeartbeatAt = time.Now()
		r, err := l.store.Update(ctx, key, rec, rev)
		switch {
		case err == nil:
			rev = r
		case errors.Is(err, idempotency.ErrRevision):
			mine, r, ok := l.ours(ctx, key, rec.Holder)
			if !ok || mine.State != idempotency.Started {
				l.log.Warn("tool call's record taken over while it ran", "tool", rec.Tool)
				return rev
			}
			rev = r
		default:
			// A missed heartbeat; the lease allows several.
			if ctx.Err() == nil {
				l.log.Debug("heartbeat not recorded", "tool", rec.Tool, "error", err)
			}
		}
	}
}

// complete records res as the call's outcome. A write that races with a
// heartbeat stored after its revision was read, or whose own first attempt
// was stored, is recognised by the holder and written again or kept.
func (l *ledger) complete(key string, rec idempotency.Record, rev uint64, res *baagentv1.ToolExecutionResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
	defer cancel()
	r := proto.Clone(res).(*baagentv1.ToolExecutionResult)
	r.ToolCallId, r.DurationMs = "", 0
	data, err := proto.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	rec.State, rec.EndedAt, rec.Result = idempotency.Done, time.Now(), data
	for range 3 {
		_, err = l.store.Update(ctx, key, rec, rev)
		if !errors.Is(err, idempotency.ErrRevision) {
			return err
		}
		cur, r, ok := l.ours(ctx, key, rec.Holder)
		switch {
		case !ok:
			return errors.New("the record was taken over: another replica recorded the outcome as unknown")
		case cur.State == idempotency.Done:
			return nil // our retried write was stored
		}
		rev = r
	}
	return err
}

// ours reads the record under key and reports whether holder wrote it.
func (l *ledger) ours(ctx context.Context, key, holder string) (idempotency.Record, uint64, bool) {
	e, err := l.store.Get(ctx, key)
	if err != nil || e.Holder != holder {
		return idempotency.Record{}, 0, false
	}
	return e.Record, e.Revision, true
}

// outcomeUnknown is the result of a call whose execution stopped without
// recording what it did.
func outcomeUnknown(toolName string, started time.Time) *baagentv1.ToolExecutionResult {
	res := &baagentv1.ToolExecutionResult{}
	fail(res, tool.Errorf(baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, codeOutcomeUnknown,
		"%s was started at %s by a tool service that stopped before recording its outcome, so it is not known whether it took effect. "+
			"It was not run again because it has side effects: check its effect (for example, read what it should have written) before calling it again.",
		toolName, started.UTC().Format(time.RFC3339)))
	return res
}
