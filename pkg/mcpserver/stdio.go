package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLine bounds one JSON-RPC line read from the client.
const MaxLine = 64 << 20

// lineTransport is MCP's stdio transport, newline-delimited JSON-RPC. It
// does what the SDK's IOTransport does at less cost per message: lines
// are read with a line reader (the SDK runs a streaming JSON decoder over
// the input) and requests decoded in one pass, and a result, which the
// SDK hands over as encoded JSON, is written as it is (the SDK encodes
// the response around it again, one more pass over the whole output).
type lineTransport struct {
	in  io.Reader
	out io.Writer
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{out: t.out, incoming: make(chan lineMsg), closed: make(chan struct{})}
	go c.readLines(t.in)
	return c, nil
}

type lineMsg struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	out      io.Writer
	incoming chan lineMsg

	wmu       sync.Mutex
	buf       []byte
	closeOnce sync.Once
	closed    chan struct{}
}

// readLines decodes the input line by line until it ends or fails.
func (c *lineConn) readLines(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	send := func(m lineMsg) bool {
		select {
		case c.incoming <- m:
			return true
		case <-c.closed:
			return false
		}
	}
	for n := 1; ; n++ {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			msgs, derr := decode(line)
			if derr != nil {
				send(lineMsg{err: fmt.Errorf("line %d: %w", n, derr)})
				return
			}
			for _, m := range msgs {
				if !send(lineMsg{msg: m}) {
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("line %d: %w", n, err)
			}
			send(lineMsg{err: err})
			return
		}
	}
}

// readLine reads one line, without its newline, of at most MaxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		part, err := r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			if long != nil {
				part = append(long, part...)
			}
			return bytes.TrimSuffix(part, []byte("\n")), err
		}
		long = append(long, part...)
		if len(long) > MaxLine {
			return nil, fmt.Errorf("longer than %d bytes", MaxLine)
		}
	}
}

// decode reads one message, or a batch (a JSON array of messages).
func decode(line []byte) ([]jsonrpc.Message, error) {
	line = bytes.TrimSpace(line)
	if line[0] != '[' {
		m, err := decodeMessage(line)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{m}, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(line, &batch); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(batch))
	for _, raw := range batch {
		m, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// decodeMessage reads a request or notification itself, in one pass (the
// SDK's decoder takes two, each with a 32 kB buffer), and leaves the rest
// (responses to the server's own requests) to the SDK.
func decodeMessage(raw []byte) (jsonrpc.Message, error) {
	var w struct {
		Version string          `json:"jsonrpc"`
		ID      any             `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &w); err != nil || w.Method == nil {
		return jsonrpc.DecodeMessage(raw)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected \"2.0\"", w.Version)
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	return &jsonrpc.Request{ID: id, Method: *w.Method, Params: w.Params}, nil
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case m := <-c.incoming:
		return m.msg, m.err
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	b, err := c.encode(msg)
	if err != nil {
		return err
	}
	_, err = c.out.Write(b)
	return err
}

// encode renders a message as one line. A result is compact JSON already
// (the SDK marshalled it): it goes in as it is.
func (c *lineConn) encode(msg jsonrpc.Message) ([]byte, error) {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error == nil && len(r.Result) > 0 && r.ID.IsValid() {
		id, err := json.Marshal(r.ID.Raw())
		if err != nil {
			return nil, err
		}
		c.buf = append(append(append(c.buf[:0], `{"jsonrpc":"2.0","id":`...), id...), `,"result":`...)
		c.buf = append(append(c.buf, r.Result...), "}\n"...)
		return c.buf, nil
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
