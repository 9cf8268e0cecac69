package proc

import (
	"errors"
	"fmt"
	"os"
)

// ErrRefused marks a signal refused because its target is a process no
// tool of ours starts (see Guard).
var ErrRefused = errors.New("refused")

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRefused}, a...)...)
}

// lineage is the caller and its ancestors up to (not including) pid 1,
// with their process groups, and the caller's session.
type lineage struct {
	pids   map[int]Stat
	groups map[int]bool
	sid    int // the caller's session: its leader and that leader's group
}

func ancestry() lineage {
	l := lineage{pids: map[int]Stat{}, groups: map[int]bool{}}
	for pid := os.Getpid(); pid > 1; {
		s, err := ReadStat(pid)
		if err != nil {
			break
		}
		if _, seen := l.pids[pid]; seen {
			break
		}
		l.pids[pid] = s
		l.groups[s.PGID] = true
		if pid == os.Getpid() {
			l.sid = s.SID
		}
		pid = s.PPID
	}
	return l
}

// Guard says why pid must never be signalled, or nil: pids 1 and below
// (pid 1 is init, 0 and -1 name groups or everything to kill(2)), the
// caller itself and its ancestors (a record pointing at them would make a
// watcher kill itself or the shell that runs it).
func Guard(pid int) error {
	return ancestry().guard(pid)
}

// Guards is Guard for many pids against one reading of the caller's
// ancestry: walking it reads a /proc file per ancestor, and a watch pass
// over 256 worker records spent three quarters of its time walking it
// again for each (BenchmarkPass). It is for telling which records to
// leave alone during a pass; a signal checks the ancestry afresh
// (Signaler).
type Guards struct{ l *lineage }

// Guard is the package's Guard against the ancestry read at the first
// call.
func (g *Guards) Guard(pid int) error {
	if g.l == nil {
		l := ancestry()
		g.l = &l
	}
	return g.l.guard(pid)
}

func (l lineage) guard(pid int) error {
	switch {
	case pid <= 1:
		return refuse("pid %d is not a process we started (pids 1 and below are never signalled)", pid)
	case pid == os.Getpid():
		return refuse("pid %d is this process", pid)
	}
	if _, ok := l.pids[pid]; ok {
		return refuse("pid %d is an ancestor of this process", pid)
	}
	if pid == l.sid {
		// The leader of our session need not be an ancestor (a shell
		// that started us in the background and moved on), and it is
		// never a process we started.
		return refuse("pid %d leads this process's session", pid)
	}
	return nil
}

// guardGroup says why process group pgid must never be signalled as a
// whole: groups 1 and below, and the group of the caller or of any of its
// ancestors (signalling it would reach them).
func (l lineage) guardGroup(pgid int) error {
	switch {
	case pgid <= 1:
		return refuse("process group %d is not one we started (groups 1 and below are never signalled)", pgid)
	case l.groups[pgid]:
		return refuse("process group %d holds this process or one of its ancestors", pgid)
	case pgid == l.sid:
		return refuse("process group %d is that of this process's session leader", pgid)
	}
	return nil
}

// LoginShell reports whether s leads a session that has a controlling
// terminal: an interactive shell of a terminal, tmux pane or ssh login.
// Workers are never that (pg-monitor run starts each in a new process
// group of its own session, cron in a session without a terminal, a
// shell runs a script in a process group of its own), so a worker
// record naming one is a mistake (`pg-monitor beat --pid $$` typed at a
// prompt) that must not lead to the terminal being killed later.
func LoginShell(s Stat) bool { return s.SID == s.PID && s.TTY != 0 }

// CheckWorker says why pid cannot be a worker's process as recorded in
// worker-<n>.json, or nil. The caller's ancestors are allowed (`beat --pid
// $$` names the shell that runs pg-monitor) unless they sit above the
// caller's session (a terminal emulator, sshd, tmux) or are the login
// shell of its terminal.
func CheckWorker(pid int) error {
	if pid <= 1 {
		return refuse("pid %d cannot be a worker (pids 1 and below are never signalled)", pid)
	}
	s, err := ReadStat(pid)
	if err != nil {
		return err
	}
	if !s.Alive() {
		return ErrGone
	}
	if LoginShell(s) {
		return refuse("pid %d (%s) leads a terminal session: it is a login shell, not a worker; run the worker as a script and pass its $$", pid, s.Comm)
	}
	l := ancestry()
	if _, ok := l.pids[pid]; ok {
		if self, ok := l.pids[os.Getpid()]; ok && s.SID != self.SID {
			return refuse("pid %d (%s) is an ancestor of this process outside its session, not a worker", pid, s.Comm)
		}
	}
	return nil
}
