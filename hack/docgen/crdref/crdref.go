// Package crdref renders the API reference of CustomResourceDefinitions:
// per kind and version its scope, names, printer columns and a table of
// every field of its schema (path, type, required, default, validation,
// description).
package crdref

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/hack/docgen/md"
)

// Collapse names, per kind, the field paths whose subtree is not listed:
// the row links to Link (such as the Kubernetes API reference of an
// embedded PodSpec) instead.
type Collapse map[string]map[string]Link

// Link is the text and address a collapsed field's type links to.
type Link struct{ Text, URL string }

// Load reads every CustomResourceDefinition in the YAML files of dir
// (kustomization.yaml aside), sorted by kind.
func Load(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: kind %q, want CustomResourceDefinition", f, crd.Kind)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("%s: no CustomResourceDefinition", dir)
	}
	slices.SortFunc(crds, func(a, b apiextensionsv1.CustomResourceDefinition) int {
		return strings.Compare(a.Spec.Names.Kind, b.Spec.Names.Kind)
	})
	return crds, nil
}

// Row is one field of a schema.
type Row struct {
	Path, Type, Required, Default, Validation, Description string
}

// Fields are the rows of schema's fields, depth first in name order; the
// root's apiVersion, kind and metadata are left out (every object has
// them). Paths of collapse (relative to the root, as Row.Path) are listed
// without their subtree; each must be found, or Fields fails.
func Fields(schema *apiextensionsv1.JSONSchemaProps, collapse map[string]Link) ([]Row, error) {
	var rows []Row
	found := map[string]bool{}
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps, required bool)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps, required bool) {
		if path != "" {
			r := Row{Path: path, Type: typeOf(s), Default: defaultOf(s), Validation: validation(s), Description: s.Description}
			if required {
				r.Required = "yes"
			}
			if link, ok := collapse[path]; ok {
				found[path] = true
				r.Type = fmt.Sprintf("[%s](%s)", link.Text, link.URL)
				rows = append(rows, r)
				return
			}
			rows = append(rows, r)
		}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			if path == "" && (n == "apiVersion" || n == "kind" || n == "metadata") {
				continue
			}
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			p := s.Properties[n]
			walk(join(path, n), &p, slices.Contains(s.Required, n))
		}
		if s.Items != nil && s.Items.Schema != nil && hasChildren(s.Items.Schema) {
			walk(path+"[]", s.Items.Schema, false)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && hasChildren(s.AdditionalProperties.Schema) {
			walk(path+".<key>", s.AdditionalProperties.Schema, false)
		}
	}
	walk("", schema, false)
	var missing []string
	for p := range collapse {
		if !found[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("fields to collapse not in the schema: %s", strings.Join(missing, ", "))
	}
	return rows, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// hasChildren tells whether an array's items or a map's values get rows of
// their own: objects with fields, lists of them.
func hasChildren(s *apiextensionsv1.JSONSchemaProps) bool {
	return len(s.Properties) > 0 || s.Items != nil && s.Items.Schema != nil && hasChildren(s.Items.Schema) ||
		s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && hasChildren(s.AdditionalProperties.Schema)
}

func typeOf(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int or string"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "array of " + typeOf(s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map of " + typeOf(s.AdditionalProperties.Schema)
	case s.Type == "" && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		return "any"
	}
	t := s.Type
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	return t
}

func defaultOf(s *apiextensionsv1.JSONSchemaProps) string {
	if s.Default == nil {
		return ""
	}
	return md.Code(compact(s.Default.Raw))
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func validation(s *apiextensionsv1.JSONSchemaProps) string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = md.Code(compact(e.Raw))
		}
		add("one of %s", strings.Join(vals, ", "))
	}
	if s.Minimum != nil {
		op := ">="
		if s.ExclusiveMinimum {
			op = ">"
		}
		add("%s %s", op, num(*s.Minimum))
	}
	if s.Maximum != nil {
		op := "<="
		if s.ExclusiveMaximum {
			op = "<"
		}
		add("%s %s", op, num(*s.Maximum))
	}
	if s.MultipleOf != nil {
		add("multiple of %s", num(*s.MultipleOf))
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
	if s.Format != "" && s.Type == "string" {
		add("format %s", s.Format)
	}
	if s.MinItems != nil {
		add("min items %d", *s.MinItems)
	}
	if s.MaxItems != nil {
		add("max items %d", *s.MaxItems)
	}
	if s.UniqueItems {
		add("unique items")
	}
	if s.MinProperties != nil {
		add("min properties %d", *s.MinProperties)
	}
	if s.MaxProperties != nil {
		add("max properties %d", *s.MaxProperties)
	}
	if s.XListType != nil {
		if len(s.XListMapKeys) > 0 {
			add("list type %s (keys %s)", *s.XListType, strings.Join(s.XListMapKeys, ", "))
		} else {
			add("list type %s", *s.XListType)
		}
	}
	if s.XMapType != nil {
		add("map type %s", *s.XMapType)
	}
	if s.Nullable {
		add("nullable")
	}
	for _, r := range s.XValidations {
		rule := "rule " + md.Code(r.Rule)
		if r.Message != "" {
			rule += ": " + r.Message
		}
		v = append(v, rule)
	}
	return strings.Join(v, "; ")
}

