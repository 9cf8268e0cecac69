package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
)

func (q *Queue) archivePath() string { return filepath.Join(q.dir.Path(), ArchiveFile) }

func sortByUpdated(s *state, idx []int) {
	sort.SliceStable(idx, func(a, b int) bool { return s.entries[idx[a]].updated < s.entries[idx[b]].updated })
}

// archiveEntries moves the marked entries to task-archive.jsonl (appended
// and synced before task-queue.json drops them, so a crash in between
// leaves a task in both places, never in neither) and remembers the final
// status of those that live tasks still depend on.
func (q *Queue) archiveEntries(s *state, move map[int]bool, now time.Time, c *change) error {
	if err := s.all(); err != nil {
		return err
	}
	refs := map[string]bool{}
	for i, e := range s.entries {
		if !move[i] {
			for _, d := range e.deps {
				refs[d] = true
			}
		}
	}
	var buf []byte
	kept := make([]*entry, 0, len(s.entries)-len(move))
	for i, e := range s.entries {
		if !move[i] {
			kept = append(kept, e)
			continue
		}
		js, err := s.json(e)
		if err != nil {
			return err
		}
		buf = append(buf, js...)
		buf = append(buf, '\n')
		st := statusNames[e.status]
		s.hdr.Archived[st]++
		if refs[e.id] {
			s.hdr.FinishedDeps[e.id] = st
		}
		c.events = append(c.events, protocol.TaskEvent{Type: protocol.JournalTask, TS: now, Op: "archive",
			Task: e.id, Status: st, Worker: e.worker, Token: e.token})
	}
	for id := range s.hdr.FinishedDeps {
		if !refs[id] {
			delete(s.hdr.FinishedDeps, id)
		}
	}
	// Redacted before it is indexed (task lines written by a process that
	// did not know a secret may hold it).
	buf = secrets.Redact(buf)
	if c.rewrite {
		// A prune replaces the archive in this change: the tasks go
		// into its new content.
		c.archiveData = append(c.archiveData, buf...)
	} else if err := q.appendArchive(buf); err != nil {
		return err
	}
	s.entries, s.byID = kept, nil
	return nil
}

// appendArchive appends whole lines, redacted already, to the archive,
// synced unless NoSync. Callers hold the team lock.
func (q *Queue) appendArchive(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	before, existed := q.archiveStamp()
	if err := jsonl.AppendRedacted(q.archivePath(), data); err != nil {
		return err
	}
	if !q.NoSync {
		f, err := os.OpenFile(q.archivePath(), os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("sync %s: %w", ArchiveFile, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", ArchiveFile, err)
		}
	}
	q.indexAppended(before, existed, data)
	return nil
}

// archiveSize is the size of task-archive.jsonl, 0 when there is none.
func (q *Queue) archiveSize() (int64, error) {
	fi, err := os.Stat(q.archivePath())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", ArchiveFile, err)
	}
	return fi.Size(), nil
}

// trimArchive cuts off what a writer killed before its commit appended to
// task-archive.jsonl: tasks its change would have archived, which are
// still live in the loaded version (and would be archived again). The
// archive thus holds each task once, for jq as for this package. Callers
// hold the team lock; the version is settled (a committed prune's rewrite
// is in place).
func (q *Queue) trimArchive(s *state) error {
	if s.hdr.ArchiveSize == nil {
		return nil
	}
	size, err := q.archiveSize()
	if err != nil || size <= *s.hdr.ArchiveSize {
		return err
	}
	f, err := os.OpenFile(q.archivePath(), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("trim %s: %w", ArchiveFile, err)
	}
	err = f.Truncate(*s.hdr.ArchiveSize)
	if err == nil && !q.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("trim %s: %w", ArchiveFile, err)
	}
	return nil
}

