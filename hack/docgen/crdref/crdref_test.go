package crdref

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var podSpec = Link{Text: "PodSpec", URL: "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodSpec"}

func TestFieldsOfFixture(t *testing.T) {
	crds, err := Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Fields(crds[0].Spec.Versions[0].Schema.OpenAPIV3Schema, map[string]Link{"spec.template.spec": podSpec})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Path: "spec", Type: "object"},
		{Path: "spec.amount", Type: "int or string"},
		{Path: "spec.labels", Type: "map of string"},
		{Path: "spec.mode", Type: "string", Validation: "one of `\"Fast\"`, `\"Slow\"`"},
		{Path: "spec.name", Type: "string", Validation: "max length 63; pattern `^[a-z]+$`; rule `self == oldSelf`: name is immutable"},
		{Path: "spec.ports", Type: "array of object", Validation: "max items 4; list type map (keys port)"},
		{Path: "spec.ports[]", Type: "object"},
		{Path: "spec.ports[].port", Type: "integer", Required: "yes"},
		{Path: "spec.size", Type: "integer (int32)", Required: "yes", Default: "`3`", Validation: ">= 1; < 10", Description: "how many\n(whole | part)"},
		{Path: "spec.template", Type: "object"},
		{Path: "spec.template.spec", Type: "[PodSpec](" + podSpec.URL + ")"},
		{Path: "status", Type: "object"},
		{Path: "status.ready", Type: "boolean"},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}

func TestCollapsedPathMustExist(t *testing.T) {
	crds, err := Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Fields(crds[0].Spec.Versions[0].Schema.OpenAPIV3Schema, map[string]Link{"spec.podSpec": podSpec})
	if err == nil || !strings.Contains(err.Error(), "spec.podSpec") {
		t.Errorf("Fields with a collapsed path not in the schema = %v, want an error naming it", err)
	}
	var b bytes.Buffer
	if err := Render(&b, crds, Collapse{"Gadget": {"spec": podSpec}}); err == nil || !strings.Contains(err.Error(), "Gadget") {
		t.Errorf("Render collapsing a kind not loaded = %v, want an error naming it", err)
	}
}

func TestRenderFixture(t *testing.T) {
	crds, err := Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, crds, Collapse{"Widget": {"spec.template.spec": podSpec}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| [Widget](#widget) | example.com | v1 | Namespaced | wd |",
		"## Widget",
		"### example.com/v1 Widget",
		"- Scope: Namespaced",
		"- Short names: `wd`",
		"- Version: served, storage version",
		"- Subresources: status",
		"| Size | integer | `.spec.size` | 0 |  |",
		"| Age | date | `.metadata.creationTimestamp` | 1 |  |",
		"| `spec.size` | integer (int32) | yes | `3` | >= 1; < 10 | how many (whole \\| part) |",
		"| `spec.template.spec` | [PodSpec](" + podSpec.URL + ") |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered reference lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "containers") {
		t.Errorf("the collapsed PodSpec's fields are listed:\n%s", out)
	}
}
