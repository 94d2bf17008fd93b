// Package helmref renders the Helm chart's values as a Markdown table: per
// key its type, default (values.yaml), what values.schema.json allows, and
// its description (values.yaml's comment above the key, and the schema's).
package helmref

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/ferry-io/ferry/hack/docgen/md"
)

// Schema is the part of a JSON schema (draft-07) the table shows.
type Schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"`
	Description          string             `json:"description"`
	Enum                 []any              `json:"enum"`
	Const                any                `json:"const"`
	Pattern              string             `json:"pattern"`
	Format               string             `json:"format"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	MinLength            *int               `json:"minLength"`
	MaxLength            *int               `json:"maxLength"`
	MinItems             *int               `json:"minItems"`
	MaxItems             *int               `json:"maxItems"`
	Items                *Schema            `json:"items"`
	Properties           map[string]*Schema `json:"properties"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Required             []string           `json:"required"`
	If                   *Schema            `json:"if"`
	AllOf                []*Schema          `json:"allOf"`
	AnyOf                []*Schema          `json:"anyOf"`
	OneOf                []*Schema          `json:"oneOf"`
	Not                  *Schema            `json:"not"`
	Definitions          map[string]*Schema `json:"definitions"`
}

// Row is one key of the values.
type Row struct {
	Key, Type, Default, Allowed, Description string
}

type walker struct {
	defs map[string]*Schema
	rows []Row
}

// Rows are the rows of every value the schema or values.yaml has, in
// values.yaml's order (keys only the schema has after the others of their
// object, in name order). Objects whose fields the schema lists get a row
// only when something describes them; their fields get rows of their own.
func Rows(schemaJSON, valuesYAML []byte) ([]Row, error) {
	var root Schema
	if err := json.Unmarshal(schemaJSON, &root); err != nil {
		return nil, fmt.Errorf("values schema: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values: not a mapping")
	}
	w := &walker{defs: root.Definitions}
	if err := w.object("", &root, doc.Content[0]); err != nil {
		return nil, err
	}
	return w.rows, nil
}

func (w *walker) resolve(s *Schema) (*Schema, error) {
	for s != nil && s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/definitions/")
		d := w.defs[name]
		if !ok || d == nil {
			return nil, fmt.Errorf("$ref %q: no such definition", s.Ref)
		}
		s = d
	}
	return s, nil
}

