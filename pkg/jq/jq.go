// Package jq is the --jq filter of the commands that list records: a jq
// expression run in-process (github.com/itchyny/gojq) over each record, so
// scripts need no jq installed.
package jq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/itchyny/gojq"
	"github.com/powerglide/powerglide/pkg/cli"
)

// Filter writes records as JSON lines, through a jq expression when one
// was given.
type Filter struct {
	code *gojq.Code
	raw  bool
	out  io.Writer
	enc  *json.Encoder
}

// New compiles expr ("" passes records as they are); raw prints string
// results as plain text, like jq -r. A bad expression is a usage error.
func New(expr string, raw bool, out io.Writer, enc *json.Encoder) (*Filter, error) {
	f := &Filter{raw: raw, out: out, enc: enc}
	if expr == "" {
		return f, nil
	}
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, cli.Usagef("--jq: %v", err)
	}
	if f.code, err = gojq.Compile(q); err != nil {
		return nil, cli.Usagef("--jq: %v", err)
	}
	return f, nil
}

// Active reports whether an expression was given.
func (f *Filter) Active() bool { return f.code != nil }

// Emit writes rec, or what the expression makes of it.
func (f *Filter) Emit(ctx context.Context, rec any) error {
	if f.code == nil {
		return f.enc.Encode(rec)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	iter := f.code.RunWithContext(ctx, v)
	for {
		out, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, ok := out.(error); ok {
			var he *gojq.HaltError
			if errors.As(err, &he) && he.Value() == nil {
				return nil
			}
			return cli.Failf("jq", "--jq: %v", err)
		}
		if str, ok := out.(string); ok && f.raw {
			if _, err := fmt.Fprintln(f.out, str); err != nil {
				return err
			}
			continue
		}
		if err := f.enc.Encode(out); err != nil {
			return err
		}
	}
}
