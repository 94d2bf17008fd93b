// Package scheme is the runtime scheme every ferry component and ferryctl
// use for their clients: the core kinds and ferry's.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

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

// Scheme returns the scheme of core and ferry kinds. It is shared: do not
// add to it.
func Scheme() *runtime.Scheme { return scheme }
