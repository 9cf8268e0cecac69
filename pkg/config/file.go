package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

type fileEntry struct {
	key  string
	line int
	raw  json.RawMessage
}

// parseFile reads the top-level object of a config file, keeping the line
// of every key so errors can name it.
func parseFile(path string, data []byte) ([]fileEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n")) }
	fail := func(off int64, key string, err error) error {
		return &InputError{Where: fmt.Sprintf("%s:%d", path, lineAt(off)), Key: key, Err: err}
	}
	syntax := func(err error, key string) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fail(se.Offset, key, fmt.Errorf("invalid JSON: %v", se))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(int64(len(data)), key, errors.New("invalid JSON: unexpected end of file"))
		}
		return fail(dec.InputOffset(), key, fmt.Errorf("invalid JSON: %v", err))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil // an empty file, say one made by touch, sets nothing
	}
	// after names the last key read, so a syntax error between keys
	// (a stray comma, a missing quote) still points at one.
	after := func(err error, last string) error {
		e := syntax(err, "")
		if ie, ok := e.(*InputError); ok && last != "" {
			ie.Err = fmt.Errorf("after key %q: %w", last, ie.Err)
		}
		return e
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, syntax(err, "")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fail(0, "", errors.New("the file must hold one JSON object"))
	}
	var out []fileEntry
	seen := map[string]bool{}
	last := ""
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, after(err, last)
		}
		key, _ := tok.(string)
		keyOff := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntax(err, key)
		}
		if _, ok := Lookup(key); !ok {
			return nil, fail(keyOff, key, errors.New("unknown key"))
		}
		if seen[key] {
			return nil, fail(keyOff, key, errors.New("key set twice"))
		}
		seen[key] = true
		last = key
		out = append(out, fileEntry{key: key, line: lineAt(keyOff), raw: raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, after(err, last)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(dec.InputOffset(), "", errors.New("unexpected data after the JSON object"))
	}
	return out, nil
}
