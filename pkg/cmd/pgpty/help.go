package pgpty

// Detailed help of each command (kong's HelpProvider): shown by --help and
// in the man page.

// Help details run.
func (c *RunCmd) Help() string {
	return `The command runs on a new pseudo-terminal (TERM=xterm-256color unless --term says otherwise) and its output is copied to stdout as it comes, byte for byte: the terminal turns \n into \r\n, and what is typed is echoed, as on a real terminal. pg-pty exits with the command's exit code, 128+n when signal n killed it.

The run ends when the command has exited and its output has been drained, even if a grandchild still holds the terminal open (the drain stops after 150 ms without output, 3 s at most).

Input: --input TEXT is typed, else stdin is forwarded; at its end pg-pty types Ctrl-D (end-of-file) once the command has read what came before. When stdin is a terminal it is put in raw mode and every key goes to the command.

--json prints one record instead: {"type":"run", "command", "exit_code", "signal", "timed_out", "duration_ms", "output", "output_bytes", "truncated"}; output keeps the head and tail of at most --max-output bytes.

Examples:
  $ pg-pty run -- ls --color=auto
  $ pg-pty run --timeout 30s --json -- make test
  $ pg-pty run --input $'print(6*7)\n' -- python3 -q`
}

// Help details start.
func (c *StartCmd) Help() string {
	return `A detached holder process (pg-pty itself, in its own session) owns the terminal and outlives this call. The session's files are in $POWERGLIDE_HOME/pty/NAME/: session.json (the state, replaced atomically), output.log (all output, appended; capped by --max-output: past the cap the oldest output is discarded by punching a hole at the start of the file, so it keeps its size and every offset stays valid, and the disk holds about the last 64 MiB), screen.json (the last screen, once the program ended), sock (the holder's unix socket) and holder.log. The name must be new: a session keeps its name until pg-pty clean removes it.

Prints the session record ({"type":"session",...}; JSON unless stdout is a terminal).

Examples:
  $ pg-pty start sh -- bash -i
  $ pg-pty start py --cols 120 -- python3 -q
  $ pg-pty start log --max-output 1048576 -- tail -f /var/log/syslog`
}

// Help details send.
func (c *SendCmd) Help() string {
	return `TEXT is typed as is, then the --keys in order. Nothing presses Enter for you: add --keys Enter or -e. Cursor keys follow the program's cursor mode (full-screen programs switch to application mode).

Examples:
  $ pg-pty send sh 'ls -l' --keys Enter
  $ pg-pty send sh --keys C-c
  $ pg-pty send vi --keys Esc,:,w,q,Enter`
}

// Help details read.
func (c *ReadCmd) Help() string {
	return `Offsets are byte offsets into output.log. Without --since, reading starts where the previous read of the session ended (0 at first).

With --wait, read blocks until the Go regular expression matches the raw output after the offset (escape sequences included, lines end in \r\n); with --plain it matches, and prints, the text without escape sequences (lines end in \n), as a person reads it. Offsets stay byte offsets into output.log either way. Output the --max-output cap discarded is skipped: the record's offset is then where the data starts, and skipped says how many bytes were passed over. The data then ends right after the match, expect-style, so the next read continues from there. When --timeout passes first read exits 124, and when the program ends first it exits 1; either way it prints what it read and leaves the read position where it was.

--json prints one record: {"type":"output","name","data","offset","next_offset","matched"}.

Examples:
  $ pg-pty read sh
  $ pg-pty read sh --since 0 --json
  $ pg-pty read py --wait '>>> $' --timeout 10s --json
  $ pg-pty read build --plain --wait 'PASS\n' --timeout 5m`
}

// Help details screen.
func (c *ScreenCmd) Help() string {
	return `The screen comes from a VT emulator fed with the program's output: the holder's while the program runs, the last screen after it ended (a replay of output.log if the holder died). Rows are printed without trailing blanks; --json adds the size and the cursor (zero-based): {"type":"screen", "name", "cols", "rows", "cursor":{"row","col"}, "lines":[...]}.

Examples:
  $ pg-pty screen vi
  $ pg-pty screen vi --json | jq -r '.lines[]'`
}

// Help details wait.
func (c *WaitCmd) Help() string {
	return `Exits with the program's code (128+n when signal n killed it), 124 when --timeout passes first, and 1 when the session is dead (its holder died, so the program's end is unknown).

Examples:
  $ pg-pty wait build; echo $?
  $ pg-pty wait build --timeout 5m --json`
}

// Help details kill.
func (c *KillCmd) Help() string {
	return `The signal (default SIGHUP, as when a terminal closes) goes to the program's process group and to the other process groups of its terminal session, such as an interactive shell's jobs. SIGKILL follows when the program has not ended after --grace. The holder then records the end and exits (a holder stopped by SIGSTOP or SIGTSTP is sent SIGCONT so it can); the session's files stay until clean. A dead session's orphaned program is killed too.

Examples:
  $ pg-pty kill sh
  $ pg-pty kill sh --signal KILL`
}

// Help details status.
func (c *StatusCmd) Help() string {
	return `Status is running, exited (with exit_code, and signal when one ended it) or dead: the holder process is gone without recording the program's end (checked by pid and process start time, never by pid alone), or unresponsive: the holder lives but does not answer within 3 seconds (stopped or hung); send, screen and resize then fail with "holder pid N not responding" after 10 seconds.

About output.log: output_bytes is all the program printed; output_max is the cap and output_start the first offset still kept (older output was discarded). output_lost and output_error count and name output that could not be saved (a full disk, a file size limit), and errors lists other writes the holder could not make (terminal replies, the final screen.json). The holder answers these live, so status tells them even when the disk is too full to update session.json.

Examples:
  $ pg-pty status sh
  $ pg-pty status sh --json | jq .status`
}

// Help details clean.
func (c *CleanCmd) Help() string {
	return `Removes the named sessions, or every session that is not running, with their files. A running session is refused unless --force, which kills it first.

Examples:
  $ pg-pty clean
  $ pg-pty clean sh --force`
}

// Help details list.
func (c *ListCmd) Help() string {
	return `Examples:
  $ pg-pty list
  $ pg-pty list --jq 'select(.status == "running") | .name' -r`
}

// Help details resize.
func (c *ResizeCmd) Help() string {
	return `The program gets SIGWINCH and the emulated screen takes the new size.

Example:
  $ pg-pty resize vi --cols 132 --rows 43`
}
