package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gofrs/flock"
	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// A change reaches three files: task-queue.json (replaced by rename: the
// commit point), task-archive.jsonl and events.jsonl. A writer can be
// killed between the rename and the other two, so the header of each
// version says what the change added to them (header.Journal,
// header.ArchiveRewrite), and the next writer, under the team lock, first
// settles the version it loaded: it finishes what is missing. That costs
// nothing on the common path: the index is written only after a version is
// settled, so a version loaded through a matching index needs no look.
//
// (Appending to the journal before the rename instead would leave events
// of changes that never happened when the writer dies in between, and
// every reader would have to reconcile them.)

// archiveNextName is where a prune writing version gen puts the new
// archive until that version is committed.
func archiveNextName(gen int64) string {
	return "." + ArchiveFile + ".next-" + strconv.FormatInt(gen, 10)
}

// settle finishes the change that wrote the loaded version, when the
// writer did not: it renames the rewritten archive into place and appends
// the events missing from events.jsonl. Callers hold the team lock.
func (q *Queue) settle(s *state) error {
	if s.settled {
		return nil
	}
	next := filepath.Join(q.dir.Path(), archiveNextName(s.hdr.Generation))
	if s.hdr.ArchiveRewrite {
		if err := os.Rename(next, q.archivePath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("finish the archive rewrite: %w", err)
		}
	}
	// Rewrites of prunes killed before their commit.
	stale, _ := filepath.Glob(filepath.Join(q.dir.Path(), "."+ArchiveFile+".next-*"))
	for _, m := range stale {
		os.Remove(m)
	}
	if p := s.hdr.Journal; p != nil && len(p.Events) > 0 {
		lines := make([][]byte, 0, len(p.Events))
		for _, ev := range p.Events {
			var b bytes.Buffer
			if err := json.Compact(&b, ev); err != nil {
				return fmt.Errorf("task-queue.json: journal: %w", err)
			}
			lines = append(lines, b.Bytes())
		}
		missing, err := q.missingEvents(p.Offset, lines)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			var buf []byte
			for _, l := range missing {
				buf = append(append(buf, l...), '\n')
			}
			if err := jsonl.AppendRaw(q.dir.Events(), buf); err != nil {
				return fmt.Errorf("append the events of the last change: %w", err)
			}
		}
	}
	s.settled = true
	return nil
}

// missingEvents returns the tail of lines that events.jsonl does not hold
// after offset. The change appended its lines there in one write under the
// team lock; other tools may have appended lines around them, and a write
// cut short by a kill leaves a prefix of them.
func (q *Queue) missingEvents(offset int64, lines [][]byte) ([][]byte, error) {
	f, err := atomicfile.Open(q.dir.Events())
	if errors.Is(err, fs.ErrNotExist) {
		return lines, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open events.jsonl: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat events.jsonl: %w", err)
	}
	if fi.Size() <= offset {
		return lines, nil
	}
	data := make([]byte, fi.Size()-offset)
	if _, err := f.ReadAt(data, offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read events.jsonl: %w", err)
	}
	j := 0
	for j < len(lines) {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break // a torn last line does not count
		}
		if bytes.Equal(data[:nl], lines[j]) {
			j++
		}
		data = data[nl+1:]
	}
	return lines[j:], nil
}

// finishArchiveRewrite renames the archive a prune wrote for version gen
// into place, once that version is committed.
func (q *Queue) finishArchiveRewrite(gen int64) error {
	next := filepath.Join(q.dir.Path(), archiveNextName(gen))
	if err := os.Rename(next, q.archivePath()); err != nil {
		return fmt.Errorf("replace %s: %w", ArchiveFile, err)
	}
	if q.NoSync {
		return nil
	}
	return atomicfile.SyncDir(q.dir.Path())
}

// writeArchiveNext writes the new archive of a prune for version gen.
func (q *Queue) writeArchiveNext(gen int64, data []byte) error {
	path := filepath.Join(q.dir.Path(), archiveNextName(gen))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, teamdir.FileMode)
	if err != nil {
		return fmt.Errorf("write %s: %w", ArchiveFile, err)
	}
	_, err = f.Write(data)
	if err == nil && !q.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", ArchiveFile, err)
	}
	return nil
}

