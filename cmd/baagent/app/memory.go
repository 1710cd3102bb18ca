package app

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/services/memory"
	"github.com/baagent/baagent/services/memory/community"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/postgres"
	"github.com/baagent/baagent/services/memory/store/sqlite"
	"github.com/baagent/baagent/services/memory/vecindex"
)

// buildMemory builds the memory service: its store (PostgreSQL when
// -memory-postgres-url is set, else the SQLite file), its embedder (the
// OpenAI-compatible endpoint of -embedding-base-url, else the offline
// lexical embedding), its extractor on the common model endpoint (the
// scripted model when none). The consumer of the capture queue of
// finished runs is started beside it (startMemoryCapture).
func (a *App) buildMemory(ctx context.Context) (registrar, error) {
	st, err := a.memoryStore(ctx)
	if err != nil {
		return nil, err
	}
	emb, err := a.memoryEmbedder()
	if err != nil {
		return nil, err
	}
	ex, err := a.memoryExtractor()
	if err != nil {
		return nil, err
	}
	s := a.cfg.Memory
	interval := s.CommunityInterval
	if interval == 0 {
		interval = -1 // off
	}
	sum, err := a.memorySummarizer(ex.Model())
	if err != nil {
		return nil, err
	}
	srv, err := memory.New(memory.Options{
		Store:                  st,
		Embedder:               emb,
		Extractor:              ex,
		Summarizer:             sum,
		Logger:                 a.log,
		Registerer:             a.reg,
		Workers:                s.Workers,
		DedupeThreshold:        s.DedupeThreshold,
		CommunityInterval:      interval,
		CommunityTokensPerHour: s.CommunityTokensPerHour,
	})
	if err != nil {
		return nil, err
	}
	a.background = append(a.background, srv.Run)
	a.log.Info("memory service", "backend", st.Backend(), "embedding", emb.Model(), "extraction_model", ex.Model(), "reflexion", s.Reflexion)
	return srv, nil
}

// memoryStore opens the configured store: PostgreSQL, or the SQLite file
// (its directory created if need be).
func (a *App) memoryStore(ctx context.Context) (store.Store, error) {
	s := a.cfg.Memory
	// Both stores search vectors in process (PostgreSQL without pgvector).
	if err := vecindex.RegisterMetrics(a.reg); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if s.PostgresURL == "" {
		if err := os.MkdirAll(filepath.Dir(s.DB), 0o750); err != nil {
			return nil, fmt.Errorf("setting memory-db: %w", err)
		}
		db, err := sqlite.Open(ctx, s.DB, sqlite.Options{Logger: a.log.With("component", "memory-store")})
		if err != nil {
			return nil, fmt.Errorf("memory (setting memory-db): %w", err)
		}
		a.cleanup = append(a.cleanup, func() { _ = db.Close() })
		return db, nil
	}
	pg, err := postgres.Open(ctx, s.PostgresURL, postgres.Options{Logger: a.log.With("component", "memory-store"), Registerer: a.reg})
	if err != nil {
		// pgx redacts the password from its errors.
		return nil, fmt.Errorf("memory (setting memory-postgres-url): %w", err)
	}
	a.cleanup = append(a.cleanup, func() { _ = pg.Close() })
	return pg, nil
}

// memoryHTTPClient traces the memory service's model and embedding calls
// when tracing is on (they are mostly background work, so roots of their
// own traces).
func (a *App) memoryHTTPClient() *http.Client {
	if !tracing.Enabled(a.tp) {
		return nil
	}
	return &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport,
		otelhttp.WithTracerProvider(a.tp), otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))}
}

// memoryEmbedder is the embedding endpoint of -embedding-base-url, or the
// offline lexical embedding.
func (a *App) memoryEmbedder() (embed.Embedder, error) {
	s := a.cfg.Memory
	if s.EmbeddingBaseURL == "" {
		return embed.NewLexical(0), nil
	}
	key := s.EmbeddingAPIKey
	if key == "" && s.EmbeddingBaseURL == a.cfg.ModelBaseURL {
		key = a.cfg.ModelAPIKey
	}
	e, err := embed.NewOpenAI(embed.OpenAIConfig{
		BaseURL: s.EmbeddingBaseURL, APIKey: key, Model: s.EmbeddingModel,
		Dims: s.EmbeddingDims, SendDimensions: s.EmbeddingSendDims, HTTPClient: a.memoryHTTPClient(),
	})
	if err != nil {
		return nil, fmt.Errorf("memory (settings embedding-base-url, embedding-model, embedding-dims): %w", err)
	}
	return e, nil
}

// memoryExtractor extracts on the orchestrator's model endpoint: the
// configured one with -memory-extraction-model (default -model), or the
// scripted model, which answers extraction from its gazetteer.
func (a *App) memoryExtractor() (extract.Extractor, error) {
	ep, err := a.modelEndpoint()
	if err != nil {
		return nil, err
	}
	model := cmp.Or(a.cfg.Memory.ExtractionModel, ep.model)
	if ep.scripted {
		model = scripted.ModelName
	}
	ex, err := extract.NewOpenAI(extract.Config{BaseURL: ep.baseURL, APIKey: ep.apiKey, Model: model, Reflexion: a.cfg.Memory.Reflexion, HTTPClient: a.memoryHTTPClient()})
	if err != nil {
		return nil, fmt.Errorf("memory (settings model-base-url, memory-extraction-model): %w", err)
	}
	return ex, nil
}

// memorySummarizer writes community names and summaries with the
// extraction's model on the same endpoint.
func (a *App) memorySummarizer(model string) (community.Summarizer, error) {
	ep, err := a.modelEndpoint()
	if err != nil {
		return nil, err
	}
	sum, err := community.NewOpenAISummarizer(community.SummarizerConfig{BaseURL: ep.baseURL, APIKey: ep.apiKey, Model: model, HTTPClient: a.memoryHTTPClient()})
	if err != nil {
		return nil, fmt.Errorf("memory (settings model-base-url, memory-extraction-model): %w", err)
	}
	return sum, nil
}
