package queue

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"hash/crc32"
	"os"
	"strings"
	"unsafe"
)

// task-queue.idx holds, for each live task in file order, what scheduling
// needs (id, status, priority, attempts, claim, times, dependencies) and
// the length of its line in task-queue.json. Offsets are not stored: the
// file is the header line, then each task followed by ",\n" (the last by
// "\n"), so they are sums of the lengths. That keeps the record of a task
// that did not change the same bytes from one version to the next: a
// change copies the records around the tasks it changed, and a call that
// reads one task or scans for a claim walks the records in place instead
// of decoding them all (lazyIndex).
var indexMagic = []byte("PGQIDX2\n")

// lazyIndex is task-queue.idx as read, kept encoded: mapped, not read
// into memory (a fresh process pays for every page it allocates). Strings
// of entries walked in place point into the mapping, which close unmaps:
// they must not outlive the state (materialize copies them).
type lazyIndex struct {
	data  []byte // the records
	count int
	base  int            // offset of the first task in task-queue.json
	patch map[int]*entry // changed entries, by position
	unmap func()
}

func (l *lazyIndex) close() {
	if l != nil && l.unmap != nil {
		l.unmap()
		l.unmap = nil
	}
}

// readIndex returns the index when it describes exactly the given version
// of task-queue.json, whose first task is at base.
func readIndex(path string, gen int64, st fileStamp, base int) (*lazyIndex, bool) {
	b, unmap, err := mapFile(path)
	if err != nil {
		return nil, false
	}
	l, ok := parseIndex(b, gen, st, base)
	if !ok {
		unmap()
		return nil, false
	}
	l.unmap = unmap
	return l, true
}

// checkedIndex returns a reader over the body of an index file when it
// starts with magic and its CRC-32C trailer matches.
func checkedIndex(b, magic []byte) (*indexReader, bool) {
	if len(b) < len(magic)+4 || !bytes.HasPrefix(b, magic) {
		return nil, false
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable()) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, false
	}
	rest := body[len(magic):]
	if len(rest) == 0 {
		return nil, false
	}
	return &indexReader{b: unsafe.String(&rest[0], len(rest))}, true
}

// remaining returns the unread bytes. checkedIndex made the reader over a
// byte slice, so they are that slice's tail, not a copy.
func (r *indexReader) remaining() []byte {
	return unsafe.Slice(unsafe.StringData(r.b), len(r.b))
}

func parseIndex(b []byte, gen int64, st fileStamp, base int) (*lazyIndex, bool) {
	r, ok := checkedIndex(b, indexMagic)
	if !ok {
		return nil, false
	}
	if r.varint() != gen || r.varint() != st.ino || r.varint() != st.size || r.varint() != st.mtime || r.varint() != int64(base) {
		return nil, false
	}
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		return nil, false
	}
	return &lazyIndex{data: r.remaining(), count: int(n), base: base}, true
}

// record decodes the record at r into e; strings point into the index.
// Dependencies are decoded only withDeps; it reports whether there are any.
func record(r *indexReader, e *entry, withDeps bool) (hasDeps bool) {
	e.id, e.status = r.str(), r.byte()
	e.priority, e.attempts, e.maxAttempts = r.varint(), r.varint(), r.varint()
	e.token, e.until, e.created, e.updated = r.varint(), r.varint(), r.varint(), r.varint()
	e.n = int(r.varint())
	e.worker = r.str()
	e.deps, e.raw = nil, nil
	nd := r.uvarint()
	if nd > uint64(len(r.b)) {
		r.bad = true
		return false
	}
	if withDeps && nd > 0 {
		e.deps = make([]string, nd)
		for j := range e.deps {
			e.deps[j] = r.str()
		}
	} else {
		for range nd {
			r.str()
		}
	}
	return nd > 0
}

// skipRecord skips the record at r and returns its line length.
func skipRecord(r *indexReader) (n int) {
	r.str()
	r.byte()
	for range 7 {
		r.uvarint()
	}
	n = int(r.varint())
	r.str()
	nd := r.uvarint()
	for range nd {
		if r.bad {
			break
		}
		r.str()
	}
	return n
}

