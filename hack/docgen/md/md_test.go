package md

import (
	"bytes"
	"testing"
)

func TestCellEscapesPipesAndJoinsLines(t *testing.T) {
	if got, want := Cell("a|b\n  c\td"), `a\|b c d`; got != want {
		t.Errorf("Cell = %q, want %q", got, want)
	}
}

func TestCode(t *testing.T) {
	for in, want := range map[string]string{
		"":        "`\"\"`",
		"a":       "`a`",
		"a`b":     "``a`b``",
		"`a":      "`` `a ``",
		"^[a-z]$": "`^[a-z]$`",
	} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	Table(&b, []string{"A", "B"}, [][]string{{"x|y", "two\nlines"}})
	want := "| A | B |\n|---|---|\n| x\\|y | two lines |\n"
	if b.String() != want {
		t.Errorf("Table wrote\n%s\nwant\n%s", b.String(), want)
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"ForeignCluster":            "foreigncluster",
		"Logging flags (klog)":      "logging-flags-klog",
		"ferry.io/v1alpha1":         "ferryiov1alpha1",
		"ferry-gateway route-agent": "ferry-gateway-route-agent",
	} {
		if got := Anchor(in); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