// archivedID reads the id of an archive line without decoding it: tasks
// are written by this package with "id" first.
func archivedID(line []byte) (string, bool) {
	const pre = `{"id":"`
	if !bytes.HasPrefix(line, []byte(pre)) {
		return "", false
	}
	rest := line[len(pre):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// eachArchiveLine calls fn for every non-blank line of the archive.
func (q *Queue) eachArchiveLine(fn func(line []byte) error) error {
	f, err := atomicfile.Open(q.archivePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", ArchiveFile, err)
	}
	defer f.Close()
	dec := jsonl.NewDecoder(f, ArchiveFile)
	for {
		line, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", ArchiveFile, err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// eachArchived decodes every archived task.
func (q *Queue) eachArchived(fn func(t *protocol.Task)) error {
	return q.eachArchiveLine(func(line []byte) error {
		var t protocol.Task
		if decodeTask(line, &t) == nil && t.ID != "" {
			normalize(&t)
			fn(&t)
		}
		return nil
	})
}

// Archive moves finished tasks (done, failed, cancelled) whose last change
// is at least olderThan ago from task-queue.json to task-archive.jsonl. It
// returns how many moved.
func (q *Queue) Archive(olderThan time.Duration) (int, error) {
	n := 0
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		if err := s.all(); err != nil {
			return err
		}
		cut := now.Add(-olderThan).UnixNano()
		move := map[int]bool{}
		for i, e := range s.entries {
			if finished(e.status) && e.updated <= cut {
				move[i] = true
			}
		}
		n = len(move)
		if n == 0 {
			return nil
		}
		return q.archiveEntries(s, move, now, c)
	})
	return n, err
}

// Prune deletes finished tasks whose last change is at least olderThan ago,
// from task-queue.json and from task-archive.jsonl. Live tasks that depend
// on a pruned task keep its final status. It returns how many went.
func (q *Queue) Prune(olderThan time.Duration) (int, error) {
	n := 0
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		if err := s.all(); err != nil {
			return err
		}
		cut := now.Add(-olderThan)
		refs := map[string]bool{}
		for _, e := range s.entries {
			if !finished(e.status) || e.updated > cut.UnixNano() {
				for _, d := range e.deps {
					refs[d] = true
				}
			}
		}
		seen := map[string]bool{}
		ev := func(id, st, worker string, token int64) {
			seen[id] = true
			c.events = append(c.events, protocol.TaskEvent{Type: protocol.JournalTask, TS: now, Op: "prune",
				Task: id, Status: st, Worker: worker, Token: token})
			if refs[id] {
				s.hdr.FinishedDeps[id] = st
			}
		}
		// The archive first: rewritten without the old tasks. A task
		// may be there twice, or also live, after a writer was killed
		// between archiving and its commit; only committed archiving
		// counted it, once.
		var keep []byte
		changed := false
		err := q.eachArchiveLine(func(line []byte) error {
			var t struct {
				ID        string          `json:"id"`
				Status    string          `json:"status"`
				UpdatedAt time.Time       `json:"updated_at"`
				Claim     *protocol.Claim `json:"claim"`
			}
			if json.Unmarshal(line, &t) != nil || t.ID == "" {
				changed = true // drop torn lines
				return nil
			}
			if _, live := s.index(t.ID); live || seen[t.ID] {
				changed = true // the live task is the real one
				return nil
			}
			if t.UpdatedAt.After(cut) {
				seen[t.ID] = true // kept once (an older archive may hold a copy)
				keep = append(append(keep, line...), '\n')
				return nil
			}
			changed = true
			var w string
			var tok int64
			if t.Claim != nil {
				w, tok = t.Claim.Worker, t.Claim.Token
			}
			if s.hdr.Archived[t.Status] > 0 {
				s.hdr.Archived[t.Status]--
			}
			ev(t.ID, t.Status, w, tok)
			return nil
		})
		if err != nil {
			return err
		}
		kept := s.entries[:0:0]
		for _, e := range s.entries {
			if finished(e.status) && e.updated <= cut.UnixNano() {
				ev(e.id, statusNames[e.status], e.worker, e.token)
				continue
			}
			kept = append(kept, e)
		}
		for id := range s.hdr.FinishedDeps {
			if !refs[id] {
				delete(s.hdr.FinishedDeps, id)
			}
		}
		n = len(c.events)
		if changed {
			// Written at the commit, so that the archive loses these
			// tasks only with the version that records their events.
			c.rewrite, c.archiveData = true, keep
			if keep == nil {
				c.archiveData = []byte{}
			}
		}
		s.entries, s.byID = kept, nil
		return nil
	})
	return n, err
}
