package orchestrator

import (
	"context"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// DefaultSystemPrompt is the platform's system prompt; Options.SystemPrompt
// replaces it and RunSpec.system_prompt is appended to it.
const DefaultSystemPrompt = `You are BA-Agent, a business analysis assistant. You work in ReAct steps: think about what you need, call a tool, read its result, and repeat until you can answer.

- Use the tools to look at the data in the conversation's workspace; never invent numbers, quote what the tools returned.
- Tool results may be shortened; when a result names an artifact id, read more of it with artifact_read.
- When a tool call fails, read the error, fix the arguments or try another approach.
- When a skill in the catalog matches the task, activate it with the skill tool first and follow its instructions.
- Finish with a concise answer in Markdown that states the figures and where they came from.`

// systemMessages builds the messages that open every window: the platform
// prompt with the run's own prompt appended, then the level-1 skills
// catalog (never compressed).
func systemMessages(platform, runPrompt, catalog string) []*baagentv1.ChatMessage {
	prompt := platform
	if p := strings.TrimSpace(runPrompt); p != "" {
		prompt += "\n\n" + p
	}
	msgs := []*baagentv1.ChatMessage{{Role: baagentv1.Role_ROLE_SYSTEM, Content: prompt}}
	if strings.TrimSpace(catalog) != "" {
		msgs = append(msgs, &baagentv1.ChatMessage{
			Role:    baagentv1.Role_ROLE_SYSTEM,
			Kind:    baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG,
			Content: "# Skills\nActivate a skill with the skill tool ({\"name\": \"<skill>\"}) when the task matches it.\n\n" + catalog,
		})
	}
	return msgs
}

// catalog renders the level-1 skills catalog within its token budget.
func (r *run) catalog(ctx context.Context) (*baagentv1.GetCatalogResponse, error) {
	resp, err := r.s.opts.Skills.GetCatalog(ctx, &baagentv1.GetCatalogRequest{
		Tenant:      r.rec.GetTenant(),
		Project:     r.rec.GetProject(),
		Model:       r.rec.GetModel(),
		TokenBudget: r.s.opts.CatalogTokenBudget,
	})
	if err != nil {
		return nil, peerError(ctx, "skills", "GetCatalog", err)
	}
	return resp, nil
}
