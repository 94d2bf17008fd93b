package remotefit

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ferry-io/ferry/plugins/pluginargs"
)

// ArgsKind is the kind of RemoteFit's args.
const ArgsKind = "RemoteFitArgs"

// Policies for a virtual node that publishes no node-shape summary.
const (
	// UnknownShapesAllow admits the pod (the provider may predate summaries).
	UnknownShapesAllow = "Allow"
	// UnknownShapesDeny refuses it.
	UnknownShapesDeny = "Deny"
)

// Args configures RemoteFit (apiVersion scheduler.ferry.io/v1alpha1, kind
// RemoteFitArgs).
type Args struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`

	// IgnoredResources are requests RemoteFit does not check, e.g. a
	// resource providers do not report. Default none.
	IgnoredResources []corev1.ResourceName `json:"ignoredResources,omitempty"`

	// UnknownShapes: Allow (default) or Deny a virtual node without a
	// node-shape summary.
	UnknownShapes string `json:"unknownShapes,omitempty"`
}

// DefaultArgs are the args of a profile that sets none.
func DefaultArgs() Args { return Args{UnknownShapes: UnknownShapesAllow} }

// DecodeArgs decodes obj over the defaults and validates the result.
func DecodeArgs(obj runtime.Object) (Args, error) {
	args := DefaultArgs()
	if err := pluginargs.Decode(obj, ArgsKind, &args); err != nil {
		return args, err
	}
	if args.UnknownShapes == "" {
		args.UnknownShapes = UnknownShapesAllow
	}
	return args, args.Validate()
}

// Validate names the first bad field.
func (a Args) Validate() error {
	if a.UnknownShapes != UnknownShapesAllow && a.UnknownShapes != UnknownShapesDeny {
		return fmt.Errorf("%s: unknownShapes: %q is not supported (supported: %s, %s)", ArgsKind, a.UnknownShapes, UnknownShapesAllow, UnknownShapesDeny)
	}
	for i, r := range a.IgnoredResources {
		if r == "" {
			return fmt.Errorf("%s: ignoredResources[%d]: empty resource name", ArgsKind, i)
		}
	}
	return nil
}
