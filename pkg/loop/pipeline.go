package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/itchyny/gojq"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Pipeline is a --pipeline file: stages run in order, each until its exit
// condition holds, each at most max_iterations times.
type Pipeline struct {
	Name   string            `json:"name"`
	Vars   map[string]string `json:"vars,omitempty"`
	Fresh  *bool             `json:"fresh,omitempty"` // default true: every iteration starts a fresh conversation
	Stages []Stage           `json:"stages"`
}

// Stage is one stage of a pipeline.
type Stage struct {
	Name          string `json:"name"`
	Prompt        string `json:"prompt,omitempty"`
	PromptFile    string `json:"prompt_file,omitempty"` // relative to the pipeline file
	Exit          Exit   `json:"exit"`
	MaxIterations int    `json:"max_iterations,omitempty"` // default 10
	Verify        string `json:"verify,omitempty"`
	Fresh         *bool  `json:"fresh,omitempty"`
}

// Exit is a stage's exit condition: every condition given must hold.
type Exit struct {
	File     string `json:"file,omitempty"`      // a file with at least MinLines lines
	MinLines int    `json:"min_lines,omitempty"` // default 1
	Dir      string `json:"dir,omitempty"`       // a directory with at least MinFiles files
	MinFiles int    `json:"min_files,omitempty"` // default 1
	Promise  string `json:"promise,omitempty"`   // <promise>WORD</promise> in the final answer
	Command  string `json:"command,omitempty"`   // a shell command that exits 0
	JQ       string `json:"jq,omitempty"`        // a jq filter over the loop state that yields true
}

func (e Exit) empty() bool {
	return e.File == "" && e.Dir == "" && e.Promise == "" && e.Command == "" && e.JQ == ""
}

