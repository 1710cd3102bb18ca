package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/textcut"
)

// Memory (docs/concepts/memory.md, "Memory in runs"): a completed
// top-level run is captured as an episode through the capture work queue
// (natsx.StreamMemoryCapture, consumed by services/memory/capture); a
// memory_search result is reported as a memory_recalled event; deleting a
// conversation deletes its episodes.

// Names of the memory tools the toolrunner offers.
const (
	memorySearchTool = "memory_search"
	memoryAddTool    = "memory_add"
)

// Bounds of a captured episode's text.
const (
	episodeQuestionBytes    = 8 << 10  // the run's input
	episodeAnswerBytes      = 16 << 10 // the final answer
	episodeObservationBytes = 1 << 10  // one tool result
	episodeObservationsMax  = 8 << 10  // every tool result together, names included
	episodeObservationsN    = 64       // tool results noted
	recalledMaxEntities     = 100      // entities a memory_recalled event names
)

// Outcomes of a capture, the label of memory_captures_total.
const (
	captureQueued = "queued" // published to the capture queue
	captureFailed = "failed" // not published: the run is not remembered
)

// episodeNotes collects a run's key observations for its episode: the
// successful tool results, each cut at episodeObservationBytes, until
// episodeObservationsMax is used. Tool calls of one step finish
// concurrently, hence the lock.
type episodeNotes struct {
	mu    sync.Mutex
	lines []string
	bytes int
}

// note adds a successful tool result, unless it is a memory tool's (what
// memory already holds is not remembered again) or the notes are full.
func (n *episodeNotes) note(obs *baagentv1.ObservePayload) {
	if !obs.GetSuccess() || obs.GetObservation() == "" || obs.GetParentToolCallId() != "" {
		return
	}
	switch obs.GetToolName() {
	case memorySearchTool, memoryAddTool:
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	prefix := fmt.Sprintf("[%s] ", obs.GetToolName())
	room := episodeObservationsMax - n.bytes - len(prefix)
	if room <= 0 || len(n.lines) == episodeObservationsN {
		return
	}
	text := textcut.Mark(strings.TrimSpace(obs.GetObservation()), min(episodeObservationBytes, room))
	if text == "" {
		return
	}
	n.lines = append(n.lines, prefix+text)
	n.bytes += len(prefix) + len(text)
}

func (n *episodeNotes) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.lines...)
}

// restore puts back the notes of a checkpoint (a run resumed after a crash
// or a question to the user), within the bounds of note.
func (n *episodeNotes) restore(lines []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines, n.bytes = nil, 0
	for _, l := range lines {
		if len(n.lines) == episodeObservationsN || n.bytes+len(l) > episodeObservationsMax {
			break
		}
		n.lines = append(n.lines, strings.ToValidUTF8(l, "\uFFFD"))
		n.bytes += len(l)
	}
}

// checkpointNotes are the notes a checkpoint keeps: those of a run that
// is captured, none otherwise.
func (r *run) checkpointNotes() []string {
	if r.s.opts.Memory == nil || r.rec.GetParentRunId() != "" {
		return nil
	}
	return r.notes.snapshot()
}

