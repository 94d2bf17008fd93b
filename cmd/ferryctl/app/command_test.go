package app

import (
	"io"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

func TestParseResources(t *testing.T) {
	got, err := ParseResources("cpu=8, memory=32Gi,nvidia.com/gpu=1")
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for name, q := range want {
		if g := got[name]; g.Cmp(q) != 0 {
			t.Errorf("%s = %s, want %s", name, g.String(), q.String())
		}
	}
	if got, err := ParseResources(" "); err != nil || got != nil {
		t.Errorf("empty request = %v, %v; want none", got, err)
	}
}

func TestParseResourcesNamesTheBadEntry(t *testing.T) {
	for input, want := range map[string]string{
		"cpu":                 `"cpu" is not name=quantity`,
		"cpu=eight":           `cpu="eight"`,
		"cpu=-1":              "must be positive",
		"cpu=0":               "must be positive",
		"cpu=1,cpu=2":         "cpu is given twice",
		"=4":                  `"=4" is not name=quantity`,
		"bad name!=1":         `resource name "bad name!"`,
		"cpu=1,,memory=1Gi":   `"" is not name=quantity`,
		"example.com/fpga=1x": `example.com/fpga="1x"`,
	} {
		_, err := ParseResources(input)
		if err == nil || !strings.Contains(err.Error(), "--resources") || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseResources(%q) = %v, want an error naming --resources and %s", input, err, want)
		}
	}
}

// FuzzParseResources: any input either parses to positive quantities or is
// refused with an error naming the flag; it never panics.
func FuzzParseResources(f *testing.F) {
	for _, seed := range []string{"cpu=8,memory=32Gi", "nvidia.com/gpu=1", "cpu", "=", "cpu=1e3", ",,"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseResources(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--resources") {
				t.Fatalf("error %q does not name the flag", err)
			}
			return
		}
		for name, q := range got {
			if q.Sign() <= 0 {
				t.Fatalf("%s=%s accepted but not positive", name, q.String())
			}
		}
	})
}

func TestClaimRowsTellWhereTheDataLives(t *testing.T) {
	pv := func(name, claim string, labels, annotations map[string]string, class string) corev1.PersistentVolume {
		return corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.PersistentVolumeSpec{StorageClassName: class, ClaimRef: &corev1.ObjectReference{Namespace: "shop", Name: claim},
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}
	}
	rows := claimRows([]corev1.PersistentVolume{
		pv("pv-b", "data-b", map[string]string{ferryv1alpha1.LabelClusterID: "eu-1"},
			map[string]string{storage.AnnotationRemoteClaim: "shop-home/data-b", storage.AnnotationRemotePhase: "Pending"}, ferryv1alpha1.StorageClassVirtual),
		pv("pv-a", "data-a", nil, map[string]string{storage.AnnotationBackingClaim: "ferry-storage/pvc-1"}, ferryv1alpha1.StorageClassVirtual),
		pv("pv-c", "other", nil, nil, "standard"),
	})
	want := [][]string{
		{"shop/data-a", "this cluster", "ferry-storage/pvc-1", "1Gi", "Bound"},
		{"shop/data-b", "eu-1", "shop-home/data-b", "1Gi", "Pending"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows = %v, want %v", rows, want)
	}
}

// With no kubeconfig anywhere, every command that talks to a cluster says
// which flag and variable to set, not client-go's KUBERNETES_MASTER.
func TestCommandsWithoutAKubeconfigNameTheFlagAndKUBECONFIG(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	for args, flag := range map[string]string{
		"status":                    "--kubeconfig",
		"unpeer":                    "--consumer-kubeconfig",
		"offload namespace default": "--kubeconfig",
	} {
		cmd := NewCommand()
		cmd.SetArgs(strings.Fields(args))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "$KUBECONFIG") || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
			t.Errorf("ferryctl %s = %v, want an error naming %s and $KUBECONFIG, not KUBERNETES_MASTER", args, err, flag)
		}
	}
}

func TestCheckAPIServerURL(t *testing.T) {
	for in, ok := range map[string]bool{
		"":                          true,
		"https://172.31.250.2:6443": true,
		"https://api.example.com":   true,
		"https://[fd00::1]:443":     true,
		"http://api.example.com":    false,
		"api.example.com:6443":      false,
		"https://":                  false,
		"https://a:0":               false,
		"https://a:70000":           false,
		"https://a:6443/path":       false,
		"https://a:6443?x=1":        false,
		"https://user@a:6443":       false,
		"https://a b":               false,
	} {
		if err := checkAPIServerURL(in); (err == nil) != ok {
			t.Errorf("checkAPIServerURL(%q) = %v, want ok=%t", in, err, ok)
		}
	}
}

// FuzzCheckAPIServerURL: whatever --provider-api-server-url holds, the check
// does not panic, and what it accepts is an https URL with a host a client
// can dial.
func FuzzCheckAPIServerURL(f *testing.F) {
	for _, s := range []string{"https://172.31.250.2:6443", "https://[fd00::1]:443", "http://a", "https://a:0", "https://a b", "https://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkAPIServerURL(s) != nil || s == "" {
			return
		}
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			t.Fatalf("accepted %q: %v %+v", s, err, u)
		}
	})
}
