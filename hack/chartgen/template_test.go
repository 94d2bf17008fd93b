package main

import (
	"strings"
	"testing"
)

func TestMarshalReplacesTokensByTemplates(t *testing.T) {
	tp := newTemplater()
	obj := map[string]any{
		"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b", tp.IncludeKey("ferry.labels"): ""}},
		"spec": map[string]any{
			"replicas":  tp.Value(".Values.replicas"),
			"resources": tp.Block(".Values.resources"),
			"args":      []any{"--id=" + tp.Value(".Values.id"), tp.Item("if .Values.on", "--on")},
			"legend":    "{{node}}",
		},
	}
	tp.escapeActions(obj)
	got, err := tp.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"replicas: {{ .Values.replicas }}\n",
		"  resources:\n    {{- toYaml .Values.resources | nindent 4 }}\n",
		"    - --id={{ .Values.id }}\n    {{- if .Values.on }}\n    - --on\n    {{- end }}\n",
		"    a: b\n    {{- include \"ferry.labels\" . | nindent 4 }}\n",
		`legend: {{ "{{node}}" | quote }}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestMarshalRefusesATokenItCannotReplace(t *testing.T) {
	tp := newTemplater()
	// A block stands for a map or list under a key, not for a list entry.
	_, err := tp.Marshal(map[string]any{"args": []any{tp.Block(".Values.args")}})
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("Marshal = %v, want an error about a token left", err)
	}
}

func TestWorkloadFlagsMustExistInTheManifest(t *testing.T) {
	obj := map[string]any{"kind": "Deployment", "metadata": map[string]any{"name": "ferry-scheduler"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "scheduler", "args": []any{"--config=/etc/ferry/scheduler.yaml"}}}}}}}
	err := templatize(newTemplater(), obj)
	if err == nil || !strings.Contains(err.Error(), "--leader-elect") {
		t.Fatalf("templatize = %v, want an error naming the missing flag --leader-elect", err)
	}
}
