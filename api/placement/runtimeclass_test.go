package placement

import (
	"strings"
	"testing"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestPodStrategyWithRuntimeClass(t *testing.T) {
	ferry, gvisor := new(ferryv1alpha1.RuntimeClassVirtual), new("gvisor")
	const (
		local  = ferryv1alpha1.PodOffloadingLocal
		remote = ferryv1alpha1.PodOffloadingRemote
		both   = ferryv1alpha1.PodOffloadingLocalAndRemote
	)
	for _, tt := range []struct {
		ns      ferryv1alpha1.PodOffloadingStrategy
		ann     string // the pod's ferry.io/pod-offloading-strategy, "" for none
		rc      *string
		want    ferryv1alpha1.PodOffloadingStrategy
		wantErr string
	}{
		{ns: local, rc: ferry, want: remote},
		{ns: both, rc: ferry, want: remote},
		{ns: remote, rc: ferry, want: remote},
		{ns: "", rc: ferry, want: remote},
		{ns: local, ann: "Remote", rc: ferry, want: remote},
		{ns: both, ann: "Local", rc: ferry, wantErr: `metadata.annotations[ferry.io/pod-offloading-strategy]: Invalid value: "Local": spec.runtimeClassName "ferry" runs the pod on virtual nodes`},
		{ns: local, rc: gvisor, want: local},
		{ns: local, rc: nil, want: local},
		{ns: both, ann: "Local", rc: nil, want: local},
		{ns: local, ann: "Remote", rc: gvisor, wantErr: "a pod may narrow it, not widen it"},
	} {
		ann := map[string]string{}
		if tt.ann != "" {
			ann[AnnotationPodOffloadingStrategy] = tt.ann
		}
		got, err := PodStrategyWithRuntimeClass(tt.ns, ann, tt.rc)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ns %s, annotation %q, runtime class %v: error %v, want %q", tt.ns, tt.ann, tt.rc, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ns %s, annotation %q, runtime class %v: %s, %v; want %s", tt.ns, tt.ann, tt.rc, got, err, tt.want)
		}
	}
}

func TestRemoteRuntimeClass(t *testing.T) {
	ferry, gvisor := new(ferryv1alpha1.RuntimeClassVirtual), new("gvisor")
	for _, tt := range []struct {
		ann     *string
		rc      *string
		want    string // "" for none
		wantErr string
	}{
		{rc: ferry, want: ""},
		{rc: nil, want: ""},
		{rc: gvisor, want: "gvisor"},
		{ann: new("kata"), rc: ferry, want: "kata"},
		{ann: new("kata"), rc: gvisor, want: "kata"},
		{ann: new("Kata_1"), rc: ferry, wantErr: `metadata.annotations[ferry.io/remote-runtime-class]: Invalid value: "Kata_1": a RuntimeClass name of the provider: a lowercase RFC 1123 subdomain`},
		{ann: new(""), rc: ferry, wantErr: "a RuntimeClass name of the provider"},
		{ann: new("ferry"), rc: ferry, wantErr: `RuntimeClass "ferry" is ferry's own`},
	} {
		ann := map[string]string{}
		if tt.ann != nil {
			ann[ferryv1alpha1.AnnotationRemoteRuntimeClass] = *tt.ann
		}
		got, err := RemoteRuntimeClass(ann, tt.rc)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("annotation %v, runtime class %v: error %v, want %q", tt.ann, tt.rc, err, tt.wantErr)
			}
			continue
		}
		gotName := ""
		if got != nil {
			gotName = *got
		}
		if err != nil || gotName != tt.want || (tt.want == "" && got != nil) {
			t.Errorf("annotation %v, runtime class %v: %v, %v; want %q", tt.ann, tt.rc, got, err, tt.want)
		}
	}
}

func TestRuntimeClassNotOffloaded(t *testing.T) {
	got := RuntimeClassNotOffloaded("batch").Error()
	for _, want := range []string{"spec.runtimeClassName: Forbidden", `RuntimeClass "ferry"`, "namespace batch is not offloaded", "ferryctl offload namespace batch"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
}
