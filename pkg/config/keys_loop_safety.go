package config

// pg-loop's loop guards and context-window keys, in a file of their own so
// that tools add keys without touching each other's lines.
var loopSafetyKeys = []Key{
	{Name: "loop_breaker_repeat", Kind: KindInt, Env: []string{"POWERGLIDE_BREAKER_REPEAT"}, Default: 3, Help: "pg-loop: the same tool with the same input this many times in a row trips the circuit breaker (0: off)"},
	{Name: "loop_breaker_failures", Kind: KindInt, Env: []string{"POWERGLIDE_BREAKER_FAILURES"}, Default: 5, Help: "pg-loop: one tool failing this many times in a row, whatever its input, trips the circuit breaker (0: off)"},
	{Name: "loop_breaker_output", Kind: KindInt, Env: []string{"POWERGLIDE_BREAKER_OUTPUT"}, Default: 5, Help: "pg-loop: one tool returning the same output this many times in a row, whatever its inputs, trips the circuit breaker (0: off)"},
	{Name: "loop_breaker_cycle", Kind: KindInt, Env: []string{"POWERGLIDE_BREAKER_CYCLE"}, Default: 3, Help: "pg-loop: a cycle of 2 to 4 calls with the same inputs and outputs repeated this many times trips the circuit breaker (0: off)"},
	{Name: "loop_context_soft", Kind: KindFloat, Env: []string{"POWERGLIDE_CONTEXT_SOFT"}, Default: 0.7, Help: "pg-loop: share of the usable context window (window less max_tokens and the reserve) past which old tool outputs are pruned"},
	{Name: "loop_context_hard", Kind: KindFloat, Env: []string{"POWERGLIDE_CONTEXT_HARD"}, Default: 0.9, Help: "pg-loop: share of the usable context window past which older turns are summarized"},
	{Name: "loop_tool_output_max", Kind: KindInt, Env: []string{"POWERGLIDE_TOOL_OUTPUT_MAX"}, Default: 0, Help: "pg-loop: tokens of one tool output kept in the conversation; a longer one keeps its head and tail and is saved whole to a file the model is told about (0: a quarter of the usable window)"},
}
