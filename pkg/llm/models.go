package llm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// ModelInfo is one row of the model table: what `pg-llm models` prints,
// what a model-list request is answered with, and what cost_usd is computed
// from. Prices are USD per million tokens.
type ModelInfo = protocol.ModelInfo

// builtinModels: list prices as published by Anthropic and OpenAI
// (anthropic.com/pricing, openai.com/api/pricing), late 2025.
var builtinModels = []ModelInfo{
	{ID: "anthropic/claude-opus-4-5", ContextWindow: 200000, MaxOutput: 64000, InputPerMTok: 5, OutputPerMTok: 25, CacheReadPerMTok: 0.5, CacheWritePerMTok: 6.25},
	{ID: "anthropic/claude-opus-4-1", ContextWindow: 200000, MaxOutput: 32000, InputPerMTok: 15, OutputPerMTok: 75, CacheReadPerMTok: 1.5, CacheWritePerMTok: 18.75},
	{ID: "anthropic/claude-opus-4", ContextWindow: 200000, MaxOutput: 32000, InputPerMTok: 15, OutputPerMTok: 75, CacheReadPerMTok: 1.5, CacheWritePerMTok: 18.75},
	{ID: "anthropic/claude-sonnet-4-5", ContextWindow: 200000, MaxOutput: 64000, InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75},
	{ID: "anthropic/claude-sonnet-4", ContextWindow: 200000, MaxOutput: 64000, InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75},
	{ID: "anthropic/claude-3-7-sonnet", ContextWindow: 200000, MaxOutput: 64000, InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75},
	{ID: "anthropic/claude-haiku-4-5", ContextWindow: 200000, MaxOutput: 64000, InputPerMTok: 1, OutputPerMTok: 5, CacheReadPerMTok: 0.1, CacheWritePerMTok: 1.25},
	{ID: "anthropic/claude-3-5-haiku", ContextWindow: 200000, MaxOutput: 8192, InputPerMTok: 0.8, OutputPerMTok: 4, CacheReadPerMTok: 0.08, CacheWritePerMTok: 1},
	{ID: "openai/gpt-5", ContextWindow: 400000, MaxOutput: 128000, InputPerMTok: 1.25, OutputPerMTok: 10, CacheReadPerMTok: 0.125},
	{ID: "openai/gpt-5-mini", ContextWindow: 400000, MaxOutput: 128000, InputPerMTok: 0.25, OutputPerMTok: 2, CacheReadPerMTok: 0.025},
	{ID: "openai/gpt-5-nano", ContextWindow: 400000, MaxOutput: 128000, InputPerMTok: 0.05, OutputPerMTok: 0.4, CacheReadPerMTok: 0.005},
	{ID: "openai/gpt-4.1", ContextWindow: 1047576, MaxOutput: 32768, InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5},
	{ID: "openai/gpt-4.1-mini", ContextWindow: 1047576, MaxOutput: 32768, InputPerMTok: 0.4, OutputPerMTok: 1.6, CacheReadPerMTok: 0.1},
	{ID: "openai/gpt-4o", ContextWindow: 128000, MaxOutput: 16384, InputPerMTok: 2.5, OutputPerMTok: 10, CacheReadPerMTok: 1.25},
	{ID: "openai/gpt-4o-mini", ContextWindow: 128000, MaxOutput: 16384, InputPerMTok: 0.15, OutputPerMTok: 0.6, CacheReadPerMTok: 0.075},
	{ID: "openai/o3", ContextWindow: 200000, MaxOutput: 100000, InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5},
	{ID: "openai/o4-mini", ContextWindow: 200000, MaxOutput: 100000, InputPerMTok: 1.1, OutputPerMTok: 4.4, CacheReadPerMTok: 0.275},
	{ID: "ollama/qwen3:8b", ContextWindow: 40960},
	{ID: "ollama/llama3.1:8b", ContextWindow: 131072},
}

// Models is a model table: the built-in rows with the config's overrides.
type Models struct {
	byID map[string]ModelInfo
}

// NewModels builds the table; overrides is the config key `models`, an
// object from model id to a partial ModelInfo whose fields replace the
// built-in ones (or add a model).
func NewModels(overrides json.RawMessage) (*Models, error) {
	m := &Models{byID: map[string]ModelInfo{}}
	for _, b := range builtinModels {
		b.Type, b.Source = "model", "builtin"
		m.byID[b.ID] = b
	}
	if len(overrides) == 0 || string(overrides) == "null" {
		return m, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(overrides, &raw); err != nil {
		return nil, fmt.Errorf("config key models: %w", err)
	}
	for id, r := range raw {
		if _, _, ok := SplitModel(id); !ok {
			return nil, fmt.Errorf("config key models: %q is not a provider/model id", id)
		}
		info, ok := m.byID[id]
		if !ok {
			info = ModelInfo{Type: "model", ID: id}
		}
		dec := json.NewDecoder(strings.NewReader(string(r)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&info); err != nil {
			return nil, fmt.Errorf("config key models.%s: %w", id, err)
		}
		info.ID, info.Type, info.Source = id, "model", "config"
		m.byID[id] = info
	}
	return m, nil
}

// Lookup finds a model: exactly, or by the longest known id that the name
// extends with a dash (claude-sonnet-4-5-20250929 is claude-sonnet-4-5).
func (m *Models) Lookup(id string) (ModelInfo, bool) {
	if info, ok := m.byID[id]; ok {
		return info, true
	}
	best := ""
	for k := range m.byID {
		if strings.HasPrefix(id, k+"-") && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return ModelInfo{}, false
	}
	return m.byID[best], true
}

// All lists the table sorted by id.
func (m *Models) All() []ModelInfo {
	out := make([]ModelInfo, 0, len(m.byID))
	for _, v := range m.byID {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
