package dash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// QueueDoc is what the dashboard reads from task-queue.json.
type QueueDoc struct {
	Tasks []protocol.Task
	// Archived counts, by status, the finished tasks pg-queue moved out of
	// the live file (its header field "archived"); they still count in the
	// team's totals.
	Archived map[string]int
	// FinishedDeps is the final status of archived tasks that live tasks
	// depend on (the header field "finished_deps"). Nil when the document
	// does not have the field.
	FinishedDeps map[string]string
}

// DecodeQueue reads the document in task-queue.json. pg-queue owns its exact
// shape; this reader is liberal on purpose and accepts either a bare array
// of tasks or an object holding a "tasks" array, with pg-queue's "archived"
// and "finished_deps" header fields when present (other fields, such as a
// version, are ignored). An empty document holds no tasks. Keep this the
// only place that knows the shape.
func DecodeQueue(b []byte) (QueueDoc, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return QueueDoc{}, nil
	}
	switch t[0] {
	case '[':
		var tasks []protocol.Task
		if err := json.Unmarshal(t, &tasks); err != nil {
			return QueueDoc{}, fmt.Errorf("task list: %w", err)
		}
		return QueueDoc{Tasks: tasks}, nil
	case '{':
		var doc struct {
			Tasks        *[]protocol.Task  `json:"tasks"`
			Archived     map[string]int    `json:"archived"`
			FinishedDeps map[string]string `json:"finished_deps"`
		}
		if err := json.Unmarshal(t, &doc); err != nil {
			return QueueDoc{}, fmt.Errorf("queue document: %w", err)
		}
		if doc.Tasks == nil {
			return QueueDoc{}, errors.New(`queue document has no "tasks" array`)
		}
		return QueueDoc{Tasks: *doc.Tasks, Archived: doc.Archived, FinishedDeps: doc.FinishedDeps}, nil
	}
	return QueueDoc{}, errors.New("queue document is neither an array of tasks nor an object with a \"tasks\" array")
}

// markBlocked sets Blocked on pending tasks whose dependencies are not all
// done, as pg-queue decides it: a dependency is a live task or an archived
// one remembered in finished (finished_deps). When the document has no
// finished_deps (not written by pg-queue), a dependency missing from the
// live file is taken as done: it may have been archived.
func markBlocked(tasks []protocol.Task, finished map[string]string) {
	status := make(map[string]string, len(tasks))
	for _, t := range tasks {
		status[t.ID] = t.Status
	}
	for i := range tasks {
		t := &tasks[i]
		if t.Status != protocol.StatusPending || t.Blocked {
			continue
		}
		for _, d := range t.DependsOn {
			s, ok := status[d]
			if !ok {
				s, ok = finished[d]
			}
			if !ok && finished == nil {
				continue
			}
			if s != protocol.StatusDone {
				t.Blocked = true
				break
			}
		}
	}
}

// Counts are the queue's tasks by status; Blocked tasks are not in Pending.
// Done, Failed, Cancelled and Total include the archived tasks; Archived
// says how many of them are no longer in the live file.
type Counts struct {
	Total     int `json:"total"`
	Pending   int `json:"pending"`
	Blocked   int `json:"blocked"`
	Claimed   int `json:"claimed"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Archived  int `json:"archived"`
}

// AddArchived adds pg-queue's archived counts (by status) to c.
func (c Counts) AddArchived(archived map[string]int) Counts {
	for st, n := range archived {
		if n <= 0 {
			continue
		}
		switch st {
		case protocol.StatusDone:
			c.Done += n
		case protocol.StatusFailed:
			c.Failed += n
		case protocol.StatusCancelled:
			c.Cancelled += n
		default:
			continue // only finished tasks are archived
		}
		c.Total += n
		c.Archived += n
	}
	return c
}

// Finished is the number of tasks that will not run again.
func (c Counts) Finished() int { return c.Done + c.Failed + c.Cancelled }

// Remaining is the number of tasks still to run.
func (c Counts) Remaining() int { return c.Pending + c.Blocked + c.Claimed }

// Progress is the finished fraction, 0..1.
func (c Counts) Progress() float64 {
	if c.Total == 0 {
		return 0
	}
	return float64(c.Finished()) / float64(c.Total)
}

// CountTasks counts tasks by status.
func CountTasks(tasks []protocol.Task) Counts {
	var c Counts
	for _, t := range tasks {
		c.Total++
		switch StatusOf(t) {
		case protocol.StatusPending:
			c.Pending++
		case "blocked":
			c.Blocked++
		case protocol.StatusClaimed:
			c.Claimed++
		case protocol.StatusDone:
			c.Done++
		case protocol.StatusFailed:
			c.Failed++
		case protocol.StatusCancelled:
			c.Cancelled++
		}
	}
	return c
}

// StatusOf is the status shown for a task: "blocked" for a blocked pending
// task, else its status.
func StatusOf(t protocol.Task) string {
	if t.Status == protocol.StatusPending && t.Blocked {
		return "blocked"
	}
	return t.Status
}

// statusRank orders the tasks view: running work first, finished last.
func statusRank(s string) int {
	switch s {
	case protocol.StatusClaimed:
		return 0
	case protocol.StatusPending:
		return 1
	case "blocked":
		return 2
	case protocol.StatusFailed:
		return 3
	case protocol.StatusDone:
		return 4
	case protocol.StatusCancelled:
		return 5
	}
	return 6
}

func unmarshalLoose(b []byte, v any) error { return json.Unmarshal(b, v) }
