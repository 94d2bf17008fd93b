package flagref

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func fixture() *pflag.FlagSet {
	fs := pflag.NewFlagSet("ferry-thing", pflag.ContinueOnError)
	fs.Duration("period", 5*time.Second, "how often | why")
	fs.StringSlice("pool", []string{"10.0.0.0/8"}, "CIDRs")
	fs.String("log-dir", "/var/tmp", "where logs go")
	fs.StringP("name", "n", "", "a name")
	fs.String("old", "", "former name")
	_ = fs.MarkDeprecated("old", "use --name")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return fs
}

func TestRenderFixture(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, []Section{{Heading: "ferry-thing", Intro: "Runs a thing.", Flags: fixture(), Defaults: map[string]string{"log-dir": "`$TMPDIR`"}}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	own, logging, found := strings.Cut(out, "Logging flags (klog's, in ferry-thing):")
	if !found {
		t.Fatalf("no logging section:\n%s", out)
	}
	for _, want := range []string{
		"## ferry-thing\n\nRuns a thing.\n\n| Flag | Type | Default | Usage |",
		"| `--period` | duration | `5s` | how often \\| why |",
		"| `--pool` | strings (comma-separated, repeatable) | `[10.0.0.0/8]` | CIDRs |",
		"| `--log-dir` | string | `$TMPDIR` | where logs go |",
		"| `-n, --name` | string | `\"\"` | a name |",
		"| `--old` | string | `\"\"` | Deprecated: use --name. former name |",
	} {
		if !strings.Contains(own, want) {
			t.Errorf("own flags lack %q:\n%s", want, own)
		}
	}
	if strings.Contains(own, "--v`") || !strings.Contains(logging, "| `-v, --v` | ") || !strings.Contains(logging, "| `--vmodule` | ") {
		t.Errorf("klog's flags not apart from the thing's own:\n%s", out)
	}
	if strings.Index(own, "--log-dir") > strings.Index(own, "--period") {
		t.Errorf("flags not in name order:\n%s", own)
	}
}

func TestDefaultForAFlagNotParsed(t *testing.T) {
	err := Render(&bytes.Buffer{}, []Section{{Heading: "ferry-thing", Flags: fixture(), Defaults: map[string]string{"gone": "x"}}})
	if err == nil || !strings.Contains(err.Error(), "--gone") {
		t.Errorf("Render with a default for an unknown flag = %v, want an error naming it", err)
	}
}
