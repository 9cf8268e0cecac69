package loop

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// ListSessions reads every session under home, oldest first. Sessions
// that cannot be read are returned as errors alongside the good ones.
func ListSessions(home string) ([]protocol.SessionRecord, []error) {
	entries, err := os.ReadDir(teamdir.Sessions(home))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	var out []protocol.SessionRecord
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		s, err := OpenSession(home, e.Name())
		if err != nil {
			var nf *NotFoundError
			if !errors.As(err, &nf) { // a directory being made has no session.json yet
				errs = append(errs, err)
			}
			continue
		}
		rec, err := s.Record()
		s.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, errs
}

// Record describes the session. The task counts come from its task list;
// a session without one (a team worker's, a pipeline's) counts the tasks
// its memory saw start.
func (s *Session) Record() (protocol.SessionRecord, error) {
	s.mu.Lock()
	info := s.Info
	s.mu.Unlock()
	rec := protocol.SessionRecord{Type: protocol.SessionRecordType, ID: info.ID, Parent: info.Parent, Status: info.Status,
		Created: info.CreatedAt, Updated: info.UpdatedAt, Cwd: info.Workdir, Tasks: map[string]int{}, Task: info.Task,
		Steps: info.Step, Usage: info.Usage, Team: info.Team, Worker: info.Worker, Pipeline: info.Pipeline, PID: info.PID}
	rec.Alive = info.PIDStart != "" && proc.Matches(info.PID, info.PIDStart)
	if len(info.Tasks) > 0 {
		for _, t := range info.Tasks {
			rec.Tasks[t.Status]++
		}
	} else {
		rp, err := s.LoadReplay()
		if err != nil {
			return rec, fmt.Errorf("session %s: %w", info.ID, err)
		}
		for _, st := range rp.Ended {
			rec.Tasks[st]++
		}
		if rp.Current != nil {
			rec.Tasks[protocol.StatusClaimed]++
		}
	}
	rec.Tokens, rec.CostUSD = rec.Usage.Tokens(), rec.Usage.CostUSD
	return rec, nil
}

// Transcript reads the session's memory as transcript entries, in order.
// A torn last line (a writer killed mid-write) is left out.
func (s *Session) Transcript(fn func(protocol.SessionEntry) error) error {
	f, err := os.Open(filepath.Join(s.Dir, MemoryFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<30)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var m MemoryRecord
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		e := protocol.SessionEntry{Type: protocol.SessionEntryType, TS: m.TS, Kind: m.Type, Task: m.Task, Status: m.Status,
			Follows: m.Follows, Message: m.Message, Usage: m.Usage, Summary: m.Summary, Reason: m.Reason, Iteration: m.Iteration}
		if m.TaskRec != nil {
			e.Title = m.TaskRec.Title
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", MemoryFile, err)
	}
	return nil
}
