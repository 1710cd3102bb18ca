package toolrunner

import (
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/baagent/baagent/internal/config"
	"github.com/baagent/baagent/services/toolrunner/builtin"
)

// Settings holds the toolrunner's settings: where workspaces, artifacts and
// external tools are configured, and the budgets that keep one tenant's
// tool calls from hurting the others. Counts of 0 take the default
// (derived from the cores); quotas of 0 are unlimited.
type Settings struct {
	// WorkspaceDir and ArtifactDir default to places under the process's
	// data directory (see ApplyDataDir).
	WorkspaceDir string
	ArtifactDir  string
	// WorkspaceSeedDir holds files copied into every new conversation
	// workspace (the sample datasets); empty seeds nothing.
	WorkspaceSeedDir string
	// WorkspaceMaxIdle is how long a conversation's workspace may stay
	// unused before the toolrunner removes it.
	WorkspaceMaxIdle time.Duration
	// ToolsFile configures external tools (MCP servers, ToolProvider
	// servers) and per-tool policies; empty runs the built-in tools only.
	ToolsFile string

	SQLMaxValueBytes    int
	SQLHeapLimitBytes   int64
	SQLMaxConcurrent    int
	SQLMaxPerTenant     int
	SearchTimeout       time.Duration
	GrepMaxBytes        int64
	GrepMaxConcurrent   int
	GrepMaxPerTenant    int
	WorkspaceQuotaBytes int64
	ArtifactQuotaBytes  int64

	// MCPOAuthKeyFile holds the 32-byte key sealing MCP OAuth tokens at
	// rest; empty turns McpAuthService off.
	MCPOAuthKeyFile string
	// MCPOAuthRedirectURL is the gateway's OAuth callback
	// (`https://host/v1/mcp/oauth/callback`).
	MCPOAuthRedirectURL string
}

// RegisterFlags registers the settings on fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.WorkspaceDir, "workspace-dir", "", "per-conversation tool workspaces (default <data-dir>/workspaces)")
	fs.StringVar(&s.ArtifactDir, "artifact-dir", "", "tool artifact store (default <data-dir>/artifacts)")
	fs.StringVar(&s.WorkspaceSeedDir, "workspace-seed-dir", "examples/data", "files copied into every new conversation workspace (empty: none)")
	fs.DurationVar(&s.WorkspaceMaxIdle, "workspace-max-idle", 7*24*time.Hour, "how long a conversation's workspace may stay unused before the toolrunner removes it")
	fs.StringVar(&s.ToolsFile, "tools-file", "", "tools.yaml: MCP servers, ToolProvider servers and per-tool policies")
	fs.IntVar(&s.SQLMaxValueBytes, "sql-max-value-bytes", 1<<20, "largest string, blob or row one sql_query may build (SQLite's length limit); its result is bounded at 16 times this")
	fs.Int64Var(&s.SQLHeapLimitBytes, "sql-heap-limit-bytes", 512<<20, "memory SQLite may use for all sql_query calls of the process together; 0 = no limit")
	fs.IntVar(&s.SQLMaxConcurrent, "sql-max-concurrent", 0, "sql_query calls executing at once per toolrunner (0: one per core)")
	fs.IntVar(&s.SQLMaxPerTenant, "sql-max-per-tenant", 0, "sql_query slots one tenant may hold (0: all but one, so one tenant never holds them all)")
	fs.DurationVar(&s.SearchTimeout, "search-timeout", 30*time.Second, "time one glob or grep may search; a search that spends it is not retried")
	fs.Int64Var(&s.GrepMaxBytes, "grep-max-bytes", 64<<20, "bytes one grep call may read")
	fs.IntVar(&s.GrepMaxConcurrent, "grep-max-concurrent", 0, "grep calls searching at once per toolrunner (0: one per core)")
	fs.IntVar(&s.GrepMaxPerTenant, "grep-max-per-tenant", 0, "grep slots one tenant may hold (0: all but one)")
	fs.Int64Var(&s.WorkspaceQuotaBytes, "workspace-quota-bytes", 1<<30, "disk space one tenant's conversation workspaces may use, seed copies included; a write past it fails with QUOTA_EXCEEDED; 0 = no quota")
	fs.StringVar(&s.MCPOAuthKeyFile, "mcp-oauth-key-file", "", "file holding the 32-byte key (raw, hex or base64) that seals MCP OAuth tokens at rest; empty turns MCP OAuth off")
	fs.StringVar(&s.MCPOAuthRedirectURL, "mcp-oauth-redirect-url", "", "the gateway's MCP OAuth callback URL as users' browsers reach it (https://host/v1/mcp/oauth/callback); required with mcp-oauth-key-file")
	fs.Int64Var(&s.ArtifactQuotaBytes, "artifact-quota-bytes", 2<<30, "disk space one tenant's stored tool results (artifacts) may use; past it the tenant's least recently used artifacts are removed; 0 = no quota")
}

