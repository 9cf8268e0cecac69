package dash

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Changes are what changed in the team directory since the last look.
type Changes struct {
	Team bool            // task-queue.json, events.jsonl, worker-*.json or *.velocity
	Logs map[string]bool // logs/<name> that changed
	Err  error           // the watcher failed; the dashboard falls back to polling
}

// watcher turns fsnotify events on the team directory and its logs
// directory into coalesced Changes. Bursts (a thousand log lines a second)
// become one pending set that the UI takes when it is ready for it.
type watcher struct {
	fs     *fsnotify.Watcher
	dir    teamdir.Dir
	notify chan struct{} // capacity 1: "something is pending"
	done   chan struct{}

	mu      sync.Mutex
	pending Changes
	logsOn  bool
}

// newWatcher watches dir; it fails when the directory does not exist or
// the system has no file notifications, and the caller polls instead.
func newWatcher(dir teamdir.Dir) (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fw.Add(dir.Path()); err != nil {
		fw.Close()
		return nil, err
	}
	w := &watcher{fs: fw, dir: dir, notify: make(chan struct{}, 1), done: make(chan struct{})}
	w.logsOn = fw.Add(filepath.Join(dir.Path(), teamdir.LogsDir)) == nil
	go w.run()
	return w, nil
}

func (w *watcher) run() {
	logs := filepath.Join(w.dir.Path(), teamdir.LogsDir)
	for {
		select {
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			w.event(ev, logs)
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.mu.Lock()
			w.pending.Err = err
			w.mu.Unlock()
			w.poke()
		}
	}
}

func (w *watcher) event(ev fsnotify.Event, logs string) {
	if ev.Op == fsnotify.Chmod {
		return
	}
	if ev.Name == w.dir.Path() && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
		// The team directory itself went: nothing more will be notified.
		w.mu.Lock()
		w.pending.Err = errors.New("the team directory was removed")
		w.mu.Unlock()
		w.poke()
		return
	}
	name := filepath.Base(ev.Name)
	if strings.Contains(name, ".tmp") || strings.HasPrefix(name, ".") {
		return // an atomic write in progress; its rename follows
	}
	w.mu.Lock()
	switch dir := filepath.Dir(ev.Name); {
	case dir == logs:
		if w.pending.Logs == nil {
			w.pending.Logs = map[string]bool{}
		}
		w.pending.Logs[name] = true
	case ev.Name == logs:
		// The logs directory appeared (or went): watch it and reread.
		if ev.Has(fsnotify.Create) && !w.logsOn {
			w.logsOn = w.fs.Add(logs) == nil
		}
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			w.logsOn = false
		}
		w.pending.Team = true
		if w.pending.Logs == nil {
			w.pending.Logs = map[string]bool{}
		}
		w.pending.Logs["*"] = true
	case name == teamdir.LockFile:
		w.mu.Unlock()
		return
	default:
		w.pending.Team = true
	}
	w.mu.Unlock()
	w.poke()
}

func (w *watcher) poke() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// wait blocks until something changed (or the watcher closed) and takes
// the pending changes.
func (w *watcher) wait() (Changes, bool) {
	select {
	case <-w.notify:
	case <-w.done:
		return Changes{}, false
	}
	return w.take()
}

// take returns what is pending without waiting.
func (w *watcher) take() (Changes, bool) {
	w.mu.Lock()
	c := w.pending
	w.pending = Changes{}
	w.mu.Unlock()
	select {
	case <-w.notify: // taken with it
	default:
	}
	return c, true
}

func (c Changes) merge(o Changes) Changes {
	c.Team = c.Team || o.Team
	if c.Err == nil {
		c.Err = o.Err
	}
	for k := range o.Logs {
		if c.Logs == nil {
			c.Logs = map[string]bool{}
		}
		c.Logs[k] = true
	}
	return c
}

func (w *watcher) close() {
	select {
	case <-w.done:
	default:
		close(w.done)
		w.fs.Close()
	}
}