// EpisodeContent is the text of a completed run's episode: the question,
// the final answer and the key observations, each bounded (at most about
// 33 KiB in all, within AddEpisode's 64 KiB).
func EpisodeContent(question, answer string, observations []string) string {
	var b strings.Builder
	b.WriteString("Question: ")
	b.WriteString(textcut.Mark(strings.TrimSpace(question), episodeQuestionBytes))
	b.WriteString("\n\nAnswer: ")
	b.WriteString(textcut.Mark(strings.TrimSpace(answer), episodeAnswerBytes))
	if len(observations) > 0 {
		b.WriteString("\n\nObservations:")
		for _, o := range observations {
			b.WriteString("\n- ")
			b.WriteString(o)
		}
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// captureEpisode queues the completed run for memory: a top-level run of
// an orchestrator with a memory service. It publishes before the run's
// terminal event, so a crash in between completes the run again and
// publishes again, which the stream (Nats-Msg-Id = run id) and the
// memory service (idempotency key = run id) both answer with the first.
// A failure is logged and counted, never the run's.
func (r *run) captureEpisode(ctx context.Context, answer string) {
	if r.s.opts.Memory == nil || r.rec.GetParentRunId() != "" {
		return
	}
	tenant, conv, runID := r.rec.GetTenant(), r.rec.GetConversationId(), r.rec.GetRunId()
	subj, err := natsx.MemoryCaptureSubject(tenant, conv)
	if err == nil {
		err = publishCapture(ctx, r.s.opts.JetStream, subj, &baagentv1.AddEpisodeRequest{
			Tenant:         tenant,
			Content:        EpisodeContent(r.rec.GetInput(), answer, r.notes.snapshot()),
			Source:         baagentv1.EpisodeSource_EPISODE_SOURCE_RUN,
			ConversationId: conv,
			RunId:          runID,
			IdempotencyKey: runID,
		})
	}
	if err != nil {
		r.s.metrics.memoryCaptures.WithLabelValues(captureFailed).Inc()
		r.log.Error("run not queued for memory; it will not be remembered", "error", err)
		return
	}
	r.s.metrics.memoryCaptures.WithLabelValues(captureQueued).Inc()
	r.log.Debug("run queued for memory")
}

// publishCapture publishes one capture request with Nats-Msg-Id = its run
// id, retried across a NATS restart.
func publishCapture(ctx context.Context, js jetstream.JetStream, subj string, req *baagentv1.AddEpisodeRequest) error {
	data, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	_, err = natsx.Call(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
		msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, req.GetRunId())
		return js.PublishMsg(ctx, msg, jetstream.WithExpectStream(natsx.StreamMemoryCapture))
	})
	if err != nil {
		return fmt.Errorf("publish to %s: %w", natsx.StreamMemoryCapture, err)
	}
	return nil
}

// recalledPayload is the memory_recalled event of a memory_search call's
// result: the query the call asked and the entities the toolrunner
// carried in memory_hits. Nil for any other call or a failed one.
func recalledPayload(c *baagentv1.ToolCall, args *structpb.Struct, res *baagentv1.ToolExecutionResult) *baagentv1.MemoryRecalledPayload {
	if c.GetName() != memorySearchTool || !res.GetSuccess() {
		return nil
	}
	p := &baagentv1.MemoryRecalledPayload{
		Query:      textcut.Mark(args.GetFields()["query"].GetStringValue(), 4<<10),
		Origin:     "tool",
		ToolCallId: c.GetId(),
	}
	for _, h := range res.GetMemoryHits() {
		if len(p.Entities) == recalledMaxEntities {
			break
		}
		e := h.GetEntity()
		p.Entities = append(p.Entities, &baagentv1.MemoryRecalledEntity{
			EntityId: e.GetId(), Name: e.GetName(), Type: e.GetType(), Score: h.GetScore(),
		})
	}
	return p
}

// purgeConversationMemory removes what memory holds of a conversation: the
// capture requests still queued for it, then its episodes (and what only
// they support) in the memory service. Without a memory service there is
// nothing to remove.
func (s *Server) purgeConversationMemory(ctx context.Context, tenant, id string) (int32, error) {
	if s.opts.Memory == nil {
		return 0, nil
	}
	subj, err := natsx.MemoryCaptureSubject(tenant, id)
	if err != nil {
		return 0, status.Errorf(codes.Internal, "conversation %s: %v", id, err)
	}
	if _, err := natsx.PurgeSubject(ctx, s.opts.JetStream, natsx.StreamMemoryCapture, subj); err != nil {
		return 0, status.Errorf(codes.Unavailable, "delete the memory captures of conversation %s: %v", id, err)
	}
	resp, err := s.opts.Memory.DeleteConversationMemory(ctx, &baagentv1.DeleteConversationMemoryRequest{Tenant: tenant, ConversationId: id})
	if status.Code(err) == codes.Unimplemented {
		// A memory service without the API holds no memory to delete.
		s.log.WarnContext(ctx, "memory service does not implement DeleteConversationMemory; nothing deleted there", "tenant", tenant, "conversation_id", id)
		return 0, nil
	}
	if err != nil {
		return 0, peerStatus("memory", "DeleteConversationMemory", err)
	}
	return resp.GetEpisodesRemoved(), nil
}
