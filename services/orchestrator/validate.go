package orchestrator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/orchestrator/internal/budget"
)

// Edge validation of every OrchestratorService request. Each function returns
// nil or an InvalidArgument status naming every offending field.

func validateStartRun(req *baagentv1.OrchestratorServiceStartRunRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.RunSpec(&e, "spec", req.GetSpec())
	validate.Optional(&e, "parent_run_id", req.GetParentRunId(), validate.RunID)
	checkKeyID(&e, "api_key_id", req.GetApiKeyId())
	for _, k := range slices.Sorted(maps.Keys(req.GetSpec().GetLabels())) {
		if strings.HasPrefix(k, reservedLabelPrefix) {
			e.Add(validate.Key("spec.labels", k), "keys starting with "+reservedLabelPrefix+" are reserved for the platform (sub-agent runs)")
		}
	}
	return e.Err()
}

// reservedLabelPrefix marks the labels the orchestrator sets on the runs it
// starts itself (sub-agents: which one, its depth, its workspace); a client
// may not set them.
const reservedLabelPrefix = "baagent."

func validateGetRun(req *baagentv1.OrchestratorServiceGetRunRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.RunID(&e, "run_id", req.GetRunId())
	return e.Err()
}

func validateListRuns(req *baagentv1.OrchestratorServiceListRunsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	validate.RunStates(&e, "states", req.GetStates())
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func validateCancelRun(req *baagentv1.OrchestratorServiceCancelRunRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.RunID(&e, "run_id", req.GetRunId())
	validate.Text(&e, "reason", req.GetReason(), validate.MaxReasonBytes)
	return e.Err()
}

func validateSubmitInput(req *baagentv1.OrchestratorServiceSubmitInputRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.RunID(&e, "run_id", req.GetRunId())
	validate.RunInput(&e, "input", req.GetInput())
	return e.Err()
}

func validateBudgetScope(tenant, keyID string) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", tenant)
	checkKeyID(&e, "api_key_id", keyID)
	return e.Err()
}

func validateGetUsage(req *baagentv1.OrchestratorServiceGetUsageRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	checkKeyID(&e, "api_key_id", req.GetApiKeyId())
	if d := req.GetHistoryDays(); d < 0 || d > budget.MaxHistoryDays {
		e.Add("history_days", fmt.Sprintf("must be 0..%d (the usage ledger keeps days that long)", budget.MaxHistoryDays))
	}
	return e.Err()
}

func validateSetBudget(req *baagentv1.OrchestratorServiceSetBudgetRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	checkKeyID(&e, "api_key_id", req.GetApiKeyId())
	switch {
	case req.GetClear() && req.GetBudget() != nil:
		e.Add("budget", "must be empty when clear is set")
	case !req.GetClear() && req.GetBudget() == nil:
		e.Add("budget", "required (or set clear)")
	case req.GetBudget() != nil:
		budget.Validate(&e, "budget", req.GetBudget())
	}
	return e.Err()
}

// checkKeyID checks an optional API key id.
func checkKeyID(e *validate.Errors, field, id string) {
	if id == "" {
		return
	}
	if err := budget.CheckKeyID(id); err != nil {
		e.Add(field, err.Error())
	}
}
