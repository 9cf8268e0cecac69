package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseReader splits a text/event-stream into events. No line and no event
// may grow past max bytes: a server that sends one endless line, or data
// lines without the blank line that ends an event, gets an error of kind
// response_too_large instead of all the memory.
type sseReader struct {
	r     *bufio.Reader
	max   int
	wait  func() // called before a read that waits for the network; nil: none
	event []byte
	data  bytes.Buffer
	long  []byte
}

// newSSEReader reads r through 4 KB, a buffer for every call: a line of an
// event stream is a few hundred bytes, and a longer one is gathered in
// long.
func newSSEReader(r io.Reader, max int, wait func()) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 4<<10), max: max, wait: wait}
}

// line returns the next line without its line end.
func (s *sseReader) line() ([]byte, error) {
	if s.wait != nil {
		if b, _ := s.r.Peek(s.r.Buffered()); bytes.IndexByte(b, '\n') < 0 {
			s.wait() // the next line is not here yet
		}
	}
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.long) > s.max {
				return nil, tooLarge("a line of its event stream", s.max)
			}
			line, err = s.r.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, nil
}

// Next returns the next event's name and data (lines joined by \n), both
// valid until the next call. As the SSE spec says, a later event: line of
// an event replaces the name an earlier one gave, and an event without a
// data: line is not dispatched (its name is forgotten). At the end of the
// stream it returns
// io.EOF; an event not closed by a blank line is dropped, as the SSE spec
// says, and the stream counts as cut off (io.ErrUnexpectedEOF).
func (s *sseReader) Next() (event, data []byte, err error) {
	s.event = s.event[:0]
	s.data.Reset()
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && (hasData || len(s.event) > 0) {
				return nil, nil, io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		if len(line) == 0 {
			if !hasData {
				s.event = s.event[:0]
				continue
			}
			return s.event, s.data.Bytes(), nil
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			s.event = append(s.event[:0], value...)
		case "data":
			if hasData {
				s.data.WriteByte('\n')
			}
			s.data.Write(value)
			hasData = true
		}
		if s.data.Len()+len(s.event) > s.max {
			return nil, nil, tooLarge("an event of its stream", s.max)
		}
	}
}