// eachLine calls fn for every non-blank line of a JSON Lines file; a
// missing file has none.
func eachLine(path string, fn func(line []byte) error) error {
	f, err := atomicfile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	dec := jsonl.NewDecoder(f, filepath.Base(path))
	for {
		line, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Base(path), err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// rebuildHeader restores what a task-queue.json without the queue's header
// lost (got holds what it did have): the next fencing token, which must
// exceed every token ever given; the counts of archived tasks; and the
// final status of finished tasks that live tasks depend on. It reads
// task-archive.jsonl and events.jsonl whole, but only for such a
// hand-made file, until the next change writes the header back.
func (s *state) rebuildHeader(dir string, got header) error {
	live := make(map[string]bool, len(s.entries))
	for _, e := range s.entries {
		live[e.id] = true
	}
	refs := map[string]bool{}
	for _, e := range s.entries {
		for _, d := range e.deps {
			if !live[d] {
				refs[d] = true
			}
		}
	}
	var maxTok int64
	archived := map[string]string{}
	err := eachLine(filepath.Join(dir, ArchiveFile), func(line []byte) error {
		var t struct {
			ID     string          `json:"id"`
			Status string          `json:"status"`
			Claim  *protocol.Claim `json:"claim"`
		}
		if json.Unmarshal(line, &t) != nil || t.ID == "" {
			return nil
		}
		archived[t.ID] = t.Status
		if t.Claim != nil {
			maxTok = max(maxTok, t.Claim.Token)
		}
		return nil
	})
	if err != nil {
		return err
	}
	last := map[string]string{} // the last status the journal gives a dependency
	err = eachLine(filepath.Join(dir, "events.jsonl"), func(line []byte) error {
		if !bytes.Contains(line, []byte(`"type":"task"`)) {
			return nil
		}
		var ev protocol.TaskEvent
		if json.Unmarshal(line, &ev) != nil || ev.Type != protocol.JournalTask {
			return nil
		}
		maxTok = max(maxTok, ev.Token)
		if refs[ev.Task] && ev.Status != "" {
			last[ev.Task] = ev.Status
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.hdr.NextToken = max(s.hdr.NextToken, maxTok+1)
	if got.Archived == nil {
		for id, st := range archived {
			if !live[id] {
				s.hdr.Archived[st]++
			}
		}
	}
	if got.FinishedDeps == nil {
		for d := range refs {
			st, ok := archived[d]
			if !ok {
				st, ok = last[d]
			}
			if c, known := statusCode(st); ok && known && finished(c) {
				s.hdr.FinishedDeps[d] = st
			}
		}
	}
	return nil
}

// Settle finishes the last change when its writer was killed before
// appending its events (or renaming a rewritten archive), as the next
// change would. It never waits for the team lock: when another process
// holds it, Settle does nothing and reports false (a writer settles what
// it loaded before its own change). It keeps no state cached.
func (q *Queue) Settle() (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, err := os.Stat(q.dir.Path()); errors.Is(err, fs.ErrNotExist) {
		return true, nil // no team yet: nothing to settle, and nothing to create
	}
	lk := flock.New(q.dir.Lock())
	ok, err := lk.TryLock()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", q.dir.Lock(), err)
	}
	if !ok {
		return false, nil
	}
	defer lk.Close()
	defer q.drop()
	s, err := q.current()
	if err != nil {
		return false, err
	}
	if err := q.settle(s); err != nil {
		return false, err
	}
	return true, nil
}

// SettleWhenQuiet is for readers that follow events.jsonl (pg-queue
// watch): a killed writer's events would otherwise reach them only at the
// next change. It settles at once, then each time task-queue.json has
// changed and stayed unchanged for quiet; a busy queue is settled by its
// own writers. A settle that finds the lock taken is tried again a period
// later. It runs until ctx ends; errors go to onErr.
func (q *Queue) SettleWhenQuiet(ctx context.Context, quiet time.Duration, onErr func(error)) {
	// pending: a version not known to be settled yet.
	settle := func() (pending bool) {
		done, err := q.Settle()
		if err != nil && onErr != nil {
			onErr(err)
		}
		return !done && err == nil
	}
	last, _ := q.stamp() // before the first settle, so no version slips between them
	changed := settle()
	t := time.NewTicker(quiet)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, _ := q.stamp()
		switch {
		case now != last:
			last, changed = now, true
		case changed:
			changed = settle()
		}
	}
}

// stamp identifies the current version of task-queue.json.
func (q *Queue) stamp() (fileStamp, error) {
	fi, err := os.Stat(q.dir.Queue())
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(fi), nil
}
