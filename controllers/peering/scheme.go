package peering

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// scheme knows core and ferry kinds, for clients of provider clusters.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// Scheme returns the scheme ferry's controllers use: core and ferry kinds.
func Scheme() *runtime.Scheme { return scheme }
