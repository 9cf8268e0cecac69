package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// ArchiveIndexFile lists where each task sits in task-archive.jsonl, so
// that looking up archived ids (Add with ids or dependencies that are not
// live, Show, repeated Complete, Cancel) reads a few lines instead of the
// whole archive. Like task-queue.idx it is a cache, checked against the
// archive's inode, size and mtime and rebuilt when it does not match.
const ArchiveIndexFile = "task-archive.idx"

var archiveIdxMagic = []byte("PGQAIX1\n")

// archRef is one line of the archive.
type archRef struct {
	id     string
	off, n int64
}

func (q *Queue) archiveIndexPath() string { return filepath.Join(q.dir.Path(), ArchiveIndexFile) }

// refsOf appends the lines of data, archive content starting at offset
// base, to refs. A last line without its newline is not counted.
func refsOf(data []byte, base int64, refs []archRef) []archRef {
	for pos := 0; pos < len(data); {
		nl := bytes.IndexByte(data[pos:], '\n')
		if nl < 0 {
			break
		}
		line := data[pos : pos+nl]
		id, ok := archivedID(line)
		if !ok {
			var t struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(line, &t) == nil {
				id = t.ID
			}
		}
		if id != "" {
			refs = append(refs, archRef{id: id, off: base + int64(pos), n: int64(nl)})
		}
		pos += nl + 1
	}
	return refs
}

func appendRefs(b []byte, refs []archRef) []byte {
	for _, r := range refs {
		b = appendString(b, r.id)
		b = binary.AppendVarint(b, r.off)
		b = binary.AppendVarint(b, r.n)
	}
	return b
}

// writeArchiveIndex writes the index of archive version st: the entries
// already encoded (enc, count of them) followed by refs.
func writeArchiveIndex(path string, st fileStamp, enc []byte, count int, refs []archRef) error {
	b := make([]byte, 0, 64+len(enc)+len(refs)*40)
	b = append(b, archiveIdxMagic...)
	for _, v := range [...]int64{st.ino, st.size, st.mtime} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(count+len(refs)))
	b = append(b, enc...)
	b = appendRefs(b, refs)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable()))
	return replaceNoSync(path, teamdir.FileMode, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// archiveIndex is a read index file: count entries, encoded in enc (and
// the same bytes as a string in encs), in memory as readCache reads it.
type archiveIndex struct {
	enc   []byte
	encs  string
	count int
}

// readArchiveIndex reads the index when it describes exactly the archive
// version st. Lookups walk it without decoding it.
func readArchiveIndex(path string, st fileStamp) (*archiveIndex, bool) {
	b, s, err := readCache(path)
	if err != nil {
		return nil, false
	}
	return parseArchiveIndex(b, s, st)
}

func parseArchiveIndex(b []byte, s string, st fileStamp) (*archiveIndex, bool) {
	r, ok := checkedIndex(b, s, archiveIdxMagic)
	if !ok {
		return nil, false
	}
	if r.varint() != st.ino || r.varint() != st.size || r.varint() != st.mtime {
		return nil, false
	}
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		return nil, false
	}
	enc, encs := r.remaining(b)
	return &archiveIndex{enc: enc, encs: encs, count: int(n)}, true
}

// each calls fn for every entry, in archive order; false if the index is
// malformed.
func (ix *archiveIndex) each(size int64, fn func(id string, off, n int64)) bool {
	r := &indexReader{b: ix.encs}
	for range ix.count {
		id, off, n := r.str(), r.varint(), r.varint()
		if r.bad || off < 0 || n <= 0 || off+n > size {
			return false
		}
		fn(id, off, n)
	}
	return !r.bad && len(r.b) == 0
}

// scanArchive finds the archived tasks with the given ids (the last copy
// of each), through the archive index; when the index does not match the
// archive, it reads the archive and writes the index again.
func (q *Queue) scanArchive(want map[string]bool) (map[string]*protocol.Task, error) {
	out := map[string]*protocol.Task{}
	f, err := atomicfile.Open(q.archivePath())
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ArchiveFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", ArchiveFile, err)
	}
	st := stampOf(fi)
	last := map[string]archRef{}
	found := func(id string, off, n int64) {
		if want[id] {
			last[id] = archRef{id: id, off: off, n: n}
		}
	}
	ix, ok := readArchiveIndex(q.archiveIndexPath(), st)
	if ok {
		ok = ix.each(st.size, found)
	}
	if !ok {
		clear(last)
		data := make([]byte, st.size)
		if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s: %w", ArchiveFile, err)
		}
		refs := refsOf(data, 0, nil)
		for _, r := range refs {
			found(r.id, r.off, r.n)
		}
		// Only a cache: any process may write it, for the version it
		// read, as long as that version is still the archive.
		if now, err := os.Stat(q.archivePath()); err == nil && stampOf(now) == st {
			_ = writeArchiveIndex(q.archiveIndexPath(), st, nil, 0, refs)
		}
	}
	for id, r := range last {
		line := make([]byte, r.n)
		if _, err := f.ReadAt(line, r.off); err != nil {
			return nil, fmt.Errorf("read %s: %w", ArchiveFile, err)
		}
		var t protocol.Task
		if decodeTask(line, &t) != nil || t.ID != id {
			continue // a line torn by a power loss is skipped
		}
		normalize(&t)
		out[id] = &t
	}
	return out, nil
}

// archiveStamp is the version of the archive now, and whether it exists.
func (q *Queue) archiveStamp() (fileStamp, bool) {
	fi, err := os.Stat(q.archivePath())
	if err != nil {
		return fileStamp{}, false
	}
	return stampOf(fi), true
}

// indexAppended brings the archive index up to date after data was
// appended to the archive, which was at version before (exists: whether
// there was one). Callers hold the team lock, so data ends the archive.
// When the index did not match the archive before, it is left to be
// rebuilt on the next lookup.
func (q *Queue) indexAppended(before fileStamp, existed bool, data []byte) {
	var enc []byte
	count := 0
	if existed {
		ix, ok := readArchiveIndex(q.archiveIndexPath(), before)
		if !ok {
			return
		}
		enc, count = ix.enc, ix.count
	}
	after, ok := q.archiveStamp()
	if !ok {
		return
	}
	_ = writeArchiveIndex(q.archiveIndexPath(), after, enc, count, refsOf(data, after.size-int64(len(data)), nil))
}

// indexRewritten indexes the archive a prune has just put in place.
func (q *Queue) indexRewritten(data []byte) {
	if st, ok := q.archiveStamp(); ok && st.size == int64(len(data)) {
		_ = writeArchiveIndex(q.archiveIndexPath(), st, nil, 0, refsOf(data, 0, nil))
	}
}
