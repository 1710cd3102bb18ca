package postgres

import (
	"testing"

	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/storetest"
)

// TestConformance runs the store conformance suite, each subtest on a
// database of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTest(t)
		return s
	})
}
