package app

import (
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
)

// Output formats of listings besides the default table, printed by
// k8s.io/cli-runtime's printers as kubectl prints them.
const (
	outputTable = ""
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

// objectPrinter is the printer of -o format, which sets each object's kind
// from ferry's scheme (clients return them without); nil for the table.
func objectPrinter(format string) (printers.ResourcePrinter, error) {
	var p printers.ResourcePrinter
	switch format {
	case outputTable:
		return nil, nil
	case outputJSON:
		p = &printers.JSONPrinter{}
	case outputYAML:
		p = &printers.YAMLPrinter{}
	case outputName:
		p = &printers.NamePrinter{}
	default:
		return nil, fmt.Errorf("-o %q: must be json, yaml or name (or unset for the table)", format)
	}
	return printers.NewTypeSetter(ferryscheme.Scheme()).ToPrinter(p), nil
}

// printObjects prints objs as one v1 List (json, yaml) or one name per line.
func printObjects(p printers.ResourcePrinter, format string, objs []runtime.Object, out io.Writer) error {
	if format == outputName {
		for _, o := range objs {
			if err := p.PrintObj(o, out); err != nil {
				return err
			}
		}
		return nil
	}
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, o := range objs {
		// The list's items carry their kinds: set them as the printer would.
		typed, err := withKind(o)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, runtime.RawExtension{Object: typed})
	}
	return p.PrintObj(list, out)
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
