package controllermanager

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ferry-io/ferry/controllers/peering"
)

func TestValidateNamesTheBadFlag(t *testing.T) {
	launcher := &peering.FuncLauncher{Run: func(context.Context, types.NamespacedName) error { return nil }}
	good := Options{ClusterID: "consumer", SharingPercentage: 90, GrantDebounce: time.Second, Launcher: launcher}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"negative percentage":  {func(o *Options) { o.SharingPercentage = -10 }, "--sharing-percentage"},
		"zero percentage":      {func(o *Options) { o.SharingPercentage = 0 }, "--sharing-percentage"},
		"over 100 percent":     {func(o *Options) { o.SharingPercentage = 101 }, "between 1 and 100"},
		"cluster ID not a DNS": {func(o *Options) { o.ClusterID = "Consumer_1" }, `--cluster-id "Consumer_1"`},
		"no cluster ID":        {func(o *Options) { o.ClusterID = "" }, "--cluster-id"},
		"bad cluster label":    {func(o *Options) { o.ClusterLabels = map[string]string{"bad key!": "x"} }, `--cluster-labels: key "bad key!"`},
		"negative debounce":    {func(o *Options) { o.GrantDebounce = -time.Second }, "--grant-debounce"},
	} {
		o := good
		tc.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}
