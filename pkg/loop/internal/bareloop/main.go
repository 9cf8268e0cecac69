// Command bareloop is the floor scripts/bench-overhead.sh measures pg-loop
// against: the least a coding agent can do per step. One HTTP call to an
// Anthropic Messages server per step (the whole conversation, streamed
// back), one `bash -c` per tool call, the result appended, until the model
// answers without a tool call. No sessions, no events, no safety: nothing
// but the loop.
//
//	bareloop -url http://127.0.0.1:PORT -tools tools.json "the prompt"
//
// tools.json is what `pg-tool list` prints, so both loops send the model
// the same tool definitions. It prints the number of steps on stdout.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
)

func main() {
	url := flag.String("url", "", "base URL of the Anthropic Messages server")
	tools := flag.String("tools", "", "file of tool definitions [{name, description, input_schema}]")
	model := flag.String("model", "claude-sonnet-4-5", "model name")
	flag.Parse()
	if *url == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bareloop -url URL [-tools FILE] PROMPT")
		os.Exit(2)
	}
	steps, err := run(*url, *tools, *model, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareloop: error:", err)
		os.Exit(1)
	}
	fmt.Println(steps)
}

// run is the loop. The conversation is kept as the JSON of each message,
// so a step encodes only what is new.
func run(url, toolsFile, model, prompt string) (int, error) {
	toolsJSON := []byte("[]")
	if toolsFile != "" {
		b, err := os.ReadFile(toolsFile)
		if err != nil {
			return 0, err
		}
		var defs []struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(b, &defs); err != nil {
			return 0, fmt.Errorf("%s: %w", toolsFile, err)
		}
		if toolsJSON, err = json.Marshal(defs); err != nil {
			return 0, err
		}
	}
	msgs := [][]byte{mustJSON(map[string]any{"role": "user", "content": prompt})}
	client := &http.Client{}
	var body bytes.Buffer
	for step := 1; ; step++ {
		body = bytes.Buffer{}
		fmt.Fprintf(&body, `{"model":%q,"max_tokens":4096,"stream":true,"tools":%s,"messages":[`, model, toolsJSON)
		body.Write(bytes.Join(msgs, []byte(",")))
		body.WriteString("]}")
		req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(url, "/")+"/v1/messages", bytes.NewReader(body.Bytes()))
		if err != nil {
			return step, err
		}
		req.Header.Set("content-type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-api-key", "bare")
		resp, err := client.Do(req)
		if err != nil {
			return step, err
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return step, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		content, calls, err := readStream(resp.Body)
		resp.Body.Close()
		if err != nil {
			return step, err
		}
		msgs = append(msgs, mustJSON(map[string]any{"role": "assistant", "content": content}))
		if len(calls) == 0 {
			return step, nil
		}
		var results []any
		for _, c := range calls {
			var in struct {
				Command string `json:"command"`
			}
			_ = json.Unmarshal(c.input, &in)
			out, err := exec.Command("bash", "-c", in.Command).CombinedOutput()
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": c.id, "content": string(out), "is_error": err != nil})
		}
		msgs = append(msgs, mustJSON(map[string]any{"role": "user", "content": results}))
	}
}

type call struct {
	id    string
	input json.RawMessage
}

// readStream reads a Messages event stream: the content blocks of the
// answer, and its tool calls.
func readStream(r io.Reader) ([]any, []call, error) {
	type block struct {
		Type  string          `json:"type"`
		Text  string          `json:"text,omitempty"`
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
		buf   strings.Builder
	}
	var blocks []*block
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var ev struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock *block `json:"content_block"`
			Delta        struct {
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, nil, err
		}
		switch ev.Type {
		case "content_block_start":
			blocks = append(blocks, ev.ContentBlock)
		case "content_block_delta":
			if ev.Index < len(blocks) {
				blocks[ev.Index].buf.WriteString(ev.Delta.Text + ev.Delta.PartialJSON)
			}
		case "message_stop":
			var content []any
			var calls []call
			for _, b := range blocks {
				if b.Type == "tool_use" {
					b.Input = json.RawMessage(b.buf.String())
					if len(b.Input) == 0 {
						b.Input = json.RawMessage("{}")
					}
					calls = append(calls, call{b.ID, b.Input})
				} else {
					b.Text += b.buf.String()
				}
				content = append(content, b)
			}
			return content, calls, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return nil, nil, io.ErrUnexpectedEOF
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
