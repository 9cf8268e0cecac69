package dash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// DecodeQueue reads the document in task-queue.json. pg-queue owns its exact
// shape; this reader is liberal on purpose and accepts either a bare array
// of tasks or an object holding a "tasks" array (other fields, such as a
// version or counters, are ignored). An empty document holds no tasks. Keep
// this the only place that knows the shape.
func DecodeQueue(b []byte) ([]protocol.Task, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, nil
	}
	switch t[0] {
	case '[':
		var tasks []protocol.Task
		if err := json.Unmarshal(t, &tasks); err != nil {
			return nil, fmt.Errorf("task list: %w", err)
		}
		return tasks, nil
	case '{':
		var doc struct {
			Tasks *[]protocol.Task `json:"tasks"`
		}
		if err := json.Unmarshal(t, &doc); err != nil {
			return nil, fmt.Errorf("queue document: %w", err)
		}
		if doc.Tasks == nil {
			return nil, errors.New(`queue document has no "tasks" array`)
		}
		return *doc.Tasks, nil
	}
	return nil, errors.New("queue document is neither an array of tasks nor an object with a \"tasks\" array")
}

// markBlocked sets Blocked on pending tasks whose dependencies are not all
// done. A dependency missing from the live file is taken as done: finished
// tasks may be archived out of it.
func markBlocked(tasks []protocol.Task) {
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
			if s, ok := status[d]; ok && s != protocol.StatusDone {
				t.Blocked = true
				break
			}
		}
	}
}

// Counts are the queue's tasks by status; Blocked tasks are not in Pending.
type Counts struct {
	Total     int `json:"total"`
	Pending   int `json:"pending"`
	Blocked   int `json:"blocked"`
	Claimed   int `json:"claimed"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
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
