// Package validate checks JSON records against the protocol's schemas.
// Tests use it on the real output of the tools.
package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// The one JSON Schema library of the tree is github.com/google/jsonschema-go,
// which pg-tool validates tool input with (and the MCP SDK builds on):
// what these tests accept is what the tools accept.

var (
	mu       sync.Mutex
	compiled = map[string]*jsonschema.Resolved{}
)

func schema(name string) (*jsonschema.Resolved, error) {
	mu.Lock()
	defer mu.Unlock()
	if s, ok := compiled[name]; ok {
		return s, nil
	}
	raw, err := protocol.Schema(name)
	if err != nil {
		return nil, err
	}
	var doc jsonschema.Schema
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	s, err := doc.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	compiled[name] = s
	return s, nil
}

// JSON validates one JSON document against the named schema.
func JSON(name string, data []byte) error {
	s, err := schema(name)
	if err != nil {
		return err
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if d.More() {
		return fmt.Errorf("not JSON: more than one value")
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Value validates a Go value, marshalled to JSON, against the named schema.
func Value(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return JSON(name, b)
}

// Lines validates every non-blank line of JSONL output against the named
// schema; errors name the line.
func Lines(name string, data []byte) error {
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := JSON(name, line); err != nil {
			return fmt.Errorf("line %d: %w\n%s", i+1, err, line)
		}
	}
	return nil
}
