// Command gendocs renders docs/protocol.md from the embedded JSON Schemas
// (`make docs`), so the reference can never drift from the types.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
)

type schema struct {
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Type        any                `json:"type"`
	Enum        []any              `json:"enum"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Items       *schema            `json:"items"`
	OneOf       []*schema          `json:"oneOf"`
	AnyOf       []*schema          `json:"anyOf"`
	Format      string             `json:"format"`
	Additional  any                `json:"additionalProperties"`
}

// UnmarshalJSON accepts the boolean schemas true and false.
func (s *schema) UnmarshalJSON(b []byte) error {
	if string(b) == "true" || string(b) == "false" {
		return nil
	}
	type plain schema
	return json.Unmarshal(b, (*plain)(s))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs FILE")
		os.Exit(2)
	}
	f, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: error:", err)
		os.Exit(1)
	}
	defer f.Close()
	if err := render(f); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: error:", err)
		os.Exit(1)
	}
}

var intro = map[string]string{
	"request": "A model call: what `pg-llm` reads on stdin, and each line of `pg-llm serve` (with an `id`).\n\n" +
		"### Held conversations (`pg-llm serve`)\n\n" +
		"A whole request is always valid, for `pg-llm` and on every line of `pg-llm serve`; nothing below is needed to call or to replace either. " +
		"An agent loop sends its conversation again at every step with a message or two more, so `pg-llm serve` keeps what it answered: " +
		"the `end` event of each call carries `held`, a name under which it holds that conversation (the request's `messages`, then the `end` event's `message`, with the request's `system` and `tools`). " +
		"A later request with `\"after\": NAME` sends in `messages` only the messages that follow it, and may leave out `system` and `tools`, which are then the held ones; every other field (`model`, `max_tokens`, ...) is given as in a whole request. " +
		"To drop the system prompt or the tools, send a whole request. " +
		"`pg-llm serve` holds the last 16 conversations. A request naming one it no longer holds gets an `error` event of kind `not_held` (nothing is sent to the provider), and the client sends the whole request instead. " +
		"A client that never reads `held` never sends `after`, and a component that does not hold conversations never writes `held`: `pg-loop` sends `after` only to a component whose last `end` named what it holds, and only while its own conversation extends exactly that one with the same system prompt and tools.\n\n" +
		"```\n" +
		`{"id":"r1","messages":[{"role":"user","content":"fix the test"}]}` + "\n" +
		`{"type":"end","id":"r1",...,"message":{"role":"assistant","content":[{"type":"tool_call","id":"t1","name":"bash","input":{"command":"go test ./..."}}]},...,"held":"h1"}` + "\n" +
		`{"id":"r2","after":"h1","messages":[{"role":"tool","content":[{"type":"tool_result","id":"t1","output":"ok"}]}]}` + "\n" +
		"```\n\n" +
		"The provider gets the whole conversation either way; only the pipe between the client and `pg-llm serve` carries less. " +
		"`pg-llm` (one call) refuses `after` as bad input (exit 2).",
	"message":     "One turn of a conversation: an item of a request's `messages`, and the `message` of an `end` model event, the assistant's, ready to append (`pg-llm schema message`).",
	"model-event": "What `pg-llm` writes: `start`, then deltas, tool calls, usage, retries and fallbacks, and last `end` (or `error`); `pg-llm serve` answers a model-list-request with `models`.",
	"model":       "`pg-llm models --json`: one model of the table, with its context window and its prices in USD per million tokens (`source`: builtin, or config when the configuration's `models` added or changed it).",
	"model-list-request": "A line `pg-llm serve` reads among the requests to list its model table: it answers with a `models` record carrying the same `id` and every model `pg-llm models --json` would print. " +
		"`pg-loop` asks its default model component (`pg-llm serve`) this way for the model's context window and prices, so a launch starts no `pg-llm models` process, and the answer comes while the tools are listed; a component given with `--llm-serve` or `--llm` is not asked (pg-loop runs `pg-llm models --json` beside it instead), so a script need not know this request.\n\n" +
		"```\n" +
		`{"type":"models","id":"m1"}` + "\n" +
		`{"type":"models","id":"m1","models":[{"type":"model","id":"anthropic/claude-sonnet-4-5","context_window":200000,"input_per_mtok":3,"output_per_mtok":15,...},...]}` + "\n" +
		"```",
	"tool-def":  "A tool as a model sees it: an item of `pg-tool list`'s array, of a request's `tools` and of a `tools` record of `pg-tool serve` (`pg-tool schema tool-def`).",
	"tool-list": "`pg-tool list`: the definitions, ready for a request's `tools`.",
	"tool-call": "A call of a tool: each line `pg-tool serve` reads (or a tool-list-request).",
	"tool-list-request": "A line `pg-tool serve` reads among the calls to list its tools: it answers with a `tools` record carrying the same `id` and the definitions `pg-tool list` would print (and `error`, when some could not be listed). " +
		"`pg-loop` asks its default tools component (`pg-tool serve`) this way, so a launch starts no `pg-tool list` process; a component given with `--tools-serve` is listed by `--tools-list` (default: its command line with `list` for a final `serve`) as before, so a script need not know this request.",
	"tool-result": "`pg-tool`'s answer to a call. Secrets in the output and the error are replaced by `[redacted:NAME]` (a variable's or config key's name, or a kind: `anthropic-key`, `openai-key`, `github-token`, `aws-access-key`, `bearer-token`). " +
		"`untrusted: true` marks output brought in from outside the workspace: every MCP tool and external tool, and a `bash` command that reaches the network (a URL, curl, wget, nc, git clone/fetch/pull). " +
		"pg-loop gives such output to the model wrapped as `<untrusted source=\"TOOL\">`, a newline, the output, a newline and `</untrusted>` (a `</untrusted>` inside the output is defused), so the model can tell data from instructions.",
	"tool-output":   "What `pg-tool serve` writes: results, `tools` for a tool-list-request, and errors for malformed lines. `pg-tool mcp` answers an MCP `tools/call` with the same result: one text content holding what pg-loop shows a model (a failure's `error`, a newline and the `output`; when `truncated`, a last line `[output truncated; the whole output is in FILE]`), `isError` when `ok` is false, and in `_meta` the keys `powerglide/truncated`, `powerglide/full_output`, `powerglide/untrusted`, `powerglide/sandbox` and `powerglide/duration_ms`.",
	"tool-sandbox":  "`pg-tool sandbox`: the sandbox mode in force and what enforces each rule on this machine.",
	"tool-skill":    "`pg-tool skills`: one Agent Skill found for the workspace (a folder with a `SKILL.md`); a nearer skill hides one of the same name further away.",
	"task":          "One task of the team queue (`task-queue.json`, `pg-queue list`).",
	"worker":        "`worker-<n>.json`: a worker's own record of its state and heartbeat.",
	"worker-status": "`pg-monitor status`: each worker with its liveness (alive, stale, stuck, dead, done), heartbeat age, task and usage.",
	"journal-event": "`events.jsonl`: the team's journal of task changes, worker state changes and monitor actions.",
	"loop-event": "`pg-loop`'s stdout and `logs/worker-<n>.jsonl`. " +
		"An `approval` event is a tool call that matched an `--ask` pattern: `status: pending` while it waits (answer it by `call.id`), then `approved` or `denied` (with the `reason` the model reads); a `reply` answers a command of `pg-loop serve` (see serve-command). " +
		"A `guard` event is a finding of the exfiltration guard (`--guard warn`, the default, or `strict`): a tool call whose arguments carry a URL on a host that first appeared in untrusted tool output (not in the system prompt, the task or the user's messages), or a key-shaped string from such output, or a Markdown image from such a host in the final answer. " +
		"In strict mode the call is refused with a tool error the model reads (`action: refused`) and the image is removed from the task's result (`action: removed`).",
	"serve-command": "One line of `pg-loop serve`'s stdin: `prompt` and `follow_up` (`message`, optional `verify`) make a task, `steer` (`message`) adds a message before the current task's next model call, `abort` cancels the current task, `approve` and `deny` (`call`, `reason`) answer an `approval` event, `state` asks for the state, `shutdown` aborts the current task, cancels the queued ones (a `task` event each, status `cancelled`) and ends the session; at the end of stdin queued tasks still run. " +
		"Each command is answered by a `reply` loop event with its `id` (`ok`, `error`, the `task` made or concerned, `state`), written before the events the command causes.",
	"approval-answer": "`worker-<n>.approval` in the team directory (the worker's `answer` column on PostgreSQL): the answer to the call a team worker waits on (its worker record's `approval`), written by `pg-loop approve` or pg-dash's y and n keys, on any host that reaches the team's store, and taken by the worker.",
	"error":           "The error record every tool writes to stdout in JSON mode, alongside its one-line message on stderr.",
	"store-agent-hello": "The first line `pg-queue agent` (the store agent, docs/store-agent.md) writes on a connection to its socket, `$POWERGLIDE_HOME/run/store-<hash>.sock`. " +
		"A client that reads another `protocol` does not use the agent.",
	"store-agent-request": "A line a client writes to the store agent: one call of the team store's interface (`op`, its arguments, and an `id` the response carries). " +
		"Calls may overlap on one connection. `{\"op\":\"cancel\",\"id\":N}` cancels call N (`wait_claim`, `follow_next`), which then answers with what it had done. " +
		"`worker_cas` and `budget_cas` write `record` only if the stored document is still `expect`, exactly as `worker_read` or `budget_read` returned it (`null`: none), else fail with kind `conflict`: a client updates by reading, changing and writing until no conflict. " +
		"`worker_cas` and `worker_write` store `record` under the request's `worker`, and refuse as bad input (`bad_input`) a record whose own `worker` field names another: a record under another key than its own name is unreadable.\n\n" +
		"```\n" +
		`{"type":"hello","protocol":1,"store":"postgres","pid":4242}` + "\n" +
		`{"id":1,"op":"team","team":"t"}` + "\n" +
		`{"id":1}` + "\n" +
		`{"id":2,"op":"claim","team":"t","worker":"1","lease_ns":600000000000}` + "\n" +
		`{"id":2,"result":{"id":"t-01JD...","title":"fix the test","status":"claimed",...,"claim":{"worker":"1","token":17,"until":"..."},...}}` + "\n" +
		`{"id":3,"op":"complete","team":"t","task":"t-01JD...","token":99}` + "\n" +
		`{"id":3,"error":{"kind":"lease_lost","message":"task t-01JD...: lease lost: ..."}}` + "\n" +
		"```",
	"store-agent-response": "The store agent's answer to the request with the same `id`: `result` (a task, a list of tasks, stats, a count, a record; absent for none) or `error`, whose `kind` keeps what the tools map to exit codes.",
}

