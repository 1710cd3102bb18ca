package skills

import (
	"maps"
	"slices"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// metadataProto returns the skill's level-1 metadata as a new message. The
// snapshot's slices and maps are copied: a response must not alias state
// that other requests share, even for an in-process caller.
func (sk *skill) metadataProto() *baagentv1.SkillMetadata {
	return &baagentv1.SkillMetadata{
		Name:                   sk.name,
		Description:            sk.description,
		License:                sk.license,
		Compatibility:          sk.compatibility,
		AllowedTools:           slices.Clone(sk.allowedTools),
		Metadata:               maps.Clone(sk.metadata),
		Version:                sk.version,
		Triggers:               slices.Clone(sk.triggers),
		Scope:                  sk.scope,
		IsSystemSkill:          sk.scope == baagentv1.SkillScope_SKILL_SCOPE_SYSTEM,
		Resources:              sk.resourcePaths(),
		CatalogTokens:          sk.catalogTokens,
		Extra:                  maps.Clone(sk.extra),
		DisableModelInvocation: sk.disableModelInvocation,
		Model:                  sk.model,
		Warnings:               slices.Clone(sk.warnings),
		Revision:               sk.revision,
		Source:                 sk.source,
	}
}
