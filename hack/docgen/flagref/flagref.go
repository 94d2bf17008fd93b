// Package flagref renders a component's command-line flags as Markdown
// tables: name, type, default and usage of every flag a pflag.FlagSet
// parses, the logging flags klog adds apart.
package flagref

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/ferry-io/ferry/hack/docgen/md"
)

// Section is one command line of a component: the binary's, or one of its
// subcommands'.
type Section struct {
	// Heading names the section (a command line: "ferry-gateway
	// route-agent"); Intro, if any, is a paragraph under it.
	Heading, Intro string
	Flags          *pflag.FlagSet
	// Defaults replaces the default shown of the flags it names, for
	// defaults that depend on where or how the binary runs (an environment
	// variable, the build's version): the page must not.
	Defaults map[string]string
}

// klogFlags are the names of the flags klog.InitFlags registers.
func klogFlags() map[string]bool {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// typeNames are friendlier names of pflag's value types.
var typeNames = map[string]string{
	"stringSlice":    "strings (comma-separated, repeatable)",
	"stringArray":    "string (repeatable, one value each)",
	"stringToString": "key=value pairs (comma-separated)",
	"stringToInt":    "key=integer pairs (comma-separated)",
}

// Render writes sections: per section a table of its own flags in name
// order, then one of klog's logging flags when it has them.
func Render(w io.Writer, sections []Section) error {
	logging := klogFlags()
	for _, s := range sections {
		fmt.Fprintf(w, "\n## %s\n\n", s.Heading)
		if s.Intro != "" {
			fmt.Fprintf(w, "%s\n\n", s.Intro)
		}
		var own, klogRows [][]string
		used := map[string]bool{}
		s.Flags.SortFlags = true
		s.Flags.VisitAll(func(f *pflag.Flag) {
			def := md.Code(f.DefValue)
			if d, ok := s.Defaults[f.Name]; ok {
				def, used[f.Name] = d, true
			}
			t := f.Value.Type()
			if n, ok := typeNames[t]; ok {
				t = n
			}
			name := "--" + f.Name
			if f.Shorthand != "" {
				name = "-" + f.Shorthand + ", " + name
			}
			usage := f.Usage
			if f.Deprecated != "" {
				usage = "Deprecated: " + f.Deprecated + ". " + usage
			}
			row := []string{md.Code(name), t, def, usage}
			if logging[f.Name] {
				klogRows = append(klogRows, row)
			} else {
				own = append(own, row)
			}
		})
		for name := range s.Defaults {
			if !used[name] {
				return fmt.Errorf("%s: default given for --%s, which it does not parse", s.Heading, name)
			}
		}
		header := []string{"Flag", "Type", "Default", "Usage"}
		md.Table(w, header, own)
		if len(klogRows) > 0 {
			fmt.Fprintf(w, "\nLogging flags (klog's, in %s):\n\n", strings.Fields(s.Heading)[0])
			md.Table(w, header, klogRows)
		}
	}
	return nil
}
