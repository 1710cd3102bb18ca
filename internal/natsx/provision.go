package natsx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the JetStream streams and KV buckets the services share.
const (
	// StreamEvents holds every run event, replayed by the gateway for resume.
	StreamEvents = "BAAGENT_EVENTS"
	// StreamRuns is the work queue of runs waiting for an orchestrator.
	StreamRuns = "BAAGENT_RUNS"
	// StreamHistory is the durable, append-only conversation history.
	StreamHistory = "BAAGENT_HISTORY"
	// StreamMemoryCapture is the work queue of finished runs waiting to
	// become memory episodes (services/memory/capture consumes it).
	StreamMemoryCapture = "BAAGENT_MEMORY_CAPTURE"
	// BucketCheckpoints holds run checkpoints for resuming on another replica.
	BucketCheckpoints = "baagent_checkpoints"
	// BucketRuns holds run records (status, timestamps) for get and list.
	BucketRuns = "baagent_runs"
	// BucketToolIdempotency holds the toolrunner's idempotency records
	// (a call started, then its result), shared by every replica.
	BucketToolIdempotency = "baagent_tool_idempotency"
	// BucketBudgets holds the tenants' and API keys' budgets set through
	// the admin API (they replace the budgets file's).
	BucketBudgets = "baagent_budgets"
	// BucketUsage is the usage ledger: model cost and tokens per tenant
	// (and API key) and UTC day or month, with the reservations of model
	// calls in progress.
	BucketUsage = "baagent_usage"
	// BucketConversations is the orchestrator's index of each tenant's
	// conversations (title, activity, state), key <tenant>.<conversation_id>.
	BucketConversations = "baagent_conversations"
	// BucketMCPOAuth holds the toolrunner's OAuth grants for MCP servers
	// (sealed), key g.<tenant>.<server> (base64url), and dynamically
	// registered clients, key c.<server>.
	BucketMCPOAuth = "baagent_mcp_oauth"
	// BucketMCPOAuthState holds MCP OAuth authorizations in progress, key
	// s.<state>; its TTL drops the abandoned ones.
	BucketMCPOAuthState = "baagent_mcp_oauth_state"
	// DefaultMCPOAuthStateTTL bounds how long an authorization may wait
	// for its callback.
	DefaultMCPOAuthStateTTL = 15 * time.Minute
	// DefaultMCPOAuthMaxBytes bounds each MCP OAuth bucket.
	DefaultMCPOAuthMaxBytes = 64 << 20
)

// Subject patterns captured by the streams. They must not overlap (JetStream
// rejects overlapping streams), which is why the run queue uses four tokens
// while events and history use five.
const (
	EventsSubjects  = "baagent.*.run.*.events"
	RunsSubjects    = "baagent.runs.*.*"
	HistorySubjects = "baagent.*.conversation.*.messages"
	// MemoryCaptureSubjects: baagent.memcapture.<tenant>.<conversation_id>.
	MemoryCaptureSubjects = "baagent.memcapture.*.*"
)

// Defaults for ProvisionConfig.
const (
	DefaultEventsMaxAge        = 72 * time.Hour
	DefaultEventsMaxBytes      = 1 << 30 // 1 GiB
	DefaultDuplicateWindow     = 2 * time.Minute
	DefaultRunsMaxAge          = 24 * time.Hour
	DefaultRunsMaxBytes        = 256 << 20 // 256 MiB
	DefaultHistoryMaxAge       = 30 * 24 * time.Hour
	DefaultHistoryMaxBytes     = 4 << 30 // 4 GiB
	DefaultCheckpointsTTL      = 7 * 24 * time.Hour
	DefaultCheckpointsMaxBytes = 1 << 30 // 1 GiB
	DefaultRunRecordsTTL       = 30 * 24 * time.Hour
	DefaultRunRecordsMaxBytes  = 256 << 20 // 256 MiB
	// A retry of a tool call comes within a run's life (a resumed run
	// re-sends its calls minutes later, seldom hours); a day covers it.
	DefaultToolIdempotencyTTL      = 24 * time.Hour
	DefaultToolIdempotencyMaxBytes = 1 << 30 // 1 GiB
	// Budgets are small and few (one per tenant or key with its own).
	DefaultBudgetsMaxBytes = 16 << 20 // 16 MiB
	// A month's usage entry is last written in its month; kept two
	// months, the previous month stays readable.
	DefaultUsageTTL      = 62 * 24 * time.Hour
	DefaultUsageMaxBytes = 256 << 20 // 256 MiB
	// Conversation index entries live until the conversation is deleted.
	DefaultConversationsMaxBytes = 256 << 20 // 256 MiB
	// A capture request waits at most as long as the memory service may
	// reasonably be down; one is a few KiB.
	DefaultMemoryCaptureMaxAge   = 7 * 24 * time.Hour
	DefaultMemoryCaptureMaxBytes = 256 << 20 // 256 MiB
)

