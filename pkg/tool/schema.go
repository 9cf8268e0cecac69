package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A small JSON Schema validator: the keywords tool schemas use (type,
// properties, required, additionalProperties, items, enum, const, the
// bounds, pattern, anyOf/oneOf/allOf). A keyword it does not know never
// rejects input: the tool (or the MCP server) judges what is left.
// A full validator library costs every cold `pg-tool call` its package
// initialisation and a schema compilation; this costs neither.

type schema struct {
	Types      []string
	Properties map[string]*schema
	Required   []string
	// Closed is additionalProperties:false; Extra the schema of other
	// properties when additionalProperties is an object.
	Closed bool
	Extra  *schema
	Items  *schema
	Enum   []any
	Const  *any

	Minimum, Maximum                   *float64
	ExclusiveMinimum, ExclusiveMaximum *float64
	MinLength, MaxLength               *int
	MinItems, MaxItems                 *int
	Pattern                            *regexp.Regexp

	AnyOf, AllOf []*schema
}

// parseSchema reads a schema document. It fails only on input that is not
// a JSON object; parts it cannot read are left out.
func parseSchema(b []byte) (*schema, error) {
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	return schemaOf(doc), nil
}

func schemaOf(doc map[string]any) *schema {
	s := &schema{}
	switch t := doc["type"].(type) {
	case string:
		s.Types = []string{t}
	case []any:
		for _, v := range t {
			if v, ok := v.(string); ok {
				s.Types = append(s.Types, v)
			}
		}
	}
	if props, ok := doc["properties"].(map[string]any); ok {
		s.Properties = map[string]*schema{}
		for k, v := range props {
			if v, ok := v.(map[string]any); ok {
				s.Properties[k] = schemaOf(v)
			} else {
				s.Properties[k] = &schema{}
			}
		}
	}
	if req, ok := doc["required"].([]any); ok {
		for _, v := range req {
			if v, ok := v.(string); ok {
				s.Required = append(s.Required, v)
			}
		}
	}
	switch a := doc["additionalProperties"].(type) {
	case bool:
		s.Closed = !a
	case map[string]any:
		s.Extra = schemaOf(a)
	}
	if it, ok := doc["items"].(map[string]any); ok {
		s.Items = schemaOf(it)
	}
	if e, ok := doc["enum"].([]any); ok {
		s.Enum = e
	}
	if c, ok := doc["const"]; ok {
		s.Const = &c
	}
	s.Minimum, s.Maximum = floatOf(doc["minimum"]), floatOf(doc["maximum"])
	s.ExclusiveMinimum, s.ExclusiveMaximum = floatOf(doc["exclusiveMinimum"]), floatOf(doc["exclusiveMaximum"])
	s.MinLength, s.MaxLength = intOf(doc["minLength"]), intOf(doc["maxLength"])
	s.MinItems, s.MaxItems = intOf(doc["minItems"]), intOf(doc["maxItems"])
	if p, ok := doc["pattern"].(string); ok {
		// An ECMA-262 pattern Go's regexp cannot read is skipped.
		s.Pattern, _ = regexp.Compile(p)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if l, ok := doc[key].([]any); ok && len(l) > 0 {
			// oneOf is checked as anyOf: what passes one branch passes.
			s.AnyOf = append(s.AnyOf, schemasOf(l)...)
		}
	}
	if l, ok := doc["allOf"].([]any); ok {
		s.AllOf = schemasOf(l)
	}
	return s
}

func schemasOf(l []any) []*schema {
	var out []*schema
	for _, v := range l {
		if v, ok := v.(map[string]any); ok {
			out = append(out, schemaOf(v))
		} else {
			out = append(out, &schema{}) // true, or unreadable: anything goes
		}
	}
	return out
}

// floatOf reads a bound. (Floats, not big.Rat: "1e999999999" must not
// build a billion-digit number.)
func floatOf(v any) *float64 {
	n, ok := v.(json.Number)
	if !ok {
		return nil // e.g. draft-4's boolean exclusiveMinimum
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return nil
	}
	return &f
}

func intOf(v any) *int {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	i, err := strconv.Atoi(string(n))
	if err != nil {
		return nil
	}
	return &i
}

// check validates v (decoded with UseNumber) and returns its problems,
// each naming the field: "field a.b[2]: got string, want integer".
// At the top level, missing and unknown fields come first, all of them.
func (s *schema) check(v any) []string {
	var msgs []string
	s.walk("", v, func(m string) { msgs = append(msgs, m) })
	return msgs
}

func (s *schema) walk(field string, v any, report func(string)) {
	at := func(format string, args ...any) {
		m := fmt.Sprintf(format, args...)
		if field != "" {
			m = "field " + field + ": " + m
		}
		report(m)
	}
	if len(s.Types) > 0 && !typeMatches(s.Types, v) {
		at("got %s, want %s", jsonType(v), strings.Join(s.Types, " or "))
		return
	}
	if s.Const != nil && !sameValue(*s.Const, v) {
		at("got %s, must be %s", short(v), short(*s.Const))
		return
	}
	if len(s.Enum) > 0 {
		found := false
		for _, e := range s.Enum {
			found = found || sameValue(e, v)
		}
		if !found {
			var opts []string
			for _, e := range s.Enum {
				opts = append(opts, short(e))
			}
			at("got %s, must be one of %s", short(v), strings.Join(opts, ", "))
			return
		}
	}
	switch v := v.(type) {
	case json.Number:
		s.checkNumber(v, at)
	case string:
		n := utf8.RuneCountInString(v)
		if s.MinLength != nil && n < *s.MinLength {
			if *s.MinLength == 1 {
				at("must not be empty")
			} else {
				at("has %d characters, must have at least %d", n, *s.MinLength)
			}
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			at("has %d characters, must have at most %d", n, *s.MaxLength)
		}
		if s.Pattern != nil && !s.Pattern.MatchString(v) {
			at("%s does not match the pattern %s", short(v), s.Pattern)
		}
	case []any:
		if s.MinItems != nil && len(v) < *s.MinItems {
			at("has %d items, must have at least %d", len(v), *s.MinItems)
		}
		if s.MaxItems != nil && len(v) > *s.MaxItems {
			at("has %d items, must have at most %d", len(v), *s.MaxItems)
		}
		if s.Items != nil {
			for i, e := range v {
				s.Items.walk(field+"["+strconv.Itoa(i)+"]", e, report)
			}
		}
	case map[string]any:
		s.checkObject(field, v, at, report)
	}
	for _, sub := range s.AllOf {
		sub.walk(field, v, report)
	}
	if len(s.AnyOf) > 0 {
		var first []string
		for i, sub := range s.AnyOf {
			var msgs []string
			sub.walk(field, v, func(m string) { msgs = append(msgs, m) })
			if len(msgs) == 0 {
				return
			}
			if i == 0 {
				first = msgs
			}
		}
		if len(first) > 0 {
			report(first[0] + " (or another of the allowed forms)")
		}
	}
}

func (s *schema) checkNumber(v json.Number, at func(string, ...any)) {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return
	}
	n := number(string(v))
	if s.Minimum != nil && f < *s.Minimum {
		at("got %s, must be at least %s", n, floatText(*s.Minimum))
	}
	if s.Maximum != nil && f > *s.Maximum {
		at("got %s, must be at most %s", n, floatText(*s.Maximum))
	}
	if s.ExclusiveMinimum != nil && f <= *s.ExclusiveMinimum {
		at("got %s, must be more than %s", n, floatText(*s.ExclusiveMinimum))
	}
	if s.ExclusiveMaximum != nil && f >= *s.ExclusiveMaximum {
		at("got %s, must be less than %s", n, floatText(*s.ExclusiveMaximum))
	}
}

