package natsx

import (
	"fmt"
	"strings"
)

// MaxTokenLen bounds one identifier (tenant, run, conversation) used in a
// subject or key; long enough for UUIDs, ULIDs and readable names.
const MaxTokenLen = 128

// ValidateToken checks that s can be one subject token and one KV key part:
// 1..MaxTokenLen characters from [A-Za-z0-9_-]. That excludes everything
// NATS gives meaning to ('.', '*', '>', whitespace) and anything a KV key
// rejects, so a hostile or mistaken ID can never widen a subscription or
// address another tenant's data. kind names the field in the error.
func ValidateToken(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s must not be empty", kind)
	}
	if len(s) > MaxTokenLen {
		return fmt.Errorf("%s is %d bytes long; the maximum is %d", kind, len(s), MaxTokenLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			continue
		}
		return fmt.Errorf("%s %q has invalid character %q at byte %d: use only letters, digits, '-' and '_'", kind, s, c, i)
	}
	return nil
}

func build(format string, pairs ...string) (string, error) {
	args := make([]any, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := ValidateToken(pairs[i], pairs[i+1]); err != nil {
			return "", err
		}
		args = append(args, pairs[i+1])
	}
	return fmt.Sprintf(format, args...), nil
}

// EventSubject is where a run's events are published:
// "baagent.<tenant>.run.<run_id>.events" (captured by StreamEvents).
func EventSubject(tenant, runID string) (string, error) {
	return build("baagent.%s.run.%s.events", "tenant", tenant, "run_id", runID)
}

// TenantEventsFilter matches the events of every run of one tenant:
// "baagent.<tenant>.run.*.events".
func TenantEventsFilter(tenant string) (string, error) {
	return build("baagent.%s.run.*.events", "tenant", tenant)
}

// ParseEventSubject splits a subject built by EventSubject back into its
// tenant and run ID, e.g. for a message received on a wildcard consumer.
func ParseEventSubject(subject string) (tenant, runID string, err error) {
	t := strings.Split(subject, ".")
	if len(t) != 5 || t[0] != "baagent" || t[2] != "run" || t[4] != "events" {
		return "", "", fmt.Errorf("subject %q is not an event subject (want baagent.<tenant>.run.<run_id>.events)", subject)
	}
	if err := ValidateToken("tenant", t[1]); err != nil {
		return "", "", fmt.Errorf("subject %q: %w", subject, err)
	}
	if err := ValidateToken("run_id", t[3]); err != nil {
		return "", "", fmt.Errorf("subject %q: %w", subject, err)
	}
	return t[1], t[3], nil
}

// RunSubject is where a run is queued for execution:
// "baagent.runs.<tenant>.<run_id>" (captured by the work-queue StreamRuns).
func RunSubject(tenant, runID string) (string, error) {
	return build("baagent.runs.%s.%s", "tenant", tenant, "run_id", runID)
}

// CaptureKindHeader says what a message on a memory capture subject
// carries: absent (or CaptureKindEpisode), an AddEpisodeRequest;
// CaptureKindTrace, a RecordTraceRequest (a finished run's interaction
// trace). Both kinds share a conversation's subject, so purging it removes
// both.
const CaptureKindHeader = "Baagent-Capture-Kind"

// Capture kinds, the values of CaptureKindHeader.
const (
	CaptureKindEpisode = "episode"
	CaptureKindTrace   = "trace"
)

// MemoryCaptureSubject is where a finished run waits to become a memory
// episode: "baagent.memcapture.<tenant>.<conversation_id>" (captured by
// the work-queue StreamMemoryCapture). Per conversation, so that deleting
// a conversation can purge its pending captures.
func MemoryCaptureSubject(tenant, conversationID string) (string, error) {
	return build("baagent.memcapture.%s.%s", "tenant", tenant, "conversation_id", conversationID)
}

// ParseMemoryCaptureSubject splits a subject built by MemoryCaptureSubject
// back into its tenant and conversation id.
func ParseMemoryCaptureSubject(subject string) (tenant, conversationID string, err error) {
	t := strings.Split(subject, ".")
	if len(t) != 4 || t[0] != "baagent" || t[1] != "memcapture" {
		return "", "", fmt.Errorf("subject %q is not a memory capture subject (want baagent.memcapture.<tenant>.<conversation_id>)", subject)
	}
	if err := ValidateToken("tenant", t[2]); err != nil {
		return "", "", fmt.Errorf("subject %q: %w", subject, err)
	}
	if err := ValidateToken("conversation_id", t[3]); err != nil {
		return "", "", fmt.Errorf("subject %q: %w", subject, err)
	}
	return t[2], t[3], nil
}

// HistorySubject is where a conversation's messages are appended:
// "baagent.<tenant>.conversation.<conversation_id>.messages" (StreamHistory).
func HistorySubject(tenant, conversationID string) (string, error) {
	return build("baagent.%s.conversation.%s.messages", "tenant", tenant, "conversation_id", conversationID)
}

// CheckpointKey is a run's key in BucketCheckpoints: "<tenant>.<run_id>".
// The tenant prefix keeps tenants apart and lets a tenant's keys be listed
// with the filter "<tenant>.*".
func CheckpointKey(tenant, runID string) (string, error) {
	return build("%s.%s", "tenant", tenant, "run_id", runID)
}

// RunKey is a run record's key in BucketRuns: "<tenant>.<run_id>".
func RunKey(tenant, runID string) (string, error) {
	return build("%s.%s", "tenant", tenant, "run_id", runID)
}