// each calls fn for every entry in file order, patched entries in place of
// their records, with off set; e is only valid during the call (copy it
// to keep it), and has its dependencies only withDeps. It stops when fn
// returns false, and reports false when the index is malformed.
func (l *lazyIndex) each(size int64, withDeps bool, fn func(i int, e *entry, hasDeps bool) bool) bool {
	if l.count == 0 {
		return len(l.data) == 0
	}
	r := &indexReader{b: unsafe.String(&l.data[0], len(l.data))}
	off := l.base
	var scratch, patched entry
	for i := range l.count {
		e := &scratch
		hasDeps := record(r, e, withDeps)
		if p := l.patch[i]; p != nil {
			// The change, at the place of the line it replaces.
			patched = *p
			patched.n = scratch.n
			e, hasDeps = &patched, len(p.deps) > 0
		}
		if r.bad || e.n <= 0 || int64(off+e.n) > size {
			return false
		}
		e.off = off
		off += e.n + 2
		if !fn(i, e, hasDeps) {
			return true
		}
	}
	return !r.bad && len(r.b) == 0
}

// materialize decodes every entry.
func (l *lazyIndex) materialize(size int64) ([]*entry, bool) {
	backing := make([]entry, l.count)
	entries := make([]*entry, l.count)
	ok := l.each(size, true, func(i int, e *entry, _ bool) bool {
		backing[i] = *e
		b := &backing[i]
		if l.patch[i] == nil { // strings into the mapping: copied
			b.id, b.worker = strings.Clone(b.id), strings.Clone(b.worker)
			for j, d := range b.deps {
				b.deps[j] = strings.Clone(d)
			}
		}
		entries[i] = b
		return true
	})
	if !ok {
		return nil, false
	}
	if n := len(entries); n > 0 {
		last := entries[n-1]
		if int64(last.off+last.n+1+len(tasksClose)) != size {
			return nil, false
		}
	} else if int64(l.base+len(tasksClose)) != size {
		return nil, false
	}
	return entries, true
}

func appendRecord(b []byte, e *entry) []byte {
	b = appendString(b, e.id)
	b = append(b, e.status)
	for _, v := range [...]int64{e.priority, e.attempts, e.maxAttempts, e.token, e.until, e.created, e.updated, int64(e.n)} {
		b = binary.AppendVarint(b, v)
	}
	b = appendString(b, e.worker)
	b = binary.AppendUvarint(b, uint64(len(e.deps)))
	for _, d := range e.deps {
		b = appendString(b, d)
	}
	return b
}

// writeIndex writes the index of a settled version: entries, or when they
// are not materialized, the records of l with its patches.
func writeIndex(path string, gen int64, st fileStamp, base int, entries []*entry, l *lazyIndex) error {
	// Written by rename but not synced: after a power loss the checksum or
	// the stamp tells a stale or torn index, which is then rebuilt.
	return replaceNoSync(path, teamdir.FileMode, func(f *os.File) error {
		w := &crcWriter{w: bufio.NewWriterSize(f, 32<<10)}
		count := len(entries)
		if l != nil {
			count = l.count
		}
		b := make([]byte, 0, 256)
		b = append(b, indexMagic...)
		for _, v := range [...]int64{gen, st.ino, st.size, st.mtime, int64(base)} {
			b = binary.AppendVarint(b, v)
		}
		b = binary.AppendUvarint(b, uint64(count))
		w.write(b)
		if l == nil {
			for _, e := range entries {
				w.write(appendRecord(b[:0], e))
			}
		} else if l.count > 0 {
			// Copy the runs of records between patched ones.
			r := &indexReader{b: unsafe.String(&l.data[0], len(l.data))}
			start := 0
			for i := range l.count {
				at := len(l.data) - len(r.b)
				skipRecord(r)
				if p := l.patch[i]; p != nil {
					// p.n is the length of its line in the version
					// written (save sets it).
					w.write(l.data[start:at])
					w.write(appendRecord(b[:0], p))
					start = len(l.data) - len(r.b)
				}
			}
			w.write(l.data[start:])
		}
		w.w.Write(binary.LittleEndian.AppendUint32(b[:0], w.crc))
		return w.w.Flush()
	})
}

// crcWriter writes through a buffer and checksums what it wrote.
type crcWriter struct {
	w   *bufio.Writer
	crc uint32
}

func (c *crcWriter) write(b []byte) {
	c.crc = crc32.Update(c.crc, crcTable(), b)
	c.w.Write(b)
}
