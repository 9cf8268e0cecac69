// Package pgllm is the command-line grammar of pg-llm: one model call
// streamed as JSON events, a serve mode for many calls over warm
// connections, and the model table.
package pgllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/llm"
	"github.com/powerglide/powerglide/pkg/protocol"
)

const description = `Model calls streamed as JSON events: Anthropic, OpenAI, OpenAI-compatible servers, replay.
pg-llm reads a request ({"model","system","messages","tools","max_tokens","temperature","cache","thinking"}) or a plain-text prompt on stdin or as arguments, and writes JSON Lines events: start, text, thinking, tool_call, usage, retry, fallback, error and last end, whose message is ready to append to messages. An answer cut off by max_tokens while a tool call's input was being written ends with stop_reason max_tokens and lists that call under incomplete_tool_calls: it has no tool_call event, is not in the message and must not be run. On a terminal it prints only the text (--text); --json forces events.

Model ids are provider/model: anthropic/claude-sonnet-4-5, openai/gpt-4o, ollama/qwen3:8b, llamacpp/..., vllm/..., openrouter/..., any provider named under the config key providers ({"name": {"kind": "openai-compatible", "base_url": "http://host:8080/v1", "api_key_env": "VAR"}}), and replay/FILE. --model a,b,c is a fallback chain: a model whose retryable failures (rate_limit, overloaded, server, network, timeout) outlast --retries hands the call to the next, and so does a 404 (a model the server does not have, as Ollama says of one never pulled), which is not retried. auth, bad_request and context_overflow are never retried, and neither is response_too_large: one answer may hold at most 32 MiB of text, thinking and tool input (and no line or event of its stream may be longer), so a server that never ends its stream ends the call instead of taking all the memory. An attempt that already streamed content is not retried either, nor a call whose usage no call can have (negative tokens, a cost that is not a number): that is kind server, not retryable, with no usage or end event, so no budget counts it. Retries wait with exponential backoff and jitter, or as long as the server's retry-after-ms / retry-after asks. An attempt whose stream broke after the provider counted its input (message_start) is charged all the same: the call's usage counts it, in the end event, or in the error event's usage when the call failed, and so does a fallback chain's for the models that failed before.

Serve: pg-llm serve reads one request per line, each with an id that its events carry, and keeps connections warm. It holds the last 16 conversations it answered: each end event names one ("held":"h1"), and a later request with "after":"h1" sends only the messages that follow it (and no system prompt or tools while they stay the held ones), for a client that calls once per step (docs/protocol.md, "Held conversations"); a name it no longer holds is an error of kind not_held, and the whole request, always valid, goes instead.

Replay: --replay FILE (or --model replay/FILE) answers from a recorded session with no network and no key; --record FILE appends every call made to FILE in the same format. ` + llm.ReplayFormat + `

Exit status: 0 the call ended with an end event; 1 it failed (an error event with kind, retryable and status was written); 2 bad input: malformed JSON, a field the request or one of its blocks does not have, a missing or wrong value (the error names the field, e.g. messages[1].content[0].content); 124 --timeout expired.

Examples (the second answers from a replay file: see pg-llm call --help):
  $ echo 'Say hi' | pg-llm --model anthropic/claude-haiku-4-5   # with a key
  $ pg-llm --replay hi.jsonl 'Say hi'`

// CLI is pg-llm's grammar.
type CLI struct {
	cli.Common `embed:""`

	Model          string        `short:"m" config:"model" env:"POWERGLIDE_MODEL" help:"Model id provider/model, or a fallback chain a,b,c; wins over the request's model." placeholder:"ID"`
	Retries        int           `config:"retries" env:"POWERGLIDE_RETRIES" help:"Retries per model before falling back (default 4)."`
	Timeout        time.Duration `config:"timeout" env:"POWERGLIDE_TIMEOUT" help:"Overall timeout of a call, all retries included (default 10m)."`
	AttemptTimeout time.Duration `config:"attempt_timeout" env:"POWERGLIDE_ATTEMPT_TIMEOUT" help:"Timeout of one attempt (default 5m)."`
	MaxTokens      int           `config:"max_tokens" env:"POWERGLIDE_MAX_TOKENS" help:"max_tokens for requests that do not set it (default 8192)."`
	Record         string        `help:"Append every call (request fingerprint and events) to this session file." placeholder:"FILE" type:"path"`
	Replay         string        `help:"Answer from this recorded session file instead of a provider (same as --model replay/FILE)." placeholder:"FILE" type:"path"`

	Call   CallCmd   `cmd:"" default:"withargs" help:"Make one model call (the default command)."`
	Serve  ServeCmd  `cmd:"" help:"Serve a stream of requests with ids, over warm connections."`
	Models ModelsCmd `cmd:"" help:"List known models with context window and prices."`
}

