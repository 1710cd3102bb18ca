package app

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Defaults and limits of the memory settings.
const (
	DefaultEmbeddingModel               = "text-embedding-3-small"
	DefaultEmbeddingDims                = 1536
	DefaultMemoryCommunityInterval      = 5 * time.Minute
	DefaultMemoryCommunityTokensPerHour = 20_000
	DefaultMemoryWorkers                = 4
	DefaultMemoryDedupeThreshold        = 0.85
	MaxMemoryWorkers                    = 64
	MinMemoryCommunityInterval          = time.Minute
	DefaultMemoryDBName                 = "memory.db"
	maxMemorySettingBytes               = 4 << 10
)

const (
	memoryPostgresURLNotShown = "(the value is not shown: it may hold a password)"
	memoryPostgresURLWant     = "want postgres://user:password@host:5432/db?sslmode=… or key=value pairs (host=… dbname=…)"
)

// MemorySettings are the memory service's settings: its store (SQLite file
// or PostgreSQL), its embedding endpoint, and the model work of extraction
// and community summaries. The extraction and summaries use the common
// model endpoint (-model-base-url, the scripted model when empty).
type MemorySettings struct {
	// DB is the SQLite file (default <data-dir>/memory.db, see
	// ApplyDataDir); PostgresURL, when set, is used instead.
	DB string
	// PostgresURL is a PostgreSQL connection string. It may hold a
	// password: it is never logged or echoed in an error.
	PostgresURL string

	// EmbeddingBaseURL is an OpenAI-compatible /v1/embeddings endpoint;
	// empty uses the offline lexical embedding (lexical-hash-v1).
	EmbeddingBaseURL string
	EmbeddingModel   string
	// EmbeddingDims is the length of the endpoint's vectors;
	// EmbeddingSendDims asks the endpoint for that length (the
	// text-embedding-3 models can shorten theirs).
	EmbeddingDims     int
	EmbeddingSendDims bool
	// EmbeddingAPIKey is the embedding endpoint's key; empty, with the
	// same endpoint as the model's, uses -model-api-key.
	EmbeddingAPIKey string

	// ExtractionModel is the model that extracts entities and relations
	// and writes community summaries; empty uses -model.
	ExtractionModel string
	// Reflexion runs a second extraction pass for missed entities.
	Reflexion bool
	// CommunityInterval is how often communities are recomputed; 0 turns
	// the recomputation off.
	CommunityInterval time.Duration
	// CommunityTokensPerHour bounds the model tokens community summaries
	// spend per tenant and clock hour on one replica; 0 is the memory
	// service's default.
	CommunityTokensPerHour int
	// Workers is how many episodes one replica extracts at once.
	Workers int
	// DedupeThreshold is the cosine similarity from which an extracted
	// entity is merged into an existing one of the same type.
	DedupeThreshold float64
}

// RegisterFlags registers the memory settings on fs.
func (s *MemorySettings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.DB, "memory-db", "", "memory: SQLite file of the knowledge graph (default <data-dir>/"+DefaultMemoryDBName+"; one replica)")
	fs.StringVar(&s.PostgresURL, "memory-postgres-url", "", "memory: PostgreSQL connection string, used instead of -memory-db (any number of replicas; it may hold a password: prefer the environment variable)")
	fs.StringVar(&s.EmbeddingBaseURL, "embedding-base-url", "", "memory: OpenAI-compatible embeddings endpoint; empty uses the offline lexical embedding (lexical-hash-v1)")
	fs.StringVar(&s.EmbeddingModel, "embedding-model", DefaultEmbeddingModel, "memory: embedding model of -embedding-base-url")
	fs.IntVar(&s.EmbeddingDims, "embedding-dims", DefaultEmbeddingDims, "memory: length of the vectors of -embedding-model (1536 for text-embedding-3-small)")
	fs.BoolVar(&s.EmbeddingSendDims, "embedding-send-dims", false, "memory: ask the endpoint for -embedding-dims (text-embedding-3 models can shorten their vectors)")
	fs.StringVar(&s.EmbeddingAPIKey, "embedding-api-key", "", "memory: API key of the embeddings endpoint (prefer the environment variable; default -model-api-key when the endpoint is -model-base-url)")
	fs.StringVar(&s.ExtractionModel, "memory-extraction-model", "", "memory: model that extracts entities and relations and writes community summaries (default: -model)")
	fs.BoolVar(&s.Reflexion, "memory-reflexion", false, "memory: a second extraction pass for entities the first missed (about twice the model tokens)")
	fs.DurationVar(&s.CommunityInterval, "memory-community-interval", DefaultMemoryCommunityInterval, "memory: how often communities are recomputed and summarised (0: never)")
	fs.IntVar(&s.CommunityTokensPerHour, "memory-community-tokens-per-hour", DefaultMemoryCommunityTokensPerHour, "memory: model tokens community summaries may spend per tenant and clock hour on one replica")
	fs.IntVar(&s.Workers, "memory-workers", DefaultMemoryWorkers, "memory: episodes one replica extracts at once")
	fs.Float64Var(&s.DedupeThreshold, "memory-dedupe-threshold", DefaultMemoryDedupeThreshold, "memory: cosine similarity from which an extracted entity is merged into an existing one of the same type")
}