// ProvisionConfig holds the limits of what Provision creates. Zero fields
// take the defaults above; negative values are rejected.
type ProvisionConfig struct {
	// Replicas per stream and bucket; 0 means 1 (use 3 on a NATS cluster).
	Replicas int

	// EventsMaxAge and EventsMaxBytes bound the event stream; the oldest
	// events are discarded first, and clients resuming from an expired
	// cursor get a reset event.
	EventsMaxAge   time.Duration
	EventsMaxBytes int64
	// DuplicateWindow is how long publishers can dedupe with Nats-Msg-Id, on
	// the events, runs and history streams.
	DuplicateWindow time.Duration

	// RunsMaxAge and RunsMaxBytes bound the run queue. When it is full, new
	// submissions fail instead of dropping queued runs.
	RunsMaxAge   time.Duration
	RunsMaxBytes int64

	// HistoryMaxAge and HistoryMaxBytes bound conversation history.
	HistoryMaxAge   time.Duration
	HistoryMaxBytes int64

	// CheckpointsTTL and CheckpointsMaxBytes bound the checkpoint bucket.
	CheckpointsTTL      time.Duration
	CheckpointsMaxBytes int64

	// RunRecordsTTL and RunRecordsMaxBytes bound the run record bucket.
	RunRecordsTTL      time.Duration
	RunRecordsMaxBytes int64

	// ToolIdempotencyTTL and ToolIdempotencyMaxBytes bound the
	// toolrunner's idempotency records. When the bucket is full a call
	// with side effects is refused (nothing runs) rather than run without
	// a record.
	ToolIdempotencyTTL      time.Duration
	ToolIdempotencyMaxBytes int64

	// ConversationsMaxBytes bounds the conversation index (no TTL: an
	// entry lives until its conversation is deleted).
	ConversationsMaxBytes int64
}

