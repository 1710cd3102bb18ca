package skills

import (
	"errors"
	"fmt"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/skills/skillmd"
)

// Limits of a SKILL.md and its front matter; the rules live in skillmd.
const (
	MaxSkillFileBytes     = skillmd.MaxSkillFileBytes
	MaxFrontMatterBytes   = skillmd.MaxFrontMatterBytes
	MaxNameChars          = skillmd.MaxNameChars
	MaxDescriptionChars   = skillmd.MaxDescriptionChars
	MaxCompatibilityChars = skillmd.MaxCompatibilityChars
	MaxMetadataEntries    = skillmd.MaxMetadataEntries
	MaxExtraKeys          = skillmd.MaxExtraKeys
	// maxProblems bounds the problems one refusal reason lists.
	maxProblems = 16
)

// skill is one loaded, valid skill. It is immutable once loaded and shared
// by every snapshot reader.
type skill struct {
	name          string
	description   string
	license       string
	compatibility string
	// allowedTools is the front matter allow-list; restrictsTools tells an
	// absent key (no restriction) from an empty list (no tools).
	allowedTools           []string
	restrictsTools         bool
	metadata               map[string]string
	version                string
	triggers               []string
	disableModelInvocation bool
	model                  string
	extra                  map[string]string
	body                   string
	// warnings are the lenient violations the skill was loaded despite,
	// `field: what is wrong`.
	warnings []string

	// Filled by the loader.
	scope baagentv1.SkillScope
	// dir is the skill folder relative to the skills root, slash separated.
	dir string
	// resources are the files of the folder other than SKILL.md, relative to
	// the folder, sorted, with their sizes.
	resources []resourceInfo
	// revision names this version of the skill: for a file skill a hash of
	// SKILL.md and the resources' contents, for a stored skill its store
	// revision.
	revision string
	// files reads the resources of this revision: the folder of a file
	// skill, the stored bundle of a stored one.
	files resourceFS
	// source is where the skill comes from (files or the skill store).
	source baagentv1.SkillSource
	// catalogLine is the skill's level-1 catalog entry, catalogTokens its
	// EstimateTokens (model independent; GetCatalog counts per model).
	catalogLine   string
	catalogTokens int64
}

// resourceInfo is one file bundled with a skill.
type resourceInfo struct {
	path string
	size int64
}

// resourcePaths returns the paths of the skill's resources.
func (sk *skill) resourcePaths() []string {
	out := make([]string, len(sk.resources))
	for i, r := range sk.resources {
		out[i] = r.path
	}
	return out
}

// parseSkillMD parses a SKILL.md found in folder leniently: a skill with
// only lenient violations (skillmd.Violation.Lenient) loads with them as
// warnings; any other violation refuses it, and the error lists every
// problem as `field: what is wrong`, separated by "; ". On top of the
// format's rules the service refuses what it could not honour: an
// allowed-tools entry that is not a tool name or glob the toolrunner
// understands (`Bash(git:*)`) rather than granting something else, and a
// model or version it could not pass on.
func parseSkillMD(data []byte, folder string) (*skill, error) {
	p, vs := skillmd.Parse(data, folder)
	if p != nil {
		var e validate.Errors
		for i, t := range p.AllowedTools {
			validate.ToolPattern(&e, skillmd.Index(skillmd.KeyAllowedTools, i), t)
		}
		if p.Version != "" {
			validate.Version(&e, skillmd.KeyVersion, p.Version)
		}
		if p.Model != "" {
			validate.Model(&e, skillmd.KeyModel, p.Model)
		}
		for _, v := range e.Violations() {
			vs = append(vs, skillmd.Violation{Field: v.GetField(), Message: v.GetDescription()})
		}
	}
	if p == nil || skillmd.Refuses(vs) {
		return nil, violationsError(vs)
	}
	sk := &skill{
		name:                   p.Name,
		description:            p.Description,
		license:                p.License,
		compatibility:          p.Compatibility,
		allowedTools:           p.AllowedTools,
		restrictsTools:         p.RestrictsTools,
		metadata:               p.Metadata,
		version:                p.Version,
		triggers:               p.Triggers,
		disableModelInvocation: p.DisableModelInvocation,
		model:                  p.Model,
		extra:                  p.Extra,
		body:                   p.Body,
	}
	for _, v := range vs {
		sk.warnings = append(sk.warnings, v.String())
	}
	return sk, nil
}

// violationsError joins the refusing violations (lenient ones are left out:
// they are not why the skill is refused), at most maxProblems of them.
func violationsError(vs []skillmd.Violation) error {
	var b strings.Builder
	n := 0
	for _, v := range vs {
		if v.Lenient {
			continue
		}
		if n == maxProblems {
			fmt.Fprintf(&b, "; and more")
			break
		}
		if n > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.String())
		n++
	}
	return errors.New(b.String())
}

// catalogDescription is the description the catalog shows: an over-long
// one (loaded with a warning) is shortened to the standard's limit there,
// while the metadata keeps the author's full text.
func catalogDescription(sk *skill) string {
	return shorten(strings.Join(strings.Fields(sk.description), " "), MaxDescriptionChars)
}

// parseYAMLMapping is skillmd's safe YAML reader (no aliases, bounded size
// and depth), shared with tenant.yaml.
func parseYAMLMapping(doc []byte) (any, error) {
	n, err := skillmd.ParseYAMLMapping(doc)
	return n, err
}