// Spec describes pg-llm.
func Spec() *cli.Spec {
	return &cli.Spec{Name: "pg-llm", Description: description, CLI: &CLI{}, Schemas: []string{"request", "message", "model-list-request", "model-event", "model"}, Waits: true}
}

// CallCmd makes one call.
type CallCmd struct {
	Prompt []string `arg:"" optional:"" help:"Prompt text; without it the request or prompt is read from stdin."`
	System string   `help:"System prompt for a plain-text prompt (a request has its own)."`
	Text   bool     `help:"Print only the answer's text (the default on a terminal)."`
	JSON   bool     `help:"Print JSON Lines events even on a terminal."`
}

// ServeCmd serves many requests (Help says how).
type ServeCmd struct {
	Concurrency int `default:"8" help:"Calls in flight at once."`
}

// ModelsCmd lists the model table.
type ModelsCmd struct {
	JSON bool   `help:"Print JSON Lines, one model per line."`
	Jq   string `help:"Filter each model record through a jq expression (implies --json)." placeholder:"EXPR"`
}

// setup resolves the configuration into a router.
func setup(rt *cli.Runtime, c *CLI) (*llm.Router, *config.Config, error) {
	cfg, err := rt.Config()
	if err != nil {
		return nil, nil, err
	}
	var providers, models json.RawMessage
	if v, ok := cfg.Get("providers").Value.(json.RawMessage); ok {
		providers = v
	}
	if v, ok := cfg.Get("models").Value.(json.RawMessage); ok {
		models = v
	}
	table, err := llm.NewModels(models)
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	if cfg.Int("retries") < 0 {
		return nil, nil, cli.Usagef("--retries must not be negative")
	}
	r, err := llm.NewRouter(llm.Options{
		Retries:          cfg.Int("retries"),
		Timeout:          cfg.Duration("timeout"),
		AttemptTimeout:   cfg.Duration("attempt_timeout"),
		MaxTokens:        cfg.Int("max_tokens"),
		AnthropicKey:     cfg.String("anthropic_api_key"),
		AnthropicBaseURL: cfg.String("anthropic_base_url"),
		OpenAIKey:        cfg.String("openai_api_key"),
		OpenAIBaseURL:    cfg.String("openai_base_url"),
		Providers:        providers,
		Models:           table,
		Getenv:           rt.IO.Getenv,
	})
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	return r, cfg, nil
}

// chooseModel: --replay, then a --model given on the command line, then
// the request's model, then the environment, file and default.
func chooseModel(c *CLI, cfg *config.Config, req *protocol.Request) string {
	if c.Replay != "" {
		return "replay/" + c.Replay
	}
	if cfg.Get("model").Source == config.SourceFlag || req.Model == "" {
		return cfg.String("model")
	}
	return req.Model
}

// checkModel reports a malformed model chain (empty, not provider/model,
// an unknown provider, a replay file that does not open) as bad input,
// exit 2, naming where the chain came from, before any call is made.
// reqModel is the request's own model, before chooseModel.
func checkModel(router *llm.Router, c *CLI, cfg *config.Config, chain, reqModel string) error {
	err := router.CheckChain(chain)
	if err == nil {
		return nil
	}
	v := cfg.Get("model")
	var from string
	switch {
	case c.Replay != "":
		from = "--replay"
	case v.Source == config.SourceFlag:
		from = "--model"
	case reqModel != "":
		from = "request: field model"
	case v.Source == config.SourceEnv && v.Origin != "":
		from = v.Origin
	default:
		from = "config key model"
	}
	return cli.Usagef("%s: %v", from, err)
}

