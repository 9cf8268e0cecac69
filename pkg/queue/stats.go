package queue

import (
	"bytes"
	"encoding/json"
	"io"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Stats summarises the queue (the record of `pg-queue stats`).
type Stats = protocol.QueueStats

// Throughput is the number of completed tasks over recent windows.
type Throughput = protocol.QueueThroughput

// Stats counts the tasks. It reads without taking the team lock.
func (q *Queue) Stats() (*Stats, error) {
	var st *Stats
	err := q.view(func(s *state) error {
		if err := s.all(); err != nil {
			return err
		}
		st = q.stats(s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.Throughput = q.throughput(st.TS)
	return st, nil
}

func (q *Queue) stats(s *state) *Stats {
	now := q.now()
	st := &Stats{Type: "stats", TS: now, Live: len(s.entries), NextToken: s.hdr.NextToken}
	for _, n := range s.hdr.Archived {
		st.Archived += n
	}
	st.Done, st.Failed, st.Cancelled = s.hdr.Archived[protocol.StatusDone], s.hdr.Archived[protocol.StatusFailed], s.hdr.Archived[protocol.StatusCancelled]
	// A dependency is dead when it can never be done: it failed, was
	// cancelled, is unknown, depends on a dead task, or lies on a
	// dependency cycle. Add refuses cycles, but a file edited by hand may
	// hold one: its tasks are stuck, so a swarm can still drain.
	dead := map[string]bool{}
	var isDead func(id string, depth int) bool
	isDead = func(id string, depth int) bool {
		if d, ok := dead[id]; ok {
			return d
		}
		dead[id] = true // met again while visiting it: a cycle
		code, ok := s.statusOf(id)
		res := !ok || code == stFailed || code == stCancelled
		if ok && !finished(code) && depth < 10000 {
			i, _ := s.index(id)
			for _, d := range s.entries[i].deps {
				if isDead(d, depth+1) {
					res = true
					break
				}
			}
		}
		dead[id] = res
		return res
	}
	nowNs := now.UnixNano()
	var oldest *entry
	for _, e := range s.entries {
		switch e.status {
		case stPending:
			st.Pending++
			if s.depsDone(e) {
				st.Claimable++
			} else {
				st.Blocked++
				for _, d := range e.deps {
					if isDead(d, 0) {
						st.Stuck++
						break
					}
				}
			}
			if oldest == nil || e.created < oldest.created {
				oldest = e
			}
		case stClaimed:
			st.Claimed++
			if e.until <= nowNs {
				st.Expired++
				st.Claimable++
			}
		case stDone:
			st.Done++
		case stFailed:
			st.Failed++
		case stCancelled:
			st.Cancelled++
		}
	}
	st.Drained = st.Claimed == 0 && st.Pending == st.Stuck
	if oldest != nil {
		st.OldestPending = oldest.id
		st.OldestPendingAge = float64(nowNs-oldest.created) / 1e9
	}
	return st
}

// throughput counts complete events in the last 15 minutes of the journal,
// reading at most its last 4 MiB.
func (q *Queue) throughput(now time.Time) Throughput {
	var tp Throughput
	f, err := atomicfile.Open(q.dir.Events())
	if err != nil {
		return tp
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tp
	}
	const window = 4 << 20
	off := max(fi.Size()-window, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return tp
	}
	if off > 0 {
		if i := indexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	for len(buf) > 0 {
		i := indexByte(buf, '\n')
		if i < 0 {
			break
		}
		line := buf[:i]
		buf = buf[i+1:]
		if !containsOp(line, `"op":"complete"`) {
			continue
		}
		var ev protocol.TaskEvent
		if json.Unmarshal(line, &ev) != nil || ev.Type != protocol.JournalTask {
			continue
		}
		age := now.Sub(ev.TS)
		if age < 0 || age > 15*time.Minute {
			continue
		}
		tp.Last15m++
		if age <= 5*time.Minute {
			tp.Last5m++
		}
		if age <= time.Minute {
			tp.Last1m++
		}
	}
	tp.PerMinute = float64(tp.Last5m) / 5
	return tp
}

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }

func containsOp(line []byte, op string) bool { return bytes.Contains(line, []byte(op)) }
