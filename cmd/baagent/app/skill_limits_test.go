package app

import (
	"testing"

	"github.com/baagent/baagent/services/gateway"
	"github.com/baagent/baagent/services/skills/store"
)

// TestSkillUploadLimitsAgree: the gateway refuses by default exactly the
// uploads the skill store would refuse as too large, no fewer (a 413 for
// what the store accepts) and no more (an upload carried through only to
// be refused). The two packages cannot see each other; the composition
// root can.
func TestSkillUploadLimitsAgree(t *testing.T) {
	if gateway.DefaultMaxSkillBytes != store.MaxArchiveBytes {
		t.Errorf("gateway.DefaultMaxSkillBytes = %d, store.MaxArchiveBytes = %d; keep them equal", gateway.DefaultMaxSkillBytes, store.MaxArchiveBytes)
	}
}
