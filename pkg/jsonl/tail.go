package jsonl

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/powerglide/powerglide/pkg/atomicfile"
)

// Pos is how far an append-only JSON-Lines file has been read. It is a
// value: ReadFrom takes one and returns the next, so a reader can run in
// another goroutine (a pg-dash command) while its owner keeps the position.
// Follower is the blocking reader built on it; both notice a replaced or
// truncated file the same way.
type Pos struct {
	Path    string
	Off     int64  // bytes consumed from the current file
	Dev     uint64 // identity of the file read, to notice a replacement
	Ino     uint64
	Partial []byte // an unfinished last line, kept until its newline
	Head    []byte // the file's first bytes
	Tail    []byte // the bytes just before Off
	Open    bool   // the file has been read at least once
	Gone    bool   // the file was read, then went away: its successor is new
}

// Read is what one ReadFrom found.
type Read struct {
	Pos   Pos
	Lines [][]byte // whole lines, without newline or \r; blank lines left out
	// Reset is set when the file was replaced ("rotated"), truncated or
	// rewritten in place ("truncated"), or removed ("removed"): the reader
	// started over, and lines may have been missed.
	Reset   string
	Missing bool // the file does not exist (yet)
	More    bool // the read stopped at its limit; call again
}

// idLen is how many bytes at the start of a file and before the offset
// identify what was read: a file truncated and written again past the
// offset between two reads differs in one or the other.
const idLen = 64

// DefaultReadLimit caps one ReadFrom, so a burst never stalls its caller.
const DefaultReadLimit = 4 << 20

// ReadFrom reads what was appended to pos.Path since pos, at most limit
// bytes (DefaultReadLimit when limit <= 0). A file read for the first time
// is read from its last backlog bytes (0 = from the start), beginning at a
// whole line.
func ReadFrom(pos Pos, backlog, limit int64) (Read, error) {
	f, err := atomicfile.Open(pos.Path)
	if errors.Is(err, fs.ErrNotExist) {
		r := Read{Pos: Pos{Path: pos.Path, Gone: pos.Open || pos.Gone}, Missing: true}
		if pos.Open {
			r.Reset = "removed"
		}
		return r, nil
	}
	if err != nil {
		return Read{Pos: pos}, err
	}
	defer f.Close()
	return readOpen(f, pos, backlog, limit)
}

// AtEnd is the position at the end of path as it is now: a reader from
// there gets only what is appended later. A missing file gives the empty
// position, from which the file is read from its start once it appears.
func AtEnd(path string) (Pos, error) {
	f, err := atomicfile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Pos{Path: path}, nil
	}
	if err != nil {
		return Pos{Path: path}, err
	}
	defer f.Close()
	return atEnd(f, path)
}

func atEnd(f *os.File, path string) (Pos, error) {
	st, err := f.Stat()
	if err != nil {
		return Pos{Path: path}, err
	}
	dev, ino := fileID(st)
	p := Pos{Path: path, Off: st.Size(), Dev: dev, Ino: ino, Open: true}
	p.Head = readAt(f, 0, min(idLen, st.Size()))
	p.Tail = readAt(f, max(0, st.Size()-idLen), min(idLen, st.Size()))
	return p, nil
}

// readOpen is ReadFrom on an open file.
func readOpen(f *os.File, pos Pos, backlog, limit int64) (Read, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	r := Read{Pos: pos}
	st, err := f.Stat()
	if err != nil {
		return r, err
	}
	size := st.Size()
	dev, ino := fileID(st)
	fresh := Pos{Path: pos.Path, Dev: dev, Ino: ino, Open: true}
	skipFirst := false
	switch {
	case !pos.Open && pos.Gone:
		r.Reset, r.Pos = "rotated", fresh
	case !pos.Open:
		r.Pos = fresh
		if backlog > 0 && size > backlog {
			r.Pos.Off = size - backlog
			// Inside a line unless the byte before starts one.
			skipFirst = !bytes.Equal(readAt(f, r.Pos.Off-1, 1), []byte{'\n'})
		}
	case dev != pos.Dev || ino != pos.Ino:
		r.Reset, r.Pos = "rotated", fresh
	case size < pos.Off || (size > pos.Off && !pos.same(f)):
		// Shorter than what was read, or rewritten in place: a truncation
		// followed by more writes than before.
		r.Reset, r.Pos = "truncated", fresh
	}
	if len(r.Pos.Head) < idLen && size > int64(len(r.Pos.Head)) {
		r.Pos.Head = readAt(f, 0, min(idLen, size))
	}
	n := size - r.Pos.Off
	if n <= 0 {
		return r, nil
	}
	if n > limit {
		n, r.More = limit, true
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, r.Pos.Off)
	if err != nil && !errors.Is(err, io.EOF) {
		return r, err
	}
	buf = buf[:got]
	r.Pos.Off += int64(got)
	r.Pos.Tail = lastBytes(r.Pos.Tail, buf)
	if skipFirst {
		// Started inside a line: drop up to the first newline.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			r.Pos.Partial = nil
			return r, nil
		}
		buf = buf[i+1:]
	}
	data := buf
	if len(r.Pos.Partial) > 0 {
		data = append(append([]byte(nil), r.Pos.Partial...), buf...)
	}
	r.Pos.Partial = nil
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			r.Pos.Partial = append([]byte(nil), data...)
			break
		}
		line := bytes.TrimRight(data[:i], "\r")
		if len(bytes.TrimSpace(line)) > 0 {
			r.Lines = append(r.Lines, line)
		}
		data = data[i+1:]
	}
	return r, nil
}

// same reports whether f still holds, at its start and just before Off, the
// bytes that were read there.
func (p Pos) same(f *os.File) bool {
	if len(p.Head) > 0 && !bytes.Equal(readAt(f, 0, int64(len(p.Head))), p.Head) {
		return false
	}
	if len(p.Tail) > 0 && !bytes.Equal(readAt(f, p.Off-int64(len(p.Tail)), int64(len(p.Tail))), p.Tail) {
		return false
	}
	return true
}

// readAt returns up to n bytes of f at off (fewer at its end or on error).
func readAt(f *os.File, off, n int64) []byte {
	if n <= 0 || off < 0 {
		return nil
	}
	b := make([]byte, n)
	got, _ := f.ReadAt(b, off)
	return b[:got]
}

// lastBytes returns the last idLen bytes of tail followed by read.
func lastBytes(tail, read []byte) []byte {
	if len(read) >= idLen {
		return append([]byte(nil), read[len(read)-idLen:]...)
	}
	keep := min(len(tail), idLen-len(read))
	out := make([]byte, 0, keep+len(read))
	return append(append(out, tail[len(tail)-keep:]...), read...)
}

func fileID(st fs.FileInfo) (uint64, uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), uint64(s.Ino)
	}
	return 0, 0
}
