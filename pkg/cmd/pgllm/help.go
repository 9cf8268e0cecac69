package pgllm

// Detailed help of the commands (kong's HelpProvider): shown by --help
// and in the man page. The examples that call a provider are marked "with
// a key"; the others answer from a replay file the first one writes.

// Help details call, the default command.
func (c *CallCmd) Help() string {
	return `pg-llm PROMPT is pg-llm call PROMPT: the tool's description (pg-llm --help) tells the request, the events and replay files.

Examples:
  $ echo 'Say hi' | pg-llm --model anthropic/claude-haiku-4-5   # with a key
  $ echo '{"type":"call","events":[{"type":"end","message":{"role":"assistant","content":[{"type":"text","text":"Hi!"}]}}]}' > hi.jsonl
  $ pg-llm --replay hi.jsonl --system 'Be brief.' 'Say hi'
  $ pg-llm --replay hi.jsonl --json 'Say hi' | jq -r 'select(.type == "text") | .text'`
}

// Help details serve.
func (c *ServeCmd) Help() string {
	return `Each input line is a request with an "id"; every event of it carries that id, and calls run concurrently (--concurrency), their events interleaved line by line. A request ends with its end or error event, written once the call is recorded (--record; a call that could not be recorded ends with an error instead): its id may then be used again, and not before. A bad line gets an error event with its line number and serving goes on. Serving ends at end of input, after the calls in flight.

Serve holds the last 16 conversations it answered: each end event names one ("held":"h1"), and a later request with "after":"h1" sends only the messages that follow it, and no system prompt or tools while they stay the held ones (docs/protocol.md, "Held conversations"). A whole request is always valid.

Examples (hi.jsonl as pg-llm call --help writes it):
  $ pg-llm serve < requests.jsonl   # with a key
  $ echo '{"id":"a","messages":[{"role":"user","content":"Say hi"}]}' | pg-llm --replay hi.jsonl serve`
}

// Help details models.
func (c *ModelsCmd) Help() string {
	return `Examples:
  $ pg-llm models
  $ pg-llm models --jq 'select(.id | startswith("anthropic/")) | .id'`
}
