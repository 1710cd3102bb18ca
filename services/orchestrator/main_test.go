package orchestrator

import (
	"testing"

	"github.com/baagent/baagent/internal/testkit/pgtest"
)

// TestMain stops the PostgreSQL server the memory tests share (pgtest)
// once the package's tests are done.
func TestMain(m *testing.M) { pgtest.Main(m) }
