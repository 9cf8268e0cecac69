package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// LineError is a decoding error at a line of input. It is bad input (exit 2).
type LineError struct {
	Name string // the input's name, e.g. a file or "stdin"; may be empty
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// BadInput marks the error as a usage error (exit 2).
func (e *LineError) BadInput() bool { return true }

// Decoder reads JSON Lines with line numbers. Blank lines are skipped.
type Decoder struct {
	r      *bufio.Reader
	name   string
	line   int
	strict bool
}

// NewDecoder reads lines from r; name is used in errors.
func NewDecoder(r io.Reader, name string) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10), name: name}
}

// Strict makes Decode reject fields the target type does not have.
func (d *Decoder) Strict() *Decoder { d.strict = true; return d }

// Line is the number of the last line returned.
func (d *Decoder) Line() int { return d.line }

// Next returns the next non-blank line without its newline, or io.EOF.
// The slice is valid until the next call.
func (d *Decoder) Next() ([]byte, error) {
	for {
		line, err := d.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: collect it whole.
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = d.r.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if len(line) == 0 && err != nil {
			return nil, err
		}
		d.line++
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		return line, nil
	}
}

// Decode reads the next line into v. Errors name the line.
func (d *Decoder) Decode(v any) error {
	line, err := d.Next()
	if err != nil {
		return err
	}
	if err := Unmarshal(line, v, d.strict); err != nil {
		return &LineError{Name: d.name, Line: d.line, Err: err}
	}
	return nil
}

// Unmarshal decodes exactly one JSON value from data into v; strict rejects
// unknown fields. Trailing data is an error.
func Unmarshal(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	if dec.More() {
		return errors.New("invalid JSON: more than one value on the line")
	}
	return nil
}

func describe(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("field %q: expected %s, got %s", te.Field, te.Type, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON: %v", se)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of line")
	}
	return err
}
