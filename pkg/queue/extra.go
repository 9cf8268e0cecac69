package queue

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Fields may be added to the records of task-queue.json (DESIGN.md §3): a
// field this version does not know, added by hand, by a script or by a
// newer pg-queue, is kept as it was when the task or the document is
// written again. It travels in protocol.Task.Extra and header.Extra.

// knownKeys are the JSON names of a struct's fields.
func knownKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			for k := range knownKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys[strings.ToLower(name)] = true
		}
	}
	return keys
}

var (
	taskKeys   = sync.OnceValue(func() map[string]bool { return knownKeys(reflect.TypeFor[protocol.Task]()) })
	headerKeys = sync.OnceValue(func() map[string]bool {
		k := knownKeys(reflect.TypeFor[header]())
		k["tasks"] = true
		return k
	})
)

// unknownFields returns the members of the JSON object obj whose names
// are not in known, or nil when there are none (the common case costs one
// pass over the bytes and no allocation). Names are compared without case,
// as encoding/json matches them: "Status" fills the status field.
func unknownFields(obj []byte, known map[string]bool) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	eachMember(obj, func(raw, val []byte) {
		if known[string(raw)] { // (no allocation)
			return
		}
		key := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) { // as encoding/json reads it
			json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &key)
		}
		if known[strings.ToLower(key)] {
			return
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		// Compact: a task is one line of task-queue.json.
		var b bytes.Buffer
		if json.Compact(&b, val) != nil {
			b.Reset()
			b.Write(val)
		}
		out[key] = b.Bytes()
	})
	return out
}

// eachMember calls fn with the name (as written, escapes and all) and the
// value of each member of a valid JSON object.
func eachMember(obj []byte, fn func(key, val []byte)) {
	i := bytes.IndexByte(obj, '{')
	if i < 0 {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := skipString(obj, i)
		key := obj[i+1 : end-1]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		start := skipSpace(obj, i+1)
		stop := skipValue(obj, start)
		fn(key, bytes.TrimSpace(obj[start:stop]))
		i = skipSpace(obj, stop)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			i = skipString(b, i) - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// decodeTask decodes a stored task with the fields this version does not
// know.
func decodeTask(js []byte, t *protocol.Task) error {
	if err := json.Unmarshal(js, t); err != nil {
		return err
	}
	t.Extra = unknownFields(js, taskKeys())
	return nil
}

// withExtra appends the members of extra, in name order, to the encoded
// object obj (which ends with '}').
func withExtra(obj []byte, extra map[string]json.RawMessage) []byte {
	if len(extra) == 0 {
		return obj
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := bytes.TrimSuffix(obj, []byte{'}'})
	out = slices.Clip(out)
	for _, k := range keys {
		name, _ := json.Marshal(k)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, name...), ':'), extra[k]...)
	}
	return append(out, '}')
}

// EncodeTask is the JSON of a task as the queue stores it, with the fields
// this version does not know (one line, no newline, no HTML escapes).
func EncodeTask(t *protocol.Task) ([]byte, error) {
	b, err := jsonl.Marshal(t)
	if err != nil {
		return nil, err
	}
	return withExtra(bytes.TrimSuffix(b, []byte{'\n'}), t.Extra), nil
}