// readRequest reads the call's input: a JSON request, or prompt text.
func (cmd *CallCmd) readRequest(rt *cli.Runtime) (*protocol.Request, error) {
	var text string
	if len(cmd.Prompt) > 0 {
		text = strings.Join(cmd.Prompt, " ")
	} else {
		if rt.IO.InTTY {
			return nil, cli.Usagef("no prompt: give one as arguments or pipe a request or prompt on stdin")
		}
		data, err := io.ReadAll(rt.IO.In)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		t := bytes.TrimSpace(data)
		if len(t) > 0 && t[0] == '{' {
			req, err := protocol.DecodeRequest(t)
			if err != nil {
				return nil, fmt.Errorf("request: %w", err)
			}
			if req.After != "" {
				return nil, fmt.Errorf("request: %w", protocol.FieldError{Field: "after", Msg: "names a conversation pg-llm serve holds; a single call takes the whole request"})
			}
			if cmd.System != "" && req.System == "" {
				req.System = cmd.System
			}
			return req, nil
		}
		text = string(t)
	}
	if strings.TrimSpace(text) == "" {
		return nil, cli.Usagef("no prompt: give one as arguments or pipe a request or prompt on stdin")
	}
	return &protocol.Request{System: cmd.System, Messages: []protocol.Message{
		{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: text}}}}}, nil
}

// Run makes the call.
func (cmd *CallCmd) Run(rt *cli.Runtime, c *CLI) error {
	if cmd.Text && cmd.JSON {
		return cli.Usagef("--text and --json exclude each other")
	}
	textMode := cmd.Text || (rt.IO.OutTTY && !cmd.JSON)
	rt.JSON = !textMode
	req, err := cmd.readRequest(rt)
	if err != nil {
		return err
	}
	router, cfg, err := setup(rt, c)
	if err != nil {
		return err
	}
	reqModel := req.Model
	req.Model = chooseModel(c, cfg, req)
	if err := checkModel(router, c, cfg, req.Model, reqModel); err != nil {
		return err
	}

	// Output that cannot be written ends the call at once: the answer
	// would be lost anyway, and the tokens still cost money.
	ctx, stop := context.WithCancelCause(rt.Ctx)
	defer stop(nil)
	var (
		events  []any
		sink    func(any)
		enc     = jsonl.NewEncoder(rt.IO.Out)
		lastNL  = true
		wroteTx = false
		werr    error
	)
	wrote := func(err error) {
		if err != nil && werr == nil {
			werr = err
			stop(err)
		}
	}
	if textMode {
		sink = func(ev any) {
			switch e := ev.(type) {
			case *protocol.TextEvent:
				_, err := io.WriteString(rt.IO.Out, e.Text)
				wrote(err)
				lastNL, wroteTx = strings.HasSuffix(e.Text, "\n"), true
			case *protocol.ToolCallEvent:
				fmt.Fprintf(rt.IO.Err, "pg-llm: tool call %s %s\n", e.Call.Name, e.Call.Input)
			case *protocol.RetryEvent:
				fmt.Fprintf(rt.IO.Err, "pg-llm: retry %d in %dms: %s\n", e.Attempt, e.DelayMS, e.Reason)
			case *protocol.FallbackEvent:
				fmt.Fprintf(rt.IO.Err, "pg-llm: falling back from %s to %s: %s\n", e.From, e.To, e.Reason)
			}
		}
	} else {
		sink = func(ev any) { wrote(enc.Encode(ev)) }
	}
	record := sink
	if c.Record != "" {
		record = func(ev any) { events = append(events, ev); sink(ev) }
	}
	_, callErr := router.Call(ctx, req, record)
	if textMode && wroteTx && !lastNL {
		_, err := io.WriteString(rt.IO.Out, "\n")
		wrote(err)
	}
	if werr != nil {
		return werr
	}
	if c.Record != "" && (callErr == nil || isLLMError(callErr)) {
		if err := (&llm.Recorder{Path: c.Record}).Record(req, events); err != nil {
			return err
		}
	}
	return exitFor(rt, callErr)
}

func isLLMError(err error) bool {
	var e *llm.Error
	return errors.As(err, &e)
}

// exitFor maps a call's failure to the exit table. The error event is
// already on stdout, so the error goes to stderr only.
func exitFor(rt *cli.Runtime, err error) error {
	if err == nil {
		return nil
	}
	var e *llm.Error
	if !errors.As(err, &e) {
		return err // cancelled: 128+n
	}
	rt.JSON = false
	code := cli.ExitFailure
	if errors.Is(err, context.DeadlineExceeded) {
		code = cli.ExitTimeout
	}
	return &cli.Error{Code: code, Kind: e.Kind, Err: fmt.Errorf("%s: %s", e.Kind, e.Message)}
}
