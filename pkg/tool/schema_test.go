package tool

import (
	"strings"
	"testing"
)

func TestSchemaCheck(t *testing.T) {
	const sch = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
    "n": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
    "f": {"type": "number", "exclusiveMinimum": 0.5},
    "mode": {"enum": ["a", "b"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "opt": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "nested": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"], "additionalProperties": false},
    "free": {"x-unknown-keyword": true, "$ref": "#/nowhere"}
  },
  "required": ["name"],
  "additionalProperties": false
}`
	s, err := parseSchema([]byte(sch))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"name":"ok","n":3,"f":0.75,"mode":"a","tags":["x"],"opt":null,"nested":{"x":true},"free":[1,{"a":2}]}`, ""},
		{`{"name":"ok","opt":"s","n":9.0}`, ""},
		{`{}`, "missing required field name"},
		{`{"name":"Up"}`, `field name: "Up" does not match the pattern ^[a-z]+$`},
		{`{"name":"abcdef"}`, "field name: has 6 characters, must have at most 5"},
		{`{"name":"a","n":0}`, "field n: got 0, must be at least 1"},
		{`{"name":"a","n":10}`, "field n: got 10, must be less than 10"},
		{`{"name":"a","n":2.5}`, "field n: got number, want integer"},
		{`{"name":"a","n":1e999999999}`, "field n: got number, want integer"},
		{`{"name":"a","f":0.5}`, "field f: got 0.5, must be more than 0.5"},
		{`{"name":"a","mode":"c"}`, `field mode: got "c", must be one of "a", "b"`},
		{`{"name":"a","tags":["x",1,"y"]}`, "field tags: has 3 items, must have at most 2; field tags[1]: got integer, want string"},
		{`{"name":"a","opt":3}`, "field opt: got integer, want string (or another of the allowed forms)"},
		{`{"name":"a","nested":{"y":1}}`, `field nested: missing required field x; field nested: unknown field "y" (fields: x)`},
		{`{"nme":"a","zz":1}`, `missing required field name; unknown field "nme", "zz" (fields: f, free, mode, n, name, nested, opt, tags)`},
	} {
		v, err := decodeNumbers([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.check(v), "; "); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.in, got, c.want)
		}
	}
}

// Whatever the schema and the value, checking never panics.
func FuzzSchemaCheck(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer","minimum":1}},"required":["a"]}`), []byte(`{"a":0}`))
	f.Add([]byte(`{"anyOf":[{"type":"string"},{"enum":[1,2]}],"items":{"pattern":"("}}`), []byte(`[1,"x"]`))
	f.Add([]byte(`{"minimum":"x","maxLength":-1,"type":[1,"null"],"additionalProperties":{"type":"string"}}`), []byte(`{"b":1}`))
	f.Fuzz(func(t *testing.T, sch, val []byte) {
		s, err := parseSchema(sch)
		if err != nil {
			return
		}
		v, err := decodeNumbers(val)
		if err != nil {
			return
		}
		s.check(v)
	})
}
