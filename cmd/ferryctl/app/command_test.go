package app

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
