// Package atomicfile replaces files so that a reader sees either the old
// content or the new, never a mix, even when the writer is killed mid-way:
// write a temporary file in the same directory, fsync it, rename it over the
// target and fsync the directory. It also opens them again (Open, ReadFile,
// OpenAppend) only when they are regular files, not through links and
// without blocking: see read.go.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/powerglide/powerglide/pkg/secrets"
)

// WriteFile atomically replaces path with data, secrets redacted (see
// package secrets): the records powerglide keeps under its home (worker
// records, session.json, pipeline state, pty state) are written here.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteRedacted(path, secrets.Redact(data), perm)
}

// WriteRedacted is WriteFile for data its caller has redacted already
// (secrets.Redact), because the caller shows the redacted content too (a
// terminal's screen): each write path redacts once.
func WriteRedacted(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Write atomically replaces path with what fill writes to the temporary file.
func Write(path string, perm os.FileMode, fill func(*os.File) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = fill(tmp); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("replace %s: sync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that a rename or create in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