func render(w io.Writer) error {
	fmt.Fprintln(w, "# powerglide protocol reference")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Generated from the JSON Schemas in `pkg/protocol/schemas` (protocol version %d) by `make docs`; do not edit.\n", protocol.Version)
	names := protocol.SchemaNames()
	sort.Strings(names)
	untyped, err := untypedSchemas(names)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Every record has a `type` except %s, which are told apart by where they are read: a file of their own, a command's output, an input line, or a field of another record. ", untyped)
	fmt.Fprintln(w, "Records may gain fields within a version, so readers must ignore fields they do not know.")
	fmt.Fprintln(w, "`pg-<tool> schema NAME` prints a schema.")
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "- [%s](#%s)\n", n, n)
	}
	for _, n := range names {
		raw, err := protocol.Schema(n)
		if err != nil {
			return err
		}
		var s schema
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		fmt.Fprintf(w, "\n## %s\n\n", n)
		if t := intro[n]; t != "" {
			fmt.Fprintln(w, t)
			fmt.Fprintln(w)
		}
		switch {
		case len(s.OneOf) > 0:
			for _, v := range s.OneOf {
				fmt.Fprintf(w, "### `%s`\n\n", typeConst(v))
				fields(w, v)
			}
		case s.Items != nil:
			fmt.Fprintln(w, "An array of:")
			fmt.Fprintln(w)
			fields(w, s.Items)
		default:
			fields(w, &s)
		}
	}
	return nil
}

