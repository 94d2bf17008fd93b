package pluginargs

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

type testArgs struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Limit      int32  `json:"limit,omitempty"`
}

func TestDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		raw     string
		want    int32
		wantErr string
	}{
		"empty keeps defaults": {raw: "", want: 7},
		"plain":                {raw: `{"limit": 3}`, want: 3},
		"typed":                {raw: `{"apiVersion":"scheduler.ferry.io/v1alpha1","kind":"TestArgs","limit": 4}`, want: 4},
		"typo":                 {raw: `{"limt": 3}`, wantErr: `unknown field "limt"`},
		"wrong version":        {raw: `{"apiVersion":"kubescheduler.config.k8s.io/v1","limit":1}`, wantErr: `apiVersion "kubescheduler.config.k8s.io/v1" is not supported`},
		"wrong kind":           {raw: `{"kind":"OtherArgs"}`, wantErr: `kind "OtherArgs", want TestArgs`},
		"wrong type":           {raw: `{"limit":"many"}`, wantErr: "testArgs.limit"},
	} {
		args := testArgs{Limit: 7}
		var obj runtime.Object
		if tc.raw != "" {
			obj = &runtime.Unknown{Raw: []byte(tc.raw)}
		}
		err := Decode(obj, "TestArgs", &args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "TestArgs: ") {
				t.Errorf("%s: %v, want an error naming the plugin and %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || args.Limit != tc.want {
			t.Errorf("%s: %+v, %v; want limit %d", name, args, err, tc.want)
		}
	}
}

// FuzzDecode: any bytes decode or fail with an error naming the kind.
func FuzzDecode(f *testing.F) {
	f.Add(`{"limit": 3}`)
	f.Add(`{"kind":"X"}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, raw string) {
		var args testArgs
		if err := Decode(&runtime.Unknown{Raw: []byte(raw)}, "TestArgs", &args); err != nil && !strings.HasPrefix(err.Error(), "TestArgs: ") {
			t.Errorf("error %q does not name the args kind", err)
		}
	})
}
