// Package jsonl reads and writes JSON Lines the way powerglide's team files
// need: appends guarded by flock with one write per batch so that `tail -f`
// never shows half a line, a strict decoder that names line numbers, and a
// follower with `tail -F` semantics.
package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/secrets"
)

// Marshal encodes v as one JSON line, newline included, without HTML
// escaping.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// NewEncoder returns an encoder that writes JSON Lines without HTML escaping.
func NewEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// Append encodes records as JSON lines and appends them to path under an
// exclusive flock, in a single write. The file is created when missing.
func Append(path string, records ...any) error {
	var buf []byte
	for _, r := range records {
		line, err := Marshal(r)
		if err != nil {
			return fmt.Errorf("append %s: %w", path, err)
		}
		buf = append(buf, line...)
	}
	return AppendRaw(path, buf)
}

// AppendRaw appends data, which must be whole newline-terminated lines, to
// path under an exclusive flock in a single write. Secrets in data (see
// package secrets) are redacted first: every journal powerglide keeps
// under its home is appended here or through AppendRedacted. When a
// previous writer left a last line without its newline (a full disk, a
// writer killed in the middle of its write), that line is ended first:
// kept when it is whole JSON, blanked with spaces when it is a torn
// fragment, so the file never shows a partial record as a line of its own.
func AppendRaw(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		return fmt.Errorf("append %s: data does not end with a newline", path)
	}
	return AppendRedacted(path, secrets.Redact(data))
}

// AppendRedacted is AppendRaw for data its caller has redacted already
// (secrets.Redact), because the caller keeps the redacted bytes too (the
// queue indexes its archive and keeps each change's journal in
// task-queue.json): each write path redacts once.
func AppendRedacted(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		return fmt.Errorf("append %s: data does not end with a newline", path)
	}
	// One descriptor to lock, look at the last byte and append: the flock
	// is the one other writers take through gofrs/flock on the same path.
	// 0600: the logs appended here (journals, memory, recordings) hold
	// conversation content.
	f, err := atomicfile.OpenAppend(path, 0o600)
	var refused *atomicfile.IrregularError
	if errors.As(err, &refused) {
		return err // it names the file
	}
	if err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	defer f.Close()
	if err := flockFile(f); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			if err := repairTail(path, st.Size()); err != nil {
				return fmt.Errorf("append %s: %w", path, err)
			}
			data = append([]byte{'\n'}, data...)
		}
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	return nil
}

// flockFile takes an exclusive flock on f, released when f is closed.
func flockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

// repairTail blanks with spaces the last line of a file of the given size,
// which lacks its newline and which the caller holds locked, unless it is
// whole JSON.
func repairTail(path string, size int64) error {
	r, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer r.Close()
	// Find the start of the last line, reading backwards.
	start := int64(-1)
	buf := make([]byte, 4096)
	for end := size; end > 0 && start < 0; {
		off := max(end-int64(len(buf)), 0)
		chunk := buf[:end-off]
		if _, err := r.ReadAt(chunk, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			start = off + int64(i) + 1
		} else if off == 0 {
			start = 0
		}
		end = off
	}
	tail := make([]byte, size-start)
	if _, err := r.ReadAt(tail, start); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if json.Valid(tail) {
		return nil
	}
	for i := range tail {
		tail[i] = ' '
	}
	_, err = r.WriteAt(tail, start)
	return err
}