// untypedSchemas lists, as Markdown links, the schemas whose records have
// no type field (an array has none either).
func untypedSchemas(names []string) (string, error) {
	var out []string
	for _, n := range names {
		raw, err := protocol.Schema(n)
		if err != nil {
			return "", err
		}
		var s schema
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%s: %w", n, err)
		}
		if !typed(&s) {
			out = append(out, fmt.Sprintf("[%s](#%s)", n, n))
		}
	}
	if len(out) < 2 {
		return strings.Join(out, ""), nil
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1], nil
}

// typed reports whether every record of s has a type field.
func typed(s *schema) bool {
	if len(s.OneOf) > 0 {
		for _, v := range s.OneOf {
			if !typed(v) {
				return false
			}
		}
		return true
	}
	_, ok := s.Properties["type"]
	return ok
}

func typeConst(s *schema) string {
	if t, ok := s.Properties["type"]; ok && len(t.Enum) == 1 {
		return fmt.Sprint(t.Enum[0])
	}
	return "?"
}

func fields(w io.Writer, s *schema) {
	if len(s.Properties) == 0 {
		fmt.Fprintln(w, "(any JSON value)")
		fmt.Fprintln(w)
		return
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "type") != (keys[j] == "type") {
			return keys[i] == "type"
		}
		if req[keys[i]] != req[keys[j]] {
			return req[keys[i]]
		}
		return keys[i] < keys[j]
	})
	fmt.Fprintln(w, "| field | type | required | notes |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, k := range keys {
		p := s.Properties[k]
		r := ""
		if req[k] {
			r = "yes"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", k, typeName(p), r, strings.ReplaceAll(p.Description, "|", "\\|"))
	}
	fmt.Fprintln(w)
}

func typeName(s *schema) string {
	switch {
	case len(s.AnyOf) > 0 || len(s.OneOf) > 0:
		var parts []string
		for _, a := range append(s.AnyOf, s.OneOf...) {
			parts = append(parts, typeName(a))
		}
		return strings.Join(parts, " or ")
	case len(s.Enum) > 0:
		var parts []string
		for _, e := range s.Enum {
			parts = append(parts, fmt.Sprintf("`%v`", e))
		}
		return strings.Join(parts, ", ")
	case s.Items != nil:
		return "array of " + typeName(s.Items)
	case s.Format == "date-time":
		return "time (RFC 3339)"
	case s.Type == nil:
		return "any"
	}
	return fmt.Sprint(s.Type)
}