// ReadPipeline reads and checks a pipeline file; errors name the field.
func ReadPipeline(path string) (*Pipeline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Pipeline
	if err := dec.Decode(&p); err != nil {
		return nil, &protocol.FieldError{Field: "(pipeline " + path + ")", Msg: err.Error()}
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if len(p.Stages) == 0 {
		return nil, protocol.FieldError{Field: "stages", Msg: "at least one stage is required"}
	}
	seen := map[string]bool{}
	base := filepath.Dir(path)
	for i := range p.Stages {
		s := &p.Stages[i]
		f := fmt.Sprintf("stages[%d]", i)
		if s.Name == "" {
			return nil, protocol.FieldError{Field: f + ".name", Msg: "is required"}
		}
		if seen[s.Name] {
			return nil, protocol.FieldError{Field: f + ".name", Msg: fmt.Sprintf("duplicate stage %q", s.Name)}
		}
		seen[s.Name] = true
		if (s.Prompt == "") == (s.PromptFile == "") {
			return nil, protocol.FieldError{Field: f + ".prompt", Msg: "give exactly one of prompt and prompt_file"}
		}
		if s.PromptFile != "" {
			pf := s.PromptFile
			if !filepath.IsAbs(pf) {
				pf = filepath.Join(base, pf)
			}
			b, err := os.ReadFile(pf)
			if err != nil {
				return nil, protocol.FieldError{Field: f + ".prompt_file", Msg: err.Error()}
			}
			s.Prompt = string(b)
		}
		if s.Exit.empty() {
			return nil, protocol.FieldError{Field: f + ".exit", Msg: "an exit condition is required (file, dir, promise, command or jq)"}
		}
		if s.Exit.JQ != "" {
			if _, err := gojq.Parse(s.Exit.JQ); err != nil {
				return nil, protocol.FieldError{Field: f + ".exit.jq", Msg: err.Error()}
			}
		}
		if s.MaxIterations < 0 || s.Exit.MinLines < 0 || s.Exit.MinFiles < 0 {
			return nil, protocol.FieldError{Field: f, Msg: "counts must not be negative"}
		}
		if s.MaxIterations == 0 {
			s.MaxIterations = 10
		}
	}
	return &p, nil
}

// PipelineState is the persisted progress of a pipeline.
type PipelineState struct {
	Pipeline  string       `json:"pipeline"`
	Workdir   string       `json:"workdir"`
	Stage     int          `json:"stage"` // index of the current stage; len(stages) when finished
	Status    string       `json:"status" jsonschema:"description=running, done, failed"`
	Stages    []StageState `json:"stages"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// StageState is one stage's progress.
type StageState struct {
	Name       string `json:"name"`
	Status     string `json:"status"` // pending, running, done, failed
	Iterations int    `json:"iterations"`
	Answer     string `json:"answer,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// DefaultPipelineState is where the state of a pipeline run in workdir
// lives: under the data root, keyed by the pipeline file and the workdir.
func DefaultPipelineState(home, pipelineFile, workdir string) string {
	a, _ := filepath.Abs(pipelineFile)
	w, _ := filepath.Abs(workdir)
	h := sha256.Sum256([]byte(a + "\x00" + w))
	name := strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
	return filepath.Join(home, "pipelines", name+"-"+hex.EncodeToString(h[:6])+".json")
}

// PipelineSource runs a pipeline's stages as the loop's tasks. It is a
// Source, a Checker (exit conditions) and a Prompter (variables).
type PipelineSource struct {
	P         *Pipeline
	StateFile string
	Workdir   string
	// Verifier runs the stages' command checks.
	Verifier Verifier

	mu sync.Mutex
	st PipelineState
}

// OpenPipeline loads or starts the state of a pipeline.
func OpenPipeline(p *Pipeline, stateFile, workdir string, reset bool) (*PipelineSource, error) {
	ps := &PipelineSource{P: p, StateFile: stateFile, Workdir: workdir}
	b, err := os.ReadFile(stateFile)
	switch {
	case err == nil && !reset:
		if err := json.Unmarshal(b, &ps.st); err != nil {
			return nil, fmt.Errorf("pipeline state %s: %w", stateFile, err)
		}
		if len(ps.st.Stages) != len(p.Stages) {
			return nil, fmt.Errorf("pipeline state %s was written for other stages; start over with --pipeline-reset", stateFile)
		}
		for i, s := range p.Stages {
			if ps.st.Stages[i].Name != s.Name {
				return nil, fmt.Errorf("pipeline state %s was written for other stages; start over with --pipeline-reset", stateFile)
			}
		}
		if ps.st.Status == "failed" {
			// A failed pipeline is run again from its failed stage.
			ps.st.Status = "running"
			if ps.st.Stage < len(ps.st.Stages) {
				ps.st.Stages[ps.st.Stage].Status = "pending"
				ps.st.Stages[ps.st.Stage].Iterations = 0
			}
		}
	case err == nil || errors.Is(err, os.ErrNotExist):
		ps.st = PipelineState{Pipeline: p.Name, Workdir: workdir, Status: "running"}
		for _, s := range p.Stages {
			ps.st.Stages = append(ps.st.Stages, StageState{Name: s.Name, Status: "pending"})
		}
	default:
		return nil, err
	}
	return ps, ps.save()
}

// State returns a copy of the state.
func (ps *PipelineSource) State() PipelineState {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := ps.st
	st.Stages = append([]StageState(nil), ps.st.Stages...)
	return st
}

func (ps *PipelineSource) save() error {
	ps.st.UpdatedAt = time.Now().UTC()
	b, err := json.MarshalIndent(&ps.st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(ps.StateFile), teamdir.DirMode); err != nil {
		return err
	}
	return atomicfile.WriteFile(ps.StateFile, append(b, '\n'), teamdir.FileMode)
}

func stageID(i int, name string) string { return fmt.Sprintf("stage-%d-%s", i+1, name) }

func (ps *PipelineSource) index(t *protocol.Task) int {
	for i, s := range ps.P.Stages {
		if stageID(i, s.Name) == t.ID {
			return i
		}
	}
	return -1
}

// Next returns the current stage as a task, or nil when the pipeline is
// finished or failed.
func (ps *PipelineSource) Next(context.Context) (*protocol.Task, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.st.Status != "running" || ps.st.Stage >= len(ps.P.Stages) {
		return nil, nil
	}
	i := ps.st.Stage
	s := ps.P.Stages[i]
	fresh := true
	if ps.P.Fresh != nil {
		fresh = *ps.P.Fresh
	}
	if s.Fresh != nil {
		fresh = *s.Fresh
	}
	labels := map[string]string{"stage": s.Name, "fresh": strconv.FormatBool(fresh), "max_iterations": strconv.Itoa(s.MaxIterations)}
	if s.Exit.Promise != "" {
		labels["promise"] = s.Exit.Promise
	}
	ps.st.Stages[i].Status = "running"
	if err := ps.save(); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	return &protocol.Task{ID: stageID(i, s.Name), Title: ps.P.Name + ": " + s.Name, Prompt: s.Prompt, Verify: s.Verify, Status: protocol.StatusClaimed,
		DependsOn: []string{}, Labels: labels, CreatedAt: now, UpdatedAt: now}, nil
}

var varRE = lazyre.Compile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Prompt expands {{var}} in the stage's prompt: the pipeline's vars, and
// stage, iteration, max_iterations, workdir, pipeline, previous_stage,
// previous_answer. Unknown names are left as they are.
func (ps *PipelineSource) Prompt(t *protocol.Task, iteration int) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := ps.index(t)
	if i < 0 {
		return t.Prompt
	}
	return ps.expand(ps.P.Stages[i].Prompt, i, iteration)
}

// expand substitutes variables; called with mu held.
func (ps *PipelineSource) expand(s string, i, iteration int) string {
	vars := map[string]string{}
	for k, v := range ps.P.Vars {
		vars[k] = v
	}
	vars["stage"] = ps.P.Stages[i].Name
	vars["iteration"] = strconv.Itoa(iteration)
	vars["max_iterations"] = strconv.Itoa(ps.P.Stages[i].MaxIterations)
	vars["workdir"] = ps.Workdir
	vars["pipeline"] = ps.P.Name
	if i > 0 {
		vars["previous_stage"] = ps.P.Stages[i-1].Name
		vars["previous_answer"] = ps.st.Stages[i-1].Answer
	}
	return varRE().ReplaceAllStringFunc(s, func(m string) string {
		k := varRE().FindStringSubmatch(m)[1]
		if v, ok := vars[k]; ok {
			return v
		}
		return m
	})
}

// Check evaluates the stage's exit condition after an iteration.
func (ps *PipelineSource) Check(ctx context.Context, t *protocol.Task, answer string, iteration int) (bool, string, error) {
	ps.mu.Lock()
	i := ps.index(t)
	if i < 0 {
		ps.mu.Unlock()
		return false, "", fmt.Errorf("unknown stage task %s", t.ID)
	}
	ps.st.Stages[i].Iterations = iteration
	ps.st.Stages[i].Answer = answer
	_ = ps.save()
	exit := ps.P.Stages[i].Exit
	// Variables work in the paths and the command too.
	exit.File, exit.Dir, exit.Command = ps.expand(exit.File, i, iteration), ps.expand(exit.Dir, i, iteration), ps.expand(exit.Command, i, iteration)
	state := ps.jqState(i, answer, iteration)
	ps.mu.Unlock()

	ok, detail, err := ps.check(ctx, exit, answer, state)
	ps.mu.Lock()
	ps.st.Stages[i].Detail = detail
	_ = ps.save()
	ps.mu.Unlock()
	return ok, detail, err
}

func (ps *PipelineSource) jqState(i int, answer string, iteration int) map[string]any {
	b, _ := json.Marshal(ps.st)
	var st map[string]any
	_ = json.Unmarshal(b, &st)
	st["current"] = map[string]any{"name": ps.P.Stages[i].Name, "index": i, "iteration": iteration, "answer": answer}
	return st
}

func (ps *PipelineSource) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(ps.Workdir, p)
}

