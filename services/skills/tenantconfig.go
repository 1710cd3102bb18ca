package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/baagent/baagent/internal/validate"
)

// TenantConfigFile is the tenant configuration, `<root>/tenants/<tenant>/tenant.yaml`
// (see docs/concepts/skills.md#layers). It controls what the
// tenant, and every project of it, sees of the system layer:
//
//	# System skills this tenant does not see at all.
//	disabled_skills: [data-quality-check]
//	# System skills replaced by the tenant's own skill of the same name. The
//	# system skill stays hidden even when the tenant's replacement is missing
//	# or fails validation, so a broken override never falls back silently.
//	overridden_skills: [executive-summary]
//
// A tenant skill with the name of a system skill replaces it even without
// overridden_skills (precedence project > tenant > system); listing it makes
// the replacement explicit and fail closed. Unknown keys are errors, so that a
// misspelt key cannot silently leave a skill enabled. An invalid file hides
// every system skill from the tenant (fail closed) and is reported by
// ListSkills until it is fixed.
const TenantConfigFile = "tenant.yaml"

// Limits of a tenant configuration.
const (
	maxTenantConfigBytes   = 64 << 10
	maxTenantConfigEntries = 1024
)

// tenantConfig is a parsed tenant.yaml.
type tenantConfig struct {
	DisabledSkills   []string `yaml:"disabled_skills"`
	OverriddenSkills []string `yaml:"overridden_skills"`
}

// tenantRules is the lookup form of a tenantConfig.
type tenantRules struct {
	disabled   map[string]bool
	overridden map[string]bool
	// invalid is why tenant.yaml was refused; non-empty hides the whole
	// system layer.
	invalid string
}

// hides reports whether the system skill name is hidden from the tenant, and
// why.
func (r *tenantRules) hides(name string) (bool, string) {
	switch {
	case r == nil:
		return false, ""
	case r.invalid != "":
		return true, "tenant.yaml is invalid (" + r.invalid + ")"
	case r.disabled[name]:
		return true, "disabled by tenant.yaml (disabled_skills)"
	case r.overridden[name]:
		// Only asked when no tenant or project skill replaced it.
		return true, "overridden by tenant.yaml (overridden_skills) but the tenant has no valid skill of that name"
	}
	return false, ""
}

// parseTenantConfig parses a tenant.yaml.
func parseTenantConfig(data []byte) (*tenantRules, error) {
	if len(data) > maxTenantConfigBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxTenantConfigBytes)
	}
	// Refuse aliases and oversized trees before decoding into Go values.
	if _, err := parseYAMLMapping(data); err != nil {
		return nil, err
	}
	var cfg tenantConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("invalid: %v", err)
	}
	var e validate.Errors
	rules := &tenantRules{
		disabled:   names(&e, "disabled_skills", cfg.DisabledSkills),
		overridden: names(&e, "overridden_skills", cfg.OverriddenSkills),
	}
	for n := range rules.disabled {
		if rules.overridden[n] {
			e.Addf("overridden_skills", "%q is also in disabled_skills; pick one", n)
		}
	}
	if e.Len() > 0 {
		return nil, errors.New(e.Summary())
	}
	return rules, nil
}

func names(e *validate.Errors, field string, list []string) map[string]bool {
	if len(list) > maxTenantConfigEntries {
		e.Addf(field, "must have at most %d entries", maxTenantConfigEntries)
		return nil
	}
	m := make(map[string]bool, len(list))
	for i, n := range list {
		validate.SkillName(e, validate.Index(field, i), n)
		m[n] = true
	}
	return m
}
