package tool

import (
	"encoding/json"
	"testing"
)

// Every form in which validate words the schema library's complaints. The
// words are read from the library's messages (see validate), so a library
// update that rewords one fails here rather than reaching a model as raw
// validator text.
func TestValidationMessages(t *testing.T) {
	tl := &Tool{Name: "t", Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "n": {"type": "integer", "minimum": 1, "maximum": 10},
    "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    "s": {"type": "string", "minLength": 1, "maxLength": 3},
    "l": {"type": "string", "minLength": 2},
    "o": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false},
    "arr": {"type": "array", "items": {"type": "integer"}}
  },
  "required": ["n"],
  "additionalProperties": false
}`)}
	for _, c := range []struct{ in, want string }{
		{`{"n":"3"}`, "field n: got string, want integer"},
		{`{"n":0}`, "field n: got 0, must be at least 1"},
		{`{"n":11}`, "field n: got 11, must be at most 10"},
		{`{"n":1,"x":0}`, "field x: got 0, must be more than 0"},
		{`{"n":1,"x":1.5}`, "field x: got 1.5, must be less than 1"},
		{`{"n":1,"s":""}`, "field s: must not be empty"},
		{`{"n":1,"s":"abcd"}`, "field s: has 4 characters, must have at most 3"},
		{`{"n":1,"l":"a"}`, "field l: has 1 characters, must have at least 2"},
		{`{"n":1,"o":{}}`, "field o: missing required field a"},
		{`{"n":1,"o":{"a":true,"b":1}}`, `field o: unknown field "b"`},
		{`{"n":1,"o":{"a":1}}`, "field o.a: got integer, want boolean"},
		{`{"n":1,"arr":[1,"two"]}`, "field arr[1]: got string, want integer"},
		{`{}`, "missing required field n"},
		{`{"n":1,"zz":1,"aa":2}`, `unknown field "aa", "zz" (fields: arr, l, n, o, s, x)`},
		{`{"nn":1}`, `missing required field n; unknown field "nn" (fields: arr, l, n, o, s, x)`},
	} {
		err := tl.validate(json.RawMessage(c.in))
		if want := "invalid input for t: " + c.want; err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", c.in, err, want)
		}
	}
}