// ApplyDataDir places the workspaces and artifacts left unset under
// dataDir, the process's state directory.
func (s *Settings) ApplyDataDir(dataDir string) {
	if s.WorkspaceDir == "" {
		s.WorkspaceDir = filepath.Join(dataDir, "workspaces")
	}
	if s.ArtifactDir == "" {
		s.ArtifactDir = filepath.Join(dataDir, "artifacts")
	}
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	switch {
	case s.WorkspaceMaxIdle < time.Minute:
		return fmt.Errorf("setting workspace-max-idle: want at least 1m, got %s", s.WorkspaceMaxIdle)
	case s.SQLMaxValueBytes < 1<<10 || s.SQLMaxValueBytes > 1<<30:
		return fmt.Errorf("setting sql-max-value-bytes: want 1024 to 1073741824, got %d", s.SQLMaxValueBytes)
	case s.SQLHeapLimitBytes != 0 && s.SQLHeapLimitBytes < 16<<20:
		return fmt.Errorf("setting sql-heap-limit-bytes: want 0 (no limit) or at least 16 MiB, got %d", s.SQLHeapLimitBytes)
	case s.SQLMaxConcurrent < 0 || s.SQLMaxConcurrent > 1024:
		return fmt.Errorf("setting sql-max-concurrent: want 0 (one per core) to 1024, got %d", s.SQLMaxConcurrent)
	case s.SQLMaxPerTenant < 0 || (s.SQLMaxConcurrent > 0 && s.SQLMaxPerTenant > s.SQLMaxConcurrent):
		return fmt.Errorf("setting sql-max-per-tenant: want 0 (all but one) to sql-max-concurrent, got %d", s.SQLMaxPerTenant)
	case s.SearchTimeout < 100*time.Millisecond:
		return fmt.Errorf("setting search-timeout: want at least 100ms, got %s", s.SearchTimeout)
	case s.GrepMaxBytes < 1<<10:
		return fmt.Errorf("setting grep-max-bytes: want at least 1024, got %d", s.GrepMaxBytes)
	case s.GrepMaxConcurrent < 0 || s.GrepMaxConcurrent > 1024:
		return fmt.Errorf("setting grep-max-concurrent: want 0 (one per core) to 1024, got %d", s.GrepMaxConcurrent)
	case s.GrepMaxPerTenant < 0 || (s.GrepMaxConcurrent > 0 && s.GrepMaxPerTenant > s.GrepMaxConcurrent):
		return fmt.Errorf("setting grep-max-per-tenant: want 0 (all but one) to grep-max-concurrent, got %d", s.GrepMaxPerTenant)
	case s.WorkspaceQuotaBytes < 0:
		return fmt.Errorf("setting workspace-quota-bytes: want >= 0 (0 = no quota), got %d", s.WorkspaceQuotaBytes)
	case s.ArtifactQuotaBytes < 0:
		return fmt.Errorf("setting artifact-quota-bytes: want >= 0 (0 = no quota), got %d", s.ArtifactQuotaBytes)
	case s.MCPOAuthKeyFile != "" && !validRedirect(s.MCPOAuthRedirectURL):
		return fmt.Errorf("setting mcp-oauth-redirect-url: want an absolute http(s) URL with mcp-oauth-key-file, got %q", s.MCPOAuthRedirectURL)
	}
	return nil
}

func validRedirect(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.Fragment == ""
}

// Options returns the service options the settings select; the caller
// adds the runtime dependencies (logger, registerer, idempotency records,
// external tool sources).
func (s *Settings) Options() Options {
	return Options{
		WorkspaceDir:     s.WorkspaceDir,
		WorkspaceSeedDir: s.WorkspaceSeedDir,
		WorkspaceMaxIdle: s.WorkspaceMaxIdle,
		ArtifactDir:      s.ArtifactDir,
		ConfigFile:       s.ToolsFile,
		// The options read 0 as their default and a negative quota or
		// heap limit as none; the settings read 0 as none.
		WorkspaceQuotaBytes: config.UnlimitedIfZero(s.WorkspaceQuotaBytes),
		ArtifactQuotaBytes:  config.UnlimitedIfZero(s.ArtifactQuotaBytes),
		Builtin: builtin.Options{
			QueryMaxBytes:        s.SQLMaxValueBytes,
			QueryHeapLimit:       config.UnlimitedIfZero(s.SQLHeapLimitBytes),
			MaxConcurrentQueries: s.SQLMaxConcurrent,
			MaxQueriesPerTenant:  s.SQLMaxPerTenant,
			SearchTimeout:        s.SearchTimeout,
			GrepMaxBytes:         s.GrepMaxBytes,
			MaxConcurrentGreps:   s.GrepMaxConcurrent,
			MaxGrepsPerTenant:    s.GrepMaxPerTenant,
		},
	}
}