func (s *schema) checkObject(field string, v map[string]any, at func(string, ...any), report func(string)) {
	var missing []string
	for _, k := range s.Required {
		if _, ok := v[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		at("missing required field %s", strings.Join(missing, ", "))
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var unknown []string
	for _, k := range keys {
		if _, ok := s.Properties[k]; !ok && s.Closed {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		m := "unknown field " + strings.Join(unknown, ", ")
		if len(s.Properties) > 0 {
			known := make([]string, 0, len(s.Properties))
			for k := range s.Properties {
				known = append(known, k)
			}
			sort.Strings(known)
			m += " (fields: " + strings.Join(known, ", ") + ")"
		}
		at("%s", m)
	}
	for _, k := range keys {
		sub := s.Properties[k]
		if sub == nil {
			sub = s.Extra
		}
		if sub == nil {
			continue
		}
		name := k
		if field != "" {
			name = field + "." + k
		}
		sub.walk(name, v[k], report)
	}
}

func floatText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func typeMatches(types []string, v any) bool {
	got := jsonType(v)
	for _, t := range types {
		if t == got || t == "number" && got == "integer" {
			return true
		}
	}
	return false
}

// jsonType names v's JSON type; numbers with an integral value are integers.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil && f == math.Trunc(f) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func sameValue(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, err1 := strconv.ParseFloat(string(x), 64)
		fy, err2 := strconv.ParseFloat(string(y), 64)
		return err1 == nil && err2 == nil && fx == fy || x == y
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// short renders a value for a message, cut when long.
func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
