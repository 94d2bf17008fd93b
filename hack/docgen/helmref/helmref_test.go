package helmref

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const schema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["name"],
  "definitions": {
    "replicas": {"type": "integer", "minimum": 0},
    "flags": {"type": "array", "items": {"description": "a long flag", "type": "string", "pattern": "^--"}}
  },
  "properties": {
    "name": {"description": "the name", "type": "string", "maxLength": 63},
    "mode": {"enum": ["a", "b"]},
    "server": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "replicas": {"$ref": "#/definitions/replicas"},
        "args": {"$ref": "#/definitions/flags"},
        "requests": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
        "extra": {"type": "string", "if": {"pattern": "x"}, "then": {"maxLength": 3}}
      }
    }
  }
}`

const values = `# The chart's values.

# Name of it.
name: ""
mode: a
# The server.
server:
  # How many.
  replicas: 2
  args: []
  requests:
    cpu: 100m
`

func TestRowsOfFixture(t *testing.T) {
	rows, err := Rows([]byte(schema), []byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Key: "name", Type: "string", Default: "`\"\"`", Allowed: "max length 63", Description: "Required. Name of it. Schema: the name."},
		{Key: "mode", Type: "string", Default: "`\"a\"`", Allowed: "one of `\"a\"`, `\"b\"`"},
		{Key: "server", Type: "object", Description: "The server."},
		{Key: "server.replicas", Type: "integer", Default: "`2`", Allowed: ">= 0", Description: "How many."},
		{Key: "server.args", Type: "array of string", Default: "`[]`", Allowed: "items: pattern `^--`; items: a long flag"},
		{Key: "server.requests", Type: "map of string or number", Default: "`{\"cpu\":\"100m\"}`"},
		{Key: "server.extra", Type: "string", Allowed: "further conditions in values.schema.json"},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}

func TestValueTheSchemaRefuses(t *testing.T) {
	_, err := Rows([]byte(schema), []byte("name: x\nstray: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "stray") {
		t.Errorf("Rows with a key the schema does not allow = %v, want an error naming it", err)
	}
	_, err = Rows([]byte(`{"properties": {"a": {"$ref": "#/definitions/gone"}}}`), []byte("a: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Rows with a dangling $ref = %v, want an error naming it", err)
	}
}

func TestRenderEscapesPipes(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, []byte(`{"properties": {"a": {"type": "string", "pattern": "^$|^x$"}}}`), []byte("a: x\n")); err != nil {
		t.Fatal(err)
	}
	if want := "| `a` | string | `\"x\"` | pattern `^$\\|^x$` |  |"; !strings.Contains(b.String(), want) {
		t.Errorf("rendered\n%s\nwant a line %s", b.String(), want)
	}
}
