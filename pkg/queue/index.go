package queue

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"unsafe"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/teamdir"
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

// lazyIndex is task-queue.idx as read, kept encoded: a call that reads
// one task or scans for a claim walks the records in place instead of
// decoding them all. The records are in memory (readCache), so strings of
// entries walked in place are substrings of data and live as long as they
// are used; a file truncated or replaced under a reader cannot reach them.
type lazyIndex struct {
	raw   []byte // the records, for copying them into the next version
	data  string // the same bytes, for reading them
	count int
	base  int            // offset of the first task in task-queue.json
	patch map[int]*entry // changed entries, by position
}

// readIndex returns the index when it describes exactly the given version
// of task-queue.json, whose first task is at base.
func readIndex(path string, gen int64, st fileStamp, base int) (*lazyIndex, bool) {
	b, s, err := readCache(path)
	if err != nil {
		return nil, false
	}
	return parseIndex(b, s, gen, st, base)
}

// readCache reads a cache file (task-queue.idx, task-archive.idx) into
// memory and returns its bytes twice: as a string for readers, whose ids
// and worker names are then substrings instead of an allocation each, and
// as the same bytes for checksums and copies. The string view is sound
// because nothing writes the buffer after the read: it is made here and
// only ever read. Being heap memory, it lives as long as any substring of
// it does, whatever happens to the file.
func readCache(path string) ([]byte, string, error) {
	b, err := atomicfile.ReadFile(path, 0)
	if err != nil || len(b) == 0 {
		return nil, "", err
	}
	return b, unsafe.String(&b[0], len(b)), nil
}

// checkedIndex returns a reader over the body of an index file (b, and s
// the same bytes as a string) when it starts with magic and its CRC-32C
// trailer matches.
func checkedIndex(b []byte, s string, magic []byte) (*indexReader, bool) {
	if len(b) < len(magic)+4 || !bytes.HasPrefix(b, magic) {
		return nil, false
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable()) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, false
	}
	if len(body) == len(magic) {
		return nil, false
	}
	return &indexReader{b: s[len(magic) : len(s)-4], end: len(body)}, true
}

// remaining returns the unread bytes of b, the file the reader was made
// over by checkedIndex, as bytes and as a string.
func (r *indexReader) remaining(b []byte) ([]byte, string) {
	return b[r.end-len(r.b) : r.end], r.b
}

func parseIndex(b []byte, s string, gen int64, st fileStamp, base int) (*lazyIndex, bool) {
	r, ok := checkedIndex(b, s, indexMagic)
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
	raw, data := r.remaining(b)
	return &lazyIndex{raw: raw, data: data, count: int(n), base: base}, true
}

// record decodes the record at r into e; strings are substrings of the
// index.
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
	r := &indexReader{b: l.data}
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
		entries[i] = &backing[i]
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
			r := &indexReader{b: l.data}
			start := 0
			for i := range l.count {
				at := len(l.data) - len(r.b)
				skipRecord(r)
				if p := l.patch[i]; p != nil {
					// p.n is the length of its line in the version
					// written (save sets it).
					w.write(l.raw[start:at])
					w.write(appendRecord(b[:0], p))
					start = len(l.data) - len(r.b)
				}
			}
			w.write(l.raw[start:])
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
