package app

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"sigs.k8s.io/yaml"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
)

// Output formats of listings, printed by k8s.io/cli-runtime's printers as
// kubectl prints them: tables (wide adds their less important columns), or
// the objects behind them.
const (
	outputTable = "table"
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

var outputFormats = []string{outputTable, outputWide, outputJSON, outputYAML, outputName}

// output is the -o flag every listing of ferryctl takes, and the one way
// they print: tables through cli-runtime's table printer, objects through
// its JSON, YAML and name printers.
type output struct {
	format string
}

// bind registers -o on cmd; objects says what json, yaml and name print.
func (o *output) bind(cmd *cobra.Command, objects string) {
	cmd.Flags().StringVarP(&o.format, "output", "o", outputTable,
		"table, wide (more columns), json, yaml or name (print "+objects+" as kubectl does)")
	completeValues(cmd, "output", outputFormats...)
}

// validate refuses an unknown format, naming the flag.
func (o *output) validate() error {
	if !slices.Contains(outputFormats, o.format) {
		return fmt.Errorf("-o %q: must be one of %s", o.format, strings.Join(outputFormats, ", "))
	}
	return nil
}

// tables reports whether the format prints tables rather than objects.
func (o *output) tables() bool { return o.format == outputTable || o.format == outputWide }

// printTable prints t as kubectl prints a table: upper-case headers, and
// the columns of priority above 0 with -o wide only. An empty table prints
// nothing.
func (o *output) printTable(t *metav1.Table, out io.Writer) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: o.format == outputWide}).PrintObj(t, out)
}

// printObjects prints objs as one v1 List (json, yaml) or one name per
// line, each with its kind set from ferry's scheme (clients return them
// without).
func (o *output) printObjects(objs []runtime.Object, out io.Writer) error {
	var p printers.ResourcePrinter
	switch o.format {
	case outputJSON:
		p = &printers.JSONPrinter{}
	case outputYAML:
		p = &printers.YAMLPrinter{}
	case outputName:
		p = &printers.NamePrinter{}
	default:
		return fmt.Errorf("-o %q: not an object format", o.format)
	}
	p = printers.NewTypeSetter(ferryscheme.Scheme()).ToPrinter(p)
	if o.format == outputName {
		for _, obj := range objs {
			if err := p.PrintObj(obj, out); err != nil {
				return err
			}
		}
		return nil
	}
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		// The list's items carry their kinds: set them as the printer would.
		typed, err := withKind(obj)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, runtime.RawExtension{Object: typed})
	}
	return p.PrintObj(list, out)
}

// printData prints what is not an API object (what discover finds) in the
// object formats: JSON or YAML of v, or names one per line.
func (o *output) printData(v any, names []string, out io.Writer) error {
	switch o.format {
	case outputJSON:
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	case outputName:
		for _, n := range names {
			fmt.Fprintln(out, n)
		}
		return nil
	}
	return fmt.Errorf("-o %q: not an object format", o.format)
}

// withKind is a copy of o with its apiVersion and kind set from ferry's
// scheme.
func withKind(o runtime.Object) (runtime.Object, error) {
	gvks, _, err := ferryscheme.Scheme().ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		return nil, fmt.Errorf("kind of %T: %w", o, err)
	}
	c := o.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(gvks[0])
	return c, nil
}

// column is a table column: priority 0 is always shown, 1 with -o wide.
func column(name string, priority int32, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Priority: priority, Description: description}
}

// stringTable is a table of string cells.
func stringTable(columns []metav1.TableColumnDefinition, rows [][]string) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns}
	for _, r := range rows {
		cells := make([]any, len(r))
		for i, c := range r {
			cells[i] = c
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells})
	}
	return t
}
