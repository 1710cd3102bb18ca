package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "memory.db"), Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}
