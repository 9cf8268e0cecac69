#!/bin/sh
# shell-llm.sh: a stand-in for pg-llm, in sh and jq, to show that any
# component of powerglide can be swapped for a script. pg-loop runs it once
# per model turn (pg-loop --llm CMD) with the request on stdin, and reads
# model events from its stdout: start, then tool_call or text, then end
# (whose message pg-loop appends to the conversation; its tool_call blocks
# are the calls pg-loop makes). See
# `pg-llm schema request` and `pg-llm schema model-event`.
#
# The "model" treats each task's prompt (its first paragraph) as a shell
# command: the first turn calls the bash tool with it, and once the tool
# result is back it answers with the first line of the output. The task's
# verify then decides whether the task is done, as with a real model.
#
#   pg-loop --llm scripts/swap/shell-llm.sh --task 'go test ./...'
#   pg-loop --llm scripts/swap/shell-llm.sh --task 'echo hi > hi.txt' --verify 'test -s hi.txt'
set -eu
command -v jq >/dev/null 2>&1 || {
	echo '{"type":"error","kind":"bad_request","message":"shell-llm.sh needs jq","retryable":false}'
	exit 1
}
echo '{"type":"start","provider":"script","model":"shell-llm"}'
jq -c '
  {input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0} as $usage
  | if .messages[-1].role == "tool" then
      (.messages[-1].content[0].output // "" | split("\n")[0]) as $out
      | {type: "text", text: "ran it: \($out)"},
        {type: "end", stop_reason: "end_turn", usage: $usage,
         message: {role: "assistant", content: [{type: "text", text: "ran it: \($out)"}]}}
    else
      (.messages[0].content | if type == "string" then . else map(select(.type == "text").text) | join("") end
       | split("\n\n")[0]) as $cmd
      | {id: "sh-\(.messages | length)", name: "bash", input: {command: $cmd}} as $call
      | {type: "tool_call", call: $call},
        {type: "end", stop_reason: "tool_use", usage: $usage,
         message: {role: "assistant", content: [{type: "tool_call"} + $call]}}
    end'