// object adds the rows of the fields of an object of schema s and value
// node v (nil: absent from values.yaml).
func (w *walker) object(path string, s *Schema, v *yaml.Node) error {
	type field struct {
		key, comment string
		value        *yaml.Node
	}
	var fields []field
	seen := map[string]bool{}
	if v != nil && v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			fields = append(fields, field{k.Value, comment(k.HeadComment), v.Content[i+1]})
			seen[k.Value] = true
		}
	}
	var rest []string
	for k := range s.Properties {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		fields = append(fields, field{key: k})
	}
	for _, f := range fields {
		p := f.key
		if path != "" {
			p = path + "." + f.key
		}
		fs, err := w.resolve(s.Properties[f.key])
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if fs == nil {
			if string(s.AdditionalProperties) == "false" {
				return fmt.Errorf("%s: in values.yaml, not allowed by the schema", p)
			}
			fs = &Schema{}
		}
		if err := w.value(p, fs, f.value, f.comment, slices.Contains(s.Required, f.key), s.Properties[f.key]); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) value(path string, s *Schema, v *yaml.Node, comment string, required bool, raw *Schema) error {
	desc := comment
	for _, d := range []string{raw.description(), s.Description} {
		if d != "" && !strings.Contains(desc, d) {
			desc = strings.TrimSpace(desc + " Schema: " + d + ".")
		}
	}
	if required && !strings.HasPrefix(desc, "Required") && !strings.Contains(desc, " Required.") {
		desc = strings.TrimSpace("Required. " + desc)
	}
	if len(s.Properties) > 0 {
		if desc != "" {
			w.rows = append(w.rows, Row{Key: path, Type: "object", Description: desc})
		}
		return w.object(path, s, v)
	}
	def, err := defaultOf(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	t, err := w.typeOf(s, v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	allowed, err := w.allowed(s)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	w.rows = append(w.rows, Row{Key: path, Type: t, Default: def, Allowed: allowed, Description: desc})
	return nil
}

func (s *Schema) description() string {
	if s == nil {
		return ""
	}
	return s.Description
}

func comment(c string) string {
	var lines []string
	for _, l := range strings.Split(c, "\n") {
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")))
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

func defaultOf(v *yaml.Node) (string, error) {
	if v == nil {
		return "", nil
	}
	var x any
	if err := v.Decode(&x); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	if err != nil {
		return "", err
	}
	return md.Code(string(b)), nil
}

func (w *walker) typeOf(s *Schema, v *yaml.Node) (string, error) {
	var t string
	switch x := s.Type.(type) {
	case string:
		t = x
	case []any:
		var ts []string
		for _, e := range x {
			ts = append(ts, fmt.Sprint(e))
		}
		t = strings.Join(ts, " or ")
	case nil:
		switch {
		case len(s.Enum) > 0:
			t = jsonType(s.Enum[0])
		case v != nil:
			var x any
			if err := v.Decode(&x); err == nil {
				t = jsonType(x)
			}
		}
	}
	if t == "array" && s.Items != nil {
		items, err := w.resolve(s.Items)
		if err != nil {
			return "", err
		}
		it, err := w.typeOf(items, nil)
		if err != nil {
			return "", err
		}
		if it != "" {
			t += " of " + it
		}
	}
	if t == "object" && len(s.AdditionalProperties) > 0 && s.AdditionalProperties[0] == '{' {
		var ap Schema
		if err := json.Unmarshal(s.AdditionalProperties, &ap); err != nil {
			return "", err
		}
		vt, err := w.typeOf(&ap, nil)
		if err != nil {
			return "", err
		}
		t = "map of " + vt
	}
	return t, nil
}

func jsonType(x any) string {
	switch x.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int64, uint64, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

func (w *walker) allowed(s *Schema) (string, error) {
	var a []string
	add := func(format string, args ...any) { a = append(a, fmt.Sprintf(format, args...)) }
	if len(s.Enum) > 0 {
		var vals []string
		for _, e := range s.Enum {
			b, _ := json.Marshal(e)
			vals = append(vals, md.Code(string(b)))
		}
		add("one of %s", strings.Join(vals, ", "))
	}
	if s.Const != nil {
		b, _ := json.Marshal(s.Const)
		add("only %s", md.Code(string(b)))
	}
	if s.Minimum != nil {
		add(">= %s", strconv.FormatFloat(*s.Minimum, 'f', -1, 64))
	}
	if s.Maximum != nil {
		add("<= %s", strconv.FormatFloat(*s.Maximum, 'f', -1, 64))
	}
	if s.MinLength != nil {
		add("min length %d", *s.MinLength)
	}
	if s.MaxLength != nil {
		add("max length %d", *s.MaxLength)
	}
	if s.Pattern != "" {
		add("pattern %s", md.Code(s.Pattern))
	}
	if s.Format != "" {
		add("format %s", s.Format)
	}
	if s.MinItems != nil {
		add("min items %d", *s.MinItems)
	}
	if s.MaxItems != nil {
		add("max items %d", *s.MaxItems)
	}
	if s.If != nil || len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.Not != nil {
		add("further conditions in values.schema.json")
	}
	if s.Items != nil {
		items, err := w.resolve(s.Items)
		if err != nil {
			return "", err
		}
		if len(items.Properties) > 0 {
			var keys []string
			for k := range items.Properties {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			add("items: objects with %s", strings.Join(keys, ", "))
		}
		ia, err := w.allowed(items)
		if err != nil {
			return "", err
		}
		if ia != "" {
			add("items: %s", ia)
		}
		if d := items.Description; d != "" {
			add("items: %s", d)
		}
	}
	return strings.Join(a, "; "), nil
}

// Render writes the table of Rows.
func Render(w io.Writer, schemaJSON, valuesYAML []byte) error {
	rows, err := Rows(schemaJSON, valuesYAML)
	if err != nil {
		return err
	}
	table := make([][]string, len(rows))
	for i, r := range rows {
		table[i] = []string{md.Code(r.Key), r.Type, r.Default, r.Allowed, r.Description}
	}
	md.Table(w, []string{"Key", "Type", "Default", "Allowed", "Description"}, table)
	return nil
}
