package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestStatusOutputFormats(t *testing.T) {
	objs := []runtime.Object{
		&ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "provider"}, Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "provider"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}},
	}
	render := func(format string) string {
		t.Helper()
		o := output{format: format}
		if err := o.validate(); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := o.printObjects(objs, &out); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		return out.String()
	}

	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(render(outputJSON)), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" || len(list.Items) != 2 || list.Items[0].Kind != "ForeignCluster" || list.Items[0].APIVersion != "ferry.io/v1alpha1" || list.Items[1].Kind != "PersistentVolume" {
		t.Errorf("-o json: %+v", list)
	}
	if got := render(outputYAML); !strings.Contains(got, "kind: List") || !strings.Contains(got, "kind: ForeignCluster") {
		t.Errorf("-o yaml:\n%s", got)
	}
	if got, want := render(outputName), "foreigncluster.ferry.io/provider\npersistentvolume/pv-1\n"; got != want {
		t.Errorf("-o name: %q, want %q", got, want)
	}
	for _, format := range []string{outputTable, outputWide} {
		if o := (output{format: format}); o.validate() != nil || !o.tables() {
			t.Errorf("-o %s: %v, tables %v; want the table", format, o.validate(), o.tables())
		}
	}
	if err := (&output{format: "wdie"}).validate(); err == nil || !strings.HasPrefix(err.Error(), `-o "wdie"`) || !strings.Contains(err.Error(), "table, wide, json, yaml, name") {
		t.Errorf("-o wdie: %v, want an error naming -o and the formats", err)
	}
}

func TestOffloadingClustersPrintAsATable(t *testing.T) {
	var out bytes.Buffer
	printClusters(&out, []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu", TwinNamespace: "shop-home", Phase: ferryv1alpha1.OffloadingReady}})
	if want := "CLUSTER   TWIN NAMESPACE   PHASE\neu        shop-home        Ready\n"; out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}

func TestOutputFlagCompletesItsValues(t *testing.T) {
	var out bytes.Buffer
	cmd := NewCommand()
	cmd.SetArgs([]string{"__complete", "status", "-o", ""})
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(strings.Fields(out.String())[:5], " "), "table wide json yaml name"; got != want {
		t.Errorf("completion of -o: %q, want %q first", out.String(), want)
	}
}
