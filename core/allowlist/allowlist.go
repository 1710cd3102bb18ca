// Package allowlist matches tool names against allowed-tools lists (a
// skill's allowed_tools, a run's or a tenant's tool allow list), so that
// the orchestrator, which filters what the model sees, and the toolrunner,
// which enforces it, agree on every name.
package allowlist

import (
	"path"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Match reports whether name matches one allowed-tools entry: the exact
// name or a glob in path.Match syntax (`mcp__github__*`). A malformed glob
// matches only itself.
func Match(pattern, name string) bool {
	if pattern == name {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// Allows reports whether list admits name; a nil list admits every name.
func Allows(list *baagentv1.ToolAllowList, name string) bool {
	if list == nil {
		return true
	}
	for _, p := range list.GetNames() {
		if Match(p, name) {
			return true
		}
	}
	return false
}

// AllowsAll reports whether every list admits name.
func AllowsAll(lists []*baagentv1.ToolAllowList, name string) bool {
	for _, l := range lists {
		if !Allows(l, name) {
			return false
		}
	}
	return true
}
