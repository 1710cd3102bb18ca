package memory

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit/pgtest"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/postgres"
	"github.com/baagent/baagent/services/memory/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore opens a fresh SQLite store (the embedded default) in a
// temporary directory, closed when the test ends.
func openStore(tb testing.TB) store.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "memory.db"), sqlite.Options{})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// openPostgres opens a store on a fresh PostgreSQL database (skipped when
// PostgreSQL is not installed, see pgtest).
func openPostgres(tb testing.TB) store.Store {
	tb.Helper()
	dsn := pgtest.NewDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
