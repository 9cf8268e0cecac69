package cli

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/powerglide/powerglide/pkg/config"
)

// numberMappers replace kong's decoders of numbers and durations for every
// tool, so that the flags of all seven tools read numbers one way:
//
//   - a negative number is a value, not a short flag: `--max-restarts -1`
//     and `--priority -5` work as written;
//   - NaN and infinities are refused;
//   - a duration lies between 0 and config.MaxDuration (100 years, so a
//     lease or deadline taken from now never passes the year 2262, where
//     time.Time's nanoseconds overflow).
//
// A command still checks the range its own numbers need.
func numberMappers() []kong.Option {
	opts := []kong.Option{kong.TypeMapper(reflect.TypeOf(time.Duration(0)), kong.MapperFunc(decodeDuration))}
	for _, k := range []reflect.Kind{reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64} {
		opts = append(opts, kong.KindMapper(k, kong.MapperFunc(decodeInt)))
	}
	for _, k := range []reflect.Kind{reflect.Float32, reflect.Float64} {
		opts = append(opts, kong.KindMapper(k, kong.MapperFunc(decodeFloat)))
	}
	return opts
}

// popNumber pops a flag's value, taking a token such as -1 or -0.5 as a
// value where kong would read a short flag.
func popNumber(ctx *kong.DecodeContext, what string) (string, error) {
	if t := ctx.Scan.Peek(); t.Type == kong.UntypedToken && negativeNumber(t.String()) {
		return ctx.Scan.Pop().String(), nil
	}
	t, err := ctx.Scan.PopValue(what)
	if err != nil {
		return "", err
	}
	switch v := t.Value.(type) {
	case string:
		return v, nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("expected %s but got %q", what, t)
}

// negativeNumber reports whether s looks like a negative number or
// duration (-1, -0.5, -3s): no flag name starts with a digit, so the value
// is never mistaken for one.
func negativeNumber(s string) bool {
	return len(s) >= 2 && s[0] == '-' && (s[1] >= '0' && s[1] <= '9' || s[1] == '.')
}

func decodeInt(ctx *kong.DecodeContext, target reflect.Value) error {
	s, err := popNumber(ctx, "an integer")
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, target.Type().Bits())
	if err != nil {
		return fmt.Errorf("expected an integer but got %q", s)
	}
	target.SetInt(n)
	return nil
}

func decodeFloat(ctx *kong.DecodeContext, target reflect.Value) error {
	s, err := popNumber(ctx, "a number")
	if err != nil {
		return err
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), target.Type().Bits())
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("expected a finite number but got %q", s)
	}
	target.SetFloat(f)
	return nil
}

func decodeDuration(ctx *kong.DecodeContext, target reflect.Value) error {
	s, err := popNumber(ctx, "a duration")
	if err != nil {
		return err
	}
	d, err := config.ParseDuration(s)
	if err != nil {
		return err
	}
	target.SetInt(int64(d))
	return nil
}
