package agentcli

import "math"

// Usage is what one run of a CLI consumed.
type Usage struct {
	InputTokens int64 `json:"inputTokens"`
	// CachedInputTokens are input tokens read from the provider's prompt
	// cache (Claude Code: cache_read_input_tokens; Codex:
	// cached_input_tokens, which Codex also counts in InputTokens).
	CachedInputTokens int64 `json:"cachedInputTokens"`
	// CacheCreationTokens are input tokens written to Claude's prompt cache.
	CacheCreationTokens int64 `json:"cacheCreationTokens"`
	OutputTokens        int64 `json:"outputTokens"`
	// CostMicros is the cost in millionths of a US dollar.
	CostMicros int64 `json:"costMicros"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.CachedInputTokens += u2.CachedInputTokens
	u.CacheCreationTokens += u2.CacheCreationTokens
	u.OutputTokens += u2.OutputTokens
	u.CostMicros += u2.CostMicros
}

// IsZero reports whether nothing was consumed.
func (u Usage) IsZero() bool { return u == Usage{} }

// usdToMicros converts a dollar amount reported by a CLI to micro-dollars,
// refusing values no run can cost (negative, NaN, or above a million dollars).
func usdToMicros(usd float64) int64 {
	if math.IsNaN(usd) || usd <= 0 || usd > 1e6 {
		return 0
	}
	return int64(math.Round(usd * 1e6))
}

// CodexCost prices Codex token usage. Codex counts cached tokens inside
// input_tokens, so they are billed at the cached price and the rest at
// the input price.
func CodexCost(u Usage, p *Pricing) int64 {
	if p == nil {
		return 0
	}
	cached := min(u.CachedInputTokens, u.InputTokens)
	usd := (float64(u.InputTokens-cached)*p.InputPerMTok + float64(cached)*p.CachedInputPerMTok +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
	return usdToMicros(usd)
}
