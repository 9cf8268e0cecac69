// Package jsonl reads and writes JSON Lines the way powerglide's team files
// need: appends guarded by flock with one write per batch so that `tail -f`
// never shows half a line, a strict decoder that names line numbers, and a
// follower with `tail -F` semantics.
package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/gofrs/flock"
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
// path under an exclusive flock in a single write. When a previous writer
// left a line without its newline (a full disk, a crash of a foreign
// writer), a newline is added first so the damage stays on its own line.
func AppendRaw(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		return fmt.Errorf("append %s: data does not end with a newline", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	defer f.Close()
	lock := flock.New(path)
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer lock.Unlock()
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if r, err := os.Open(path); err == nil {
			if _, err := r.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
				data = append([]byte{'\n'}, data...)
			}
			r.Close()
		}
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	return nil
}
