package memory

import (
	"math"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// memoryID checks a memory id: prefix and 26 characters of a ULID.
func memoryID(e *validate.Errors, field, v, prefix string) {
	switch {
	case v == "":
		e.Add(field, "required")
	case !validID(prefix, v):
		e.Addf(field, "must be %q followed by 26 characters of a ULID (Crockford base32)", prefix)
	}
}

// entityType checks an entity type (a filter): 1-64 bytes of text without
// control characters.
func entityType(e *validate.Errors, field, v string) {
	validate.Name(e, field, v)
	validate.MaxBytes(e, field, v, MaxTypeBytes)
}

// noNUL refuses NUL characters in free text: no meaning in text, and
// PostgreSQL cannot store them.
func noNUL(e *validate.Errors, field, v string) {
	if strings.IndexByte(v, 0) >= 0 {
		e.Add(field, "must not contain NUL characters")
	}
}

func page(e *validate.Errors, size int32, token string) {
	validate.PageSize(e, "page_size", size, MaxPageSize)
	validate.Optional(e, "page_token", token, validate.PageToken)
}

func validateAddEpisode(r *baagentv1.AddEpisodeRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.RequiredText(&e, "content", r.GetContent(), MaxContentBytes)
	noNUL(&e, "content", r.GetContent())
	validate.Enum(&e, "source", r.GetSource(), baagentv1.EpisodeSource_name, true)
	validate.Optional(&e, "conversation_id", r.GetConversationId(), validate.ID)
	validate.Optional(&e, "run_id", r.GetRunId(), validate.RunID)
	if k := r.GetIdempotencyKey(); k != "" {
		validate.IdempotencyKey(&e, "idempotency_key", k)
		validate.MaxBytes(&e, "idempotency_key", k, MaxIdempotencyBytes)
	}
	return e.Err()
}

func validateTenantAndID(tenant, field, id, prefix string) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", tenant)
	memoryID(&e, field, id, prefix)
	return e.Err()
}

func validateListEpisodes(r *baagentv1.ListEpisodesRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.Optional(&e, "conversation_id", r.GetConversationId(), validate.ID)
	validate.Enum(&e, "status", r.GetStatus(), baagentv1.EpisodeStatus_name, true)
	page(&e, r.GetPageSize(), r.GetPageToken())
	return e.Err()
}

func validateListEntities(r *baagentv1.ListEntitiesRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.Optional(&e, "type", r.GetType(), entityType)
	validate.Text(&e, "name_prefix", r.GetNamePrefix(), MaxNamePrefixBytes)
	noNUL(&e, "name_prefix", r.GetNamePrefix())
	page(&e, r.GetPageSize(), r.GetPageToken())
	return e.Err()
}

func validateSearch(r *baagentv1.SearchRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.RequiredText(&e, "query", r.GetQuery(), MaxQueryBytes)
	noNUL(&e, "query", r.GetQuery())
	validate.Enum(&e, "mode", r.GetMode(), baagentv1.SearchMode_name, true)
	if k := r.GetTopK(); k != 0 {
		validate.Range(&e, "top_k", k, 1, MaxTopK)
	}
	weight := func(field string, v *float64, def float64) float64 {
		if v == nil {
			return def
		}
		if math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 {
			e.Addf(field, "must be a finite number at least 0, got %v", *v)
			return 0
		}
		return *v
	}
	vw := weight("vector_weight", r.VectorWeight, DefaultVectorWeight)
	kw := weight("keyword_weight", r.KeywordWeight, DefaultKeywordWeight)
	gw := weight("graph_weight", r.GraphWeight, DefaultGraphWeight)
	if mode := r.GetMode(); (mode == baagentv1.SearchMode_SEARCH_MODE_UNSPECIFIED || mode == baagentv1.SearchMode_SEARCH_MODE_HYBRID) &&
		vw == 0 && kw == 0 && gw == 0 && e.Len() == 0 {
		e.Add("vector_weight", "the weights of a hybrid search must not all be 0")
	}
	if r.RrfK != nil {
		validate.Range(&e, "rrf_k", r.GetRrfK(), 1, MaxRRFK)
	}
	validate.MaxItems(&e, "entity_types", len(r.GetEntityTypes()), MaxEntityTypes)
	for i, t := range r.GetEntityTypes() {
		if i >= MaxEntityTypes {
			break
		}
		entityType(&e, validate.Index("entity_types", i), t)
	}
	return e.Err()
}

func validateGetGraph(r *baagentv1.GetGraphRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	memoryID(&e, "entity_id", r.GetEntityId(), entityPrefix)
	if d := r.GetDepth(); d != 0 {
		validate.Range(&e, "depth", d, 1, MaxDepth)
	}
	if n := r.GetMaxNodes(); n != 0 {
		validate.Range(&e, "max_nodes", n, 1, MaxGraphNodes)
	}
	return e.Err()
}

func validateTenant(tenant string) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", tenant)
	return e.Err()
}

func validateGetSettings(r *baagentv1.GetMemorySettingsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.Optional(&e, "conversation_id", r.GetConversationId(), validate.ID)
	return e.Err()
}

func validateUpdateSettings(r *baagentv1.UpdateMemorySettingsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.Optional(&e, "conversation_id", r.GetConversationId(), validate.ID)
	switch {
	case r.ConversationCapture != nil && r.GetConversationId() == "":
		e.Add("conversation_id", "required when conversation_capture is set")
	case r.ConversationPatterns != nil && r.GetConversationId() == "":
		e.Add("conversation_id", "required when conversation_patterns is set")
	case r.ConversationCapture == nil && r.ConversationPatterns == nil && r.GetConversationId() != "":
		e.Add("conversation_capture", "required when conversation_id is set (or conversation_patterns)")
	}
	return e.Err()
}

func validateDeleteConversation(r *baagentv1.DeleteConversationMemoryRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.ID(&e, "conversation_id", r.GetConversationId())
	return e.Err()
}
