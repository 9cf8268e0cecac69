// Package teamdir names the files of a team directory,
// $POWERGLIDE_HOME/teams/<team>/ (DESIGN.md §3), and the other places under
// the data root.
package teamdir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File names inside a team directory. The seed's names are kept.
const (
	QueueFile  = "task-queue.json"
	EventsFile = "events.jsonl"
	LockFile   = "lock"
	BudgetFile = "budget.json"
	LogsDir    = "logs"
)

// Modes of everything the tools create under the data root. All of it may
// hold conversation content (prompts, messages, task titles and results,
// tool and terminal output), so it is private to the user: files 0600 in
// directories 0700. Team files too: readers (pg-dash, jq, tail -f) run as
// the same user as the workers. (The umask can only narrow these.)
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// validName is ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, checked by hand: the
// regexp cost every tool a few milliseconds of start-up to compile.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidName reports whether s can name a team, a worker or a session: it
// becomes part of a path, so no separators and no leading dot.
func ValidName(kind, s string) error {
	if !validName(s) {
		return fmt.Errorf("invalid %s name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", kind, s)
	}
	return nil
}

// Dir is one team's directory.
type Dir struct {
	Home string // the data root
	Team string
}

// New checks the team name and returns its directory.
func New(home, team string) (Dir, error) {
	if err := ValidName("team", team); err != nil {
		return Dir{}, err
	}
	return Dir{Home: home, Team: team}, nil
}

// Path is the team directory.
func (d Dir) Path() string { return filepath.Join(d.Home, "teams", d.Team) }

// Queue is task-queue.json.
func (d Dir) Queue() string { return filepath.Join(d.Path(), QueueFile) }

// Events is events.jsonl, the team's journal.
func (d Dir) Events() string { return filepath.Join(d.Path(), EventsFile) }

// Budget is budget.json, the team budget's ledger (package ledger).
func (d Dir) Budget() string { return filepath.Join(d.Path(), BudgetFile) }

// Lock is the flock target guarding the queue.
func (d Dir) Lock() string { return filepath.Join(d.Path(), LockFile) }

// Worker is worker-<n>.json.
func (d Dir) Worker(n string) string { return filepath.Join(d.Path(), "worker-"+n+".json") }

// Log is logs/worker-<n>.jsonl.
func (d Dir) Log(n string) string { return filepath.Join(d.Path(), LogsDir, "worker-"+n+".jsonl") }

// ErrNoTeam is returned by Exists for a team without a directory. It is
// also fs.ErrNotExist, as every team store reports a missing team.
var ErrNoTeam error = noTeam{}

type noTeam struct{}

func (noTeam) Error() string { return "not found" }

func (noTeam) Is(target error) bool { return target == fs.ErrNotExist }

// Exists reports, for commands that only read a team, whether its directory
// is there: a read must never create it, and an empty answer for a
// mistyped name would look like an idle team.
func (d Dir) Exists() error {
	st, err := os.Stat(d.Path())
	if err == nil && st.IsDir() {
		return nil
	}
	return fmt.Errorf("team %q %w: no directory %s", d.Team, ErrNoTeam, d.Path())
}

// Ensure creates the team directory and its logs directory (DirMode, the
// data root and teams/ too when missing) where no other user could change
// them (Check): it creates nothing in a directory that fails the check,
// and checks again what it made, so a data root or teams/ that another
// user created first (say in /tmp) is refused.
func (d Dir) Ensure() error {
	if err := d.Check(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(d.Path(), LogsDir), DirMode); err != nil {
		return fmt.Errorf("create team dir: %w", err)
	}
	return d.Check()
}

// Teams is the directory holding every team.
func Teams(home string) string { return filepath.Join(home, "teams") }

// Sessions is the directory of pg-loop sessions.
func Sessions(home string) string { return filepath.Join(home, "sessions") }

// Pty is the directory of pg-pty sessions.
func Pty(home string) string { return filepath.Join(home, "pty") }
