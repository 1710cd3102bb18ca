package contextsvc

import (
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Estimated compression cost: USD per 1,000 input tokens.
var strategyCostPer1K = map[baagentv1.CompressionStrategy]float64{
	baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE:  0.0,
	baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:   0.001,
	baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE: 0.003,
}

func estimateCost(s baagentv1.CompressionStrategy, tokens int64) float64 {
	return float64(tokens) / 1000 * strategyCostPer1K[s]
}

// Automatic strategy selection: EXTRACT below 30 messages; from the
// LLM threshold on, SUMMARIZE when its estimated cost is under the cap.
const autoExtractBelow = 30

// compressionConfig is a request's ContextCompressionConfig with defaults.
type compressionConfig struct {
	strategy        baagentv1.CompressionStrategy
	enableLLM       bool
	llmThreshold    int
	cacheTTL        time.Duration
	maxCostPerHour  float64
	summarizerModel string
	summaryMax      int
}

func (s *Server) resolveCompression(c *baagentv1.ContextCompressionConfig) compressionConfig {
	cfg := compressionConfig{
		strategy:        c.GetStrategy(),
		enableLLM:       true,
		llmThreshold:    50,
		cacheTTL:        24 * time.Hour,
		maxCostPerHour:  0.1,
		summarizerModel: s.opts.SummarizerModel,
		summaryMax:      500,
	}
	if c == nil {
		return cfg
	}
	if c.EnableLlmSummarization != nil {
		cfg.enableLLM = c.GetEnableLlmSummarization()
	}
	if c.LlmSummarizationThreshold != nil {
		cfg.llmThreshold = int(c.GetLlmSummarizationThreshold())
	}
	if v := c.GetSummaryCacheTtlHours(); v > 0 {
		cfg.cacheTTL = time.Duration(v) * time.Hour
	}
	if c.MaxCompressionCostPerHour != nil {
		cfg.maxCostPerHour = c.GetMaxCompressionCostPerHour()
	}
	if c.GetSummarizerModel() != "" {
		cfg.summarizerModel = c.GetSummarizerModel()
	}
	if v := c.GetSummaryMaxTokens(); v > 0 {
		cfg.summaryMax = int(v)
	}
	return cfg
}

// chooseStrategy selects (docs/concepts/context-compression.md): the configured strategy, else
// EXTRACT below 30 messages, SUMMARIZE from the LLM threshold on when its
// estimated cost is under the hourly cap, else EXTRACT. SUMMARIZE needs a
// summarizer; without one EXTRACT is used and the caller is told.
func (s *Server) chooseStrategy(cfg compressionConfig, n int, tokens int64) (baagentv1.CompressionStrategy, []string) {
	llm := cfg.enableLLM && s.summaries.available()
	switch cfg.strategy {
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE, baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:
		return cfg.strategy, nil
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE:
		if !llm {
			why := "LLM summarization is disabled"
			if cfg.enableLLM {
				why = "no summarizer is running"
			}
			return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT, []string{why + "; extract used"}
		}
		return cfg.strategy, nil
	}
	if llm && n >= autoExtractBelow && n >= cfg.llmThreshold &&
		estimateCost(baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE, tokens) < cfg.maxCostPerHour {
		return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE, nil
	}
	return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT, nil
}

// appliedStrategy is the strategy a window actually shows.
func appliedStrategy(chosen baagentv1.CompressionStrategy, st windowStats, p *planner, pending bool) baagentv1.CompressionStrategy {
	if !st.changed() {
		return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_NONE
	}
	if chosen == baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE && p.summarized == 0 && !pending {
		return baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT
	}
	return chosen
}

func strategyName(s baagentv1.CompressionStrategy) string {
	switch s {
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE:
		return "truncate"
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:
		return "extract"
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE:
		return "summarize"
	}
	return "none"
}
