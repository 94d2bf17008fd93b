package webhooks

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestValidateAnnotations(t *testing.T) {
	errs := ValidateAnnotations("Pod", map[string]string{
		"app.kubernetes.io/name":                  "web",
		placement.AnnotationPodOffloadingStrategy: "Remote",
		"ferry.io/data-gravity":                   "true",
		"ferry.io/offloading":                     "x",
		"ferry.io/applied":                        "webhook",
	}, ferryv1alpha1.PodOffloadingLocal, "ferry.io/applied")
	got := errs.ToAggregate().Error()
	for _, want := range []string{
		`metadata.annotations[ferry.io/data-gravity]: Unsupported value: "ferry.io/data-gravity": supported values: "ferry.io/pod-offloading-strategy"`,
		`metadata.annotations[ferry.io/offloading]: Unsupported value`,
		`metadata.annotations[ferry.io/pod-offloading-strategy]: Invalid value: "Remote"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q\nwant one containing %q", got, want)
		}
	}
	if len(errs) != 3 {
		t.Errorf("%d errors, want 3 (the ferry-owned one and the user's own annotations pass): %v", len(errs), errs)
	}
	if errs := ValidateAnnotations("PersistentVolumeClaim", map[string]string{placement.AnnotationDataGravity: "yes"}, ""); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), `supported values: "true", "false"`) {
		t.Errorf("data gravity %q: %v", "yes", errs)
	}
	if errs := ValidateAnnotations("PersistentVolumeClaim", map[string]string{placement.AnnotationDataGravity: "true",
		ferryv1alpha1.AnnotationSkipReflection: "true", ferryv1alpha1.AnnotationAllowReflection: "false"}, ""); len(errs) != 0 {
		t.Errorf("valid PVC annotations refused: %v", errs)
	}
	if errs := ValidateAnnotations("PersistentVolumeClaim", map[string]string{ferryv1alpha1.AnnotationSkipReflection: "yes"}, ""); len(errs) != 1 ||
		errs[0].Error() != `metadata.annotations[ferry.io/skip-reflection]: Unsupported value: "yes": supported values: "true", "false"` {
		t.Errorf("skip-reflection %q: %v", "yes", errs)
	}
}

// FuzzValidateAnnotations: whatever a user writes, validation does not
// panic, and every error names the annotation it is about.
func FuzzValidateAnnotations(f *testing.F) {
	f.Add("ferry.io/pod-offloading-strategy", "Remote", "Local")
	f.Add("ferry.io/data-gravity", "true", "")
	f.Add("ferry.io/", "\x00", "LocalAndRemote")
	f.Add("ferry.io/pod-offloading-strategy", "LocalAndRemote\n", "Remote")
	f.Fuzz(func(t *testing.T, key, value, ns string) {
		for _, kind := range []string{"Pod", "PersistentVolumeClaim"} {
			errs := ValidateAnnotations(kind, map[string]string{key: value}, ferryv1alpha1.PodOffloadingStrategy(ns))
			for _, e := range errs {
				if !utf8.ValidString(key) {
					continue
				}
				if !strings.Contains(e.Field, key) {
					t.Errorf("error %q does not name annotation %q", e.Error(), key)
				}
			}
			if !strings.HasPrefix(key, ferryv1alpha1.KeyPrefix) && len(errs) > 0 {
				t.Errorf("annotation %q is not ferry's but was refused: %v", key, errs)
			}
		}
	})
}
