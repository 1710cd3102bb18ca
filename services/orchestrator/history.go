package orchestrator

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// appendMessages stores messages in the conversation, tagged with the run
// as their round. Message ids derive from the run, step and position, so a
// repeated append is a no-op.
func (r *run) appendMessages(ctx context.Context, msgs ...*baagentv1.ChatMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	now := timestamppb.Now()
	for _, m := range msgs {
		m.RoundId = r.rec.GetRunId()
		if m.CreatedAt == nil {
			m.CreatedAt = now
		}
	}
	_, err := r.s.opts.Context.Append(ctx, &baagentv1.AppendRequest{
		Tenant:         r.rec.GetTenant(),
		ConversationId: r.rec.GetConversationId(),
		Messages:       msgs,
	})
	if err != nil {
		return peerError(ctx, "context", "Append", err)
	}
	return nil
}
