package reflection

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	o := Options{Workers: map[Kind]int{Ingresses: 0, Secrets: 9}, Policies: map[Kind]Policy{Secrets: AllowList}}.WithDefaults()
	if o.Workers[Ingresses] != 0 || o.Workers[Secrets] != 9 || o.Workers[ConfigMaps] != DefaultWorkers[ConfigMaps] {
		t.Errorf("workers = %v: want ingresses disabled, secrets 9, configmaps the default", o.Workers)
	}
	if o.Policies[Secrets] != AllowList || o.Policies[ConfigMaps] != DenyList {
		t.Errorf("policies = %v: want secrets AllowList, the rest DenyList", o.Policies)
	}
	if o.ResyncPeriod != DefaultResyncPeriod || o.TokenExpiration != DefaultTokenExpiration || o.ClientQPS != DefaultClientQPS {
		t.Errorf("defaults not applied: %+v", o)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want []string // substrings of the error, in order; none: valid
	}{
		{name: "zero", o: Options{}},
		{name: "disable and allow-list", o: Options{Workers: map[Kind]int{Events: 0}, Policies: map[Kind]Policy{Secrets: AllowList}}},
		{name: "unknown kind", o: Options{Workers: map[Kind]int{"pods": 1}}, want: []string{`--reflection-workers: unknown kind "pods"`}},
		{name: "negative workers", o: Options{Workers: map[Kind]int{Secrets: -1}}, want: []string{"--reflection-workers: secrets=-1"}},
		{name: "bad policy", o: Options{Policies: map[Kind]Policy{ConfigMaps: "Sometimes", Events: AllowList}},
			want: []string{`configmaps="Sometimes" must be DenyList or AllowList`, "events have no policy"}},
		{name: "class maps", o: Options{IngressClasses: map[string]string{"": "x"}, StorageClasses: map[string]string{"fast": "a,b"}},
			want: []string{"--ingress-class-map: empty local class name", `--storage-class-map: fast="a,b"`}},
		{name: "short token", o: Options{TokenExpiration: time.Minute}, want: []string{"--service-account-token-expiration (1m0s) must be at least 10m0s"}},
		{name: "negative", o: Options{ClientQPS: -1, ResyncPeriod: -time.Second}, want: []string{"--reflection-client-qps", "--reflection-resync-period"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.want)
			}
			msg, at := err.Error(), 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("Validate() = %q, want %q (in order)", msg, w)
				}
				at += i + len(w)
			}
		})
	}
}