func (ps *PipelineSource) check(ctx context.Context, e Exit, answer string, state map[string]any) (bool, string, error) {
	if e.File != "" {
		min := max(e.MinLines, 1)
		b, err := os.ReadFile(ps.path(e.File))
		if err != nil {
			return false, fmt.Sprintf("%s does not exist yet (it needs at least %d lines)", e.File, min), nil
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
		if n < min {
			return false, fmt.Sprintf("%s has %d lines, it needs at least %d", e.File, n, min), nil
		}
	}
	if e.Dir != "" {
		min := max(e.MinFiles, 1)
		n := 0
		entries, err := os.ReadDir(ps.path(e.Dir))
		if err == nil {
			for _, en := range entries {
				if en.Type().IsRegular() {
					n++
				}
			}
		}
		if n < min {
			return false, fmt.Sprintf("directory %s has %d files, it needs at least %d", e.Dir, n, min), nil
		}
	}
	if e.Promise != "" && !HasPromise(answer, e.Promise) {
		return false, fmt.Sprintf("the answer did not contain <promise>%s</promise>", e.Promise), nil
	}
	if e.Command != "" {
		out, err := ps.Verifier.Run(ctx, e.Command, ps.Workdir, 10*time.Minute)
		if err != nil {
			return false, "", err
		}
		if !out.OK {
			return false, fmt.Sprintf("`%s` exited %d: %s", e.Command, out.ExitCode, termtext.OneLine(out.Output, 500)), nil
		}
	}
	if e.JQ != "" {
		q, err := gojq.Parse(e.JQ)
		if err != nil {
			return false, "", err
		}
		it := q.RunWithContext(ctx, state)
		v, ok := it.Next()
		if !ok {
			return false, fmt.Sprintf("jq %q yielded nothing", e.JQ), nil
		}
		if err, isErr := v.(error); isErr {
			return false, "", fmt.Errorf("jq %q: %w", e.JQ, err)
		}
		if v == nil || v == false {
			return false, fmt.Sprintf("jq %q is %v", e.JQ, v), nil
		}
	}
	return true, "", nil
}

func (ps *PipelineSource) set(t *protocol.Task, status string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := ps.index(t)
	if i < 0 {
		return fmt.Errorf("unknown stage task %s", t.ID)
	}
	ps.st.Stages[i].Status = status
	switch status {
	case "done":
		ps.st.Stage = i + 1
		if ps.st.Stage >= len(ps.P.Stages) {
			ps.st.Status = "done"
		}
	case "failed":
		ps.st.Status = "failed"
	}
	return ps.save()
}

// Complete moves to the next stage.
func (ps *PipelineSource) Complete(_ context.Context, t *protocol.Task, _ json.RawMessage) error {
	return ps.set(t, "done")
}

// Fail stops the pipeline at this stage.
func (ps *PipelineSource) Fail(_ context.Context, t *protocol.Task, _ string, _ bool) error {
	return ps.set(t, "failed")
}

// Release leaves the stage running, to be resumed.
func (ps *PipelineSource) Release(context.Context, *protocol.Task) error { return nil }

// Renew always succeeds.
func (ps *PipelineSource) Renew(context.Context, *protocol.Task) error { return nil }

// Iterated records that the stage's iteration ended, whether or not it
// got as far as its exit condition, so a killed pipeline resumes its count.
func (ps *PipelineSource) Iterated(t *protocol.Task, iteration int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if i := ps.index(t); i >= 0 && ps.st.Stages[i].Iterations != iteration {
		ps.st.Stages[i].Iterations = iteration
		_ = ps.save()
	}
}

// Iterations is how many iterations the stage has had (a killed pipeline
// resumes its count).
func (ps *PipelineSource) Iterations(t *protocol.Task) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if i := ps.index(t); i >= 0 {
		return ps.st.Stages[i].Iterations
	}
	return 0
}
