package memory

import (
	"context"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit/pgtest"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore opens a fresh store, closed when the test ends.
func openStore(tb testing.TB) store.Store {
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