// ApplyDataDir places the SQLite file, when unset, in dataDir.
func (s *MemorySettings) ApplyDataDir(dataDir string) {
	if s.DB == "" {
		s.DB = filepath.Join(dataDir, DefaultMemoryDBName)
	}
}

// Backend names the store the settings select: "postgres" or "sqlite".
func (s *MemorySettings) Backend() string {
	if s.PostgresURL != "" {
		return "postgres"
	}
	return "sqlite"
}

// Validate checks the settings. Errors never include the PostgreSQL URL.
func (s *MemorySettings) Validate() error {
	s.PostgresURL = strings.TrimSpace(s.PostgresURL)
	if s.PostgresURL != "" {
		if err := checkPostgresURL(s.PostgresURL); err != nil {
			return fmt.Errorf("setting memory-postgres-url: %w %s", err, memoryPostgresURLNotShown)
		}
	} else if strings.TrimSpace(s.DB) == "" {
		return errors.New("setting memory-db: must not be empty")
	}
	if s.EmbeddingBaseURL != "" {
		u, err := url.Parse(s.EmbeddingBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("setting embedding-base-url: want an http(s) URL such as https://api.openai.com/v1, got %q", s.EmbeddingBaseURL)
		}
		if strings.TrimSpace(s.EmbeddingModel) == "" {
			return errors.New("setting embedding-model: must not be empty with embedding-base-url")
		}
	}
	for _, v := range []struct{ name, v string }{{"embedding-model", s.EmbeddingModel}, {"memory-extraction-model", s.ExtractionModel}} {
		if len(v.v) > 256 || strings.ContainsFunc(v.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("setting %s: at most 256 printable characters, got %q", v.name, v.v)
		}
	}
	if s.CommunityInterval < 0 || (s.CommunityInterval > 0 && s.CommunityInterval < MinMemoryCommunityInterval) {
		return fmt.Errorf("setting memory-community-interval: want 0 (never) or at least %s, got %s", MinMemoryCommunityInterval, s.CommunityInterval)
	}
	if s.CommunityTokensPerHour < 0 {
		return fmt.Errorf("setting memory-community-tokens-per-hour: must not be negative, got %d", s.CommunityTokensPerHour)
	}
	if s.EmbeddingDims < 1 || s.EmbeddingDims > 16384 {
		return fmt.Errorf("setting embedding-dims: want 1 to 16384, got %d", s.EmbeddingDims)
	}
	if s.Workers < 1 || s.Workers > MaxMemoryWorkers {
		return fmt.Errorf("setting memory-workers: want 1 to %d, got %d", MaxMemoryWorkers, s.Workers)
	}
	if !(s.DedupeThreshold > 0 && s.DedupeThreshold <= 1) {
		return fmt.Errorf("setting memory-dedupe-threshold: want more than 0 and at most 1, got %v", s.DedupeThreshold)
	}
	return nil
}

// checkPostgresURL accepts a postgres:// or postgresql:// URL with a host,
// or libpq key=value pairs. The error never quotes the value.
func checkPostgresURL(v string) error {
	if len(v) > maxMemorySettingBytes || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New(memoryPostgresURLWant)
	}
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return errors.New(memoryPostgresURLWant)
		}
		return nil
	}
	for _, f := range strings.Fields(v) {
		if k, _, ok := strings.Cut(f, "="); !ok || k == "" {
			return errors.New(memoryPostgresURLWant)
		}
	}
	return nil
}