func (c ProvisionConfig) withDefaults() (ProvisionConfig, error) {
	type field struct {
		name string
		dur  *time.Duration
		n    *int64
		def  int64
	}
	fields := []field{
		{name: "EventsMaxAge", dur: &c.EventsMaxAge, def: int64(DefaultEventsMaxAge)},
		{name: "EventsMaxBytes", n: &c.EventsMaxBytes, def: DefaultEventsMaxBytes},
		{name: "DuplicateWindow", dur: &c.DuplicateWindow, def: int64(DefaultDuplicateWindow)},
		{name: "RunsMaxAge", dur: &c.RunsMaxAge, def: int64(DefaultRunsMaxAge)},
		{name: "RunsMaxBytes", n: &c.RunsMaxBytes, def: DefaultRunsMaxBytes},
		{name: "HistoryMaxAge", dur: &c.HistoryMaxAge, def: int64(DefaultHistoryMaxAge)},
		{name: "HistoryMaxBytes", n: &c.HistoryMaxBytes, def: DefaultHistoryMaxBytes},
		{name: "CheckpointsTTL", dur: &c.CheckpointsTTL, def: int64(DefaultCheckpointsTTL)},
		{name: "CheckpointsMaxBytes", n: &c.CheckpointsMaxBytes, def: DefaultCheckpointsMaxBytes},
		{name: "RunRecordsTTL", dur: &c.RunRecordsTTL, def: int64(DefaultRunRecordsTTL)},
		{name: "RunRecordsMaxBytes", n: &c.RunRecordsMaxBytes, def: DefaultRunRecordsMaxBytes},
		{name: "ToolIdempotencyTTL", dur: &c.ToolIdempotencyTTL, def: int64(DefaultToolIdempotencyTTL)},
		{name: "ToolIdempotencyMaxBytes", n: &c.ToolIdempotencyMaxBytes, def: DefaultToolIdempotencyMaxBytes},
		{name: "ConversationsMaxBytes", n: &c.ConversationsMaxBytes, def: DefaultConversationsMaxBytes},
	}
	for _, f := range fields {
		switch {
		case f.dur != nil && *f.dur < 0, f.n != nil && *f.n < 0:
			return c, fmt.Errorf("provision: %s must not be negative", f.name)
		case f.dur != nil && *f.dur == 0:
			*f.dur = time.Duration(f.def)
		case f.n != nil && *f.n == 0:
			*f.n = f.def
		}
	}
	if c.Replicas < 0 {
		return c, errors.New("provision: Replicas must not be negative")
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	for _, age := range []struct {
		name string
		d    time.Duration
	}{{"EventsMaxAge", c.EventsMaxAge}, {"RunsMaxAge", c.RunsMaxAge}, {"HistoryMaxAge", c.HistoryMaxAge}} {
		if c.DuplicateWindow > age.d {
			return c, fmt.Errorf("provision: DuplicateWindow (%s) must not exceed %s (%s)", c.DuplicateWindow, age.name, age.d)
		}
	}
	return c, nil
}

// Streams returns the stream configurations Provision applies, with
// defaults filled in; exposed so operators and tests can see exactly what
// is created.
func (c ProvisionConfig) Streams() ([]jetstream.StreamConfig, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	return []jetstream.StreamConfig{
		{
			Name:        StreamEvents,
			Description: "BA-Agent run events, per-run ordered; replayed for resume",
			Subjects:    []string{EventsSubjects},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      c.EventsMaxAge,
			MaxBytes:    c.EventsMaxBytes,
			Discard:     jetstream.DiscardOld,
			Duplicates:  c.DuplicateWindow,
			Replicas:    c.Replicas,
		},
		{
			Name:        StreamRuns,
			Description: "BA-Agent run work queue; each run is executed by one orchestrator",
			Subjects:    []string{RunsSubjects},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      c.RunsMaxAge,
			MaxBytes:    c.RunsMaxBytes,
			Discard:     jetstream.DiscardNew,
			Duplicates:  c.DuplicateWindow,
			Replicas:    c.Replicas,
		},
		{
			Name:        StreamHistory,
			Description: "BA-Agent conversation history, append-only",
			Subjects:    []string{HistorySubjects},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      c.HistoryMaxAge,
			MaxBytes:    c.HistoryMaxBytes,
			Discard:     jetstream.DiscardOld,
			Duplicates:  c.DuplicateWindow,
			Replicas:    c.Replicas,
		},
		{
			Name:        StreamMemoryCapture,
			Description: "BA-Agent finished runs waiting to become memory episodes; one consumer",
			Subjects:    []string{MemoryCaptureSubjects},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      DefaultMemoryCaptureMaxAge,
			MaxBytes:    DefaultMemoryCaptureMaxBytes,
			Discard:     jetstream.DiscardNew,
			Duplicates:  c.DuplicateWindow,
			Replicas:    c.Replicas,
		},
	}, nil
}

// Buckets returns the KV bucket configurations Provision applies.
func (c ProvisionConfig) Buckets() ([]jetstream.KeyValueConfig, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	return []jetstream.KeyValueConfig{
		{
			Bucket:      BucketCheckpoints,
			Description: "BA-Agent run checkpoints, key <tenant>.<run_id>",
			History:     1,
			TTL:         c.CheckpointsTTL,
			MaxBytes:    c.CheckpointsMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketRuns,
			Description: "BA-Agent run records, key <tenant>.<run_id>",
			History:     1,
			TTL:         c.RunRecordsTTL,
			MaxBytes:    c.RunRecordsMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketToolIdempotency,
			Description: "BA-Agent toolrunner idempotency records, key hash(tenant, idempotency key)",
			History:     1,
			TTL:         c.ToolIdempotencyTTL,
			MaxBytes:    c.ToolIdempotencyMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketBudgets,
			Description: "BA-Agent budgets set through the admin API, key <tenant> or <tenant>.<api key id>",
			History:     1,
			MaxBytes:    DefaultBudgetsMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketUsage,
			Description: "BA-Agent usage ledger, key <tenant>[.k.<api key id>].<d|m>.<UTC day or month>",
			History:     1,
			TTL:         DefaultUsageTTL,
			MaxBytes:    DefaultUsageMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketConversations,
			Description: "BA-Agent conversation index, key <tenant>.<conversation_id>",
			History:     1,
			MaxBytes:    c.ConversationsMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketMCPOAuth,
			Description: "BA-Agent MCP OAuth grants (sealed), key g.<tenant>.<server> or c.<server>",
			History:     1,
			MaxBytes:    DefaultMCPOAuthMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      BucketMCPOAuthState,
			Description: "BA-Agent MCP OAuth authorizations in progress (sealed), key s.<state>",
			History:     1,
			TTL:         DefaultMCPOAuthStateTTL,
			MaxBytes:    DefaultMCPOAuthMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
		},
	}, nil
}

// Provision creates or updates the streams and KV buckets. It is idempotent:
// running it again with the same config changes nothing, and with changed
// limits it updates them in place, so every service may call it at startup.
func Provision(ctx context.Context, js jetstream.JetStream, cfg ProvisionConfig) error {
	streams, err := cfg.Streams()
	if err != nil {
		return err
	}
	buckets, err := cfg.Buckets()
	if err != nil {
		return err
	}
	for _, sc := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("provision stream %s (subjects %v): %w", sc.Name, sc.Subjects, err)
		}
	}
	for _, kc := range buckets {
		if _, err := js.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return fmt.Errorf("provision KV bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}
