package security

import (
	"testing"

	"github.com/baagent/baagent/test/reliability/harness"
)

func harnessStart(t *testing.T, env map[string]string, extra ...string) *harness.Suite {
	t.Helper()
	return harness.Start(t, harness.Args(t, extra...), env)
}