// Render writes the reference of crds: a list of the kinds, then per kind
// and version its facts, printer columns and fields.
func Render(w io.Writer, crds []apiextensionsv1.CustomResourceDefinition, collapse Collapse) error {
	fmt.Fprintln(w, "| Kind | Group | Versions | Scope | Short names |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, c := range crds {
		var versions []string
		for _, v := range c.Spec.Versions {
			versions = append(versions, v.Name)
		}
		fmt.Fprintf(w, "| [%s](#%s) | %s | %s | %s | %s |\n", c.Spec.Names.Kind, md.Anchor(c.Spec.Names.Kind), c.Spec.Group,
			strings.Join(versions, ", "), c.Spec.Scope, strings.Join(c.Spec.Names.ShortNames, ", "))
	}
	for _, c := range crds {
		kind := c.Spec.Names.Kind
		fmt.Fprintf(w, "\n## %s\n", kind)
		for _, v := range c.Spec.Versions {
			if err := renderVersion(w, c, v, collapse[kind]); err != nil {
				return fmt.Errorf("%s %s: %w", kind, v.Name, err)
			}
		}
	}
	for kind := range collapse {
		if !slices.ContainsFunc(crds, func(c apiextensionsv1.CustomResourceDefinition) bool { return c.Spec.Names.Kind == kind }) {
			return fmt.Errorf("kind %s to collapse fields of: no such CustomResourceDefinition", kind)
		}
	}
	return nil
}

func renderVersion(w io.Writer, c apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion, collapse map[string]Link) error {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return fmt.Errorf("no openAPIV3Schema")
	}
	schema := v.Schema.OpenAPIV3Schema
	fmt.Fprintf(w, "\n### %s/%s %s\n\n", c.Spec.Group, v.Name, c.Spec.Names.Kind)
	if schema.Description != "" {
		fmt.Fprintf(w, "%s\n\n", strings.Join(strings.Fields(schema.Description), " "))
	}
	facts := [][2]string{
		{"API version", md.Code(c.Spec.Group + "/" + v.Name)},
		{"Scope", string(c.Spec.Scope)},
		{"Resource", md.Code(c.Spec.Names.Plural) + " (singular " + md.Code(c.Spec.Names.Singular) + ")"},
	}
	if len(c.Spec.Names.ShortNames) > 0 {
		facts = append(facts, [2]string{"Short names", codes(c.Spec.Names.ShortNames)})
	}
	if len(c.Spec.Names.Categories) > 0 {
		facts = append(facts, [2]string{"Categories", codes(c.Spec.Names.Categories)})
	}
	served := "served"
	if !v.Served {
		served = "not served"
	}
	if v.Storage {
		served += ", storage version"
	}
	if v.Deprecated {
		served += ", deprecated"
		if v.DeprecationWarning != nil {
			served += ": " + *v.DeprecationWarning
		}
	}
	facts = append(facts, [2]string{"Version", served})
	if s := v.Subresources; s != nil {
		var subs []string
		if s.Status != nil {
			subs = append(subs, "status")
		}
		if s.Scale != nil {
			subs = append(subs, "scale")
		}
		if len(subs) > 0 {
			facts = append(facts, [2]string{"Subresources", strings.Join(subs, ", ")})
		}
	}
	for _, f := range facts {
		fmt.Fprintf(w, "- %s: %s\n", f[0], f[1])
	}
	if len(v.AdditionalPrinterColumns) > 0 {
		fmt.Fprintf(w, "\nColumns of `kubectl get %s` (priority above 0: with `-o wide` only):\n\n", c.Spec.Names.Plural)
		var rows [][]string
		for _, col := range v.AdditionalPrinterColumns {
			t := col.Type
			if col.Format != "" {
				t += " (" + col.Format + ")"
			}
			rows = append(rows, []string{col.Name, t, md.Code(col.JSONPath), strconv.Itoa(int(col.Priority)), col.Description})
		}
		md.Table(w, []string{"Column", "Type", "JSONPath", "Priority", "Description"}, rows)
	}
	rows, err := Fields(schema, collapse)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nFields (besides `apiVersion`, `kind` and `metadata`; `[]` is any item of a list, `<key>` any key of a map):\n\n")
	table := make([][]string, len(rows))
	for i, r := range rows {
		table[i] = []string{md.Code(r.Path), r.Type, r.Required, r.Default, r.Validation, r.Description}
	}
	md.Table(w, []string{"Field", "Type", "Required", "Default", "Validation", "Description"}, table)
	return nil
}

func codes(s []string) string {
	c := make([]string, len(s))
	for i, x := range s {
		c[i] = md.Code(x)
	}
	return strings.Join(c, ", ")
}
