// Command genschema writes the JSON Schemas of the protocol types into a
// directory (`make schemas`). It is kept apart from package protocol so
// that no tool carries the schema reflector.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/powerglide/powerglide/pkg/protocol"
)

const base = "https://powerglide.dev/schema/v1/"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschema DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genschema: error:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	schemas := map[string]*jsonschema.Schema{
		"request":              reflectType(reflect.TypeFor[protocol.Request]()),
		"message":              reflectType(reflect.TypeFor[protocol.Message]()),
		"model":                reflectType(reflect.TypeFor[protocol.ModelInfo]()),
		"model-list-request":   reflectType(reflect.TypeFor[protocol.ModelListRequest]()),
		"tool-def":             reflectType(reflect.TypeFor[protocol.ToolDef]()),
		"tool-list":            {Type: "array", Items: reflectType(reflect.TypeFor[protocol.ToolDef]())},
		"tool-call":            reflectType(reflect.TypeFor[protocol.ToolCall]()),
		"tool-list-request":    reflectType(reflect.TypeFor[protocol.ToolListRequest]()),
		"tool-result":          reflectType(reflect.TypeFor[protocol.ToolResult]()),
		"tool-sandbox":         reflectType(reflect.TypeFor[protocol.SandboxReport]()),
		"tool-skill":           reflectType(reflect.TypeFor[protocol.SkillRecord]()),
		"serve-command":        reflectType(reflect.TypeFor[protocol.ServeCommand]()),
		"approval-answer":      reflectType(reflect.TypeFor[protocol.ApprovalAnswer]()),
		"task":                 reflectType(reflect.TypeFor[protocol.Task]()),
		"task-input":           reflectType(reflect.TypeFor[protocol.TaskInput]()),
		"worker":               reflectType(reflect.TypeFor[protocol.Worker]()),
		"worker-status":        reflectType(reflect.TypeFor[protocol.WorkerStatus]()),
		"team-budget":          reflectType(reflect.TypeFor[protocol.TeamBudget]()),
		"session":              reflectType(reflect.TypeFor[protocol.SessionRecord]()),
		"session-entry":        reflectType(reflect.TypeFor[protocol.SessionEntry]()),
		"error":                reflectType(reflect.TypeFor[protocol.ErrorEvent]()),
		"queue-stats":          reflectType(reflect.TypeFor[protocol.QueueStats]()),
		"queue-count":          reflectType(reflect.TypeFor[protocol.QueueCount]()),
		"queue-init":           reflectType(reflect.TypeFor[protocol.StoreInit]()),
		"store-agent-hello":    reflectType(reflect.TypeFor[protocol.StoreAgentHello]()),
		"store-agent-request":  reflectType(reflect.TypeFor[protocol.StoreAgentRequest]()),
		"store-agent-response": reflectType(reflect.TypeFor[protocol.StoreAgentResponse]()),
	}
	// A task to add needs a title, or a prompt to take it from.
	schemas["task-input"].Description = "one task for pg-queue add (a line of a tasks file): a title or a prompt, the rest optional; the state fields of a task record are accepted and ignored"
	schemas["task-input"].AnyOf = []*jsonschema.Schema{
		{Required: []string{"title"}},
		{Required: []string{"prompt"}},
	}
	// A task may carry fields this version does not know (DESIGN.md §3:
	// fields may be added); the queue keeps them.
	schemas["task"].AdditionalProperties = nil
	for _, f := range []*protocol.Family{protocol.ModelEvents, protocol.LoopEvents, protocol.JournalEvents, protocol.ToolOutputs, protocol.PtyOutputs} {
		s := &jsonschema.Schema{Description: f.Name + " records, told apart by their type field"}
		for _, t := range f.Types() {
			s.OneOf = append(s.OneOf, reflectType(reflect.TypeOf(f.New(t)).Elem()))
		}
		schemas[f.Name] = s
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, s := range schemas {
		s.Version = "https://json-schema.org/draft/2020-12/schema"
		s.ID = jsonschema.ID(base + name + ".json")
		if s.Title == "" {
			s.Title = "powerglide " + name
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func reflector() *jsonschema.Reflector {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	r.Mapper = func(t reflect.Type) *jsonschema.Schema {
		switch t {
		case reflect.TypeFor[protocol.Content]():
			return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
				{Type: "string", Description: "shorthand for one text block"},
				{Type: "array", Items: reflectType(reflect.TypeFor[protocol.Block]())},
			}}
		case rawMessage:
			return &jsonschema.Schema{}
		}
		return nil
	}
	return r
}

// reflectType reflects a struct and marks the fields that may be null
// (pointers without omitempty) as nullable, which the reflector does not.
func reflectType(t reflect.Type) *jsonschema.Schema {
	s := reflector().ReflectFromType(t)
	s.Version, s.ID = "", ""
	nullable(t, s)
	return s
}

func nullable(t reflect.Type, s *jsonschema.Schema) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		if s.Items != nil && t != rawMessage {
			nullable(t.Elem(), s.Items)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	if s.Properties == nil {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ps, ok := s.Properties.Get(name)
		if !ok {
			continue
		}
		nullable(f.Type, ps)
		if f.Type.Kind() == reflect.Pointer && !strings.Contains(opts, "omitempty") {
			copy := *ps
			*ps = jsonschema.Schema{AnyOf: []*jsonschema.Schema{&copy, {Type: "null"}}}
		}
	}
}
