package clusterselector

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ferry-io/ferry/plugins/pluginargs"
)

// ArgsKind is the kind of ClusterSelector's args.
const ArgsKind = "ClusterSelectorArgs"

// Args configures ClusterSelector (apiVersion scheduler.ferry.io/v1alpha1,
// kind ClusterSelectorArgs).
type Args struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`

	// MaxPreFilterNodes: when a pod may only run on virtual nodes and at
	// most this many match, PreFilter hands the scheduler that set, so the
	// other nodes are not visited at all. 0 turns it off. Default 256.
	MaxPreFilterNodes int32 `json:"maxPreFilterNodes"`
}

// DefaultArgs are the args of a profile that sets none.
func DefaultArgs() Args { return Args{MaxPreFilterNodes: 256} }

// DecodeArgs decodes obj over the defaults and validates the result.
func DecodeArgs(obj runtime.Object) (Args, error) {
	args := DefaultArgs()
	if err := pluginargs.Decode(obj, ArgsKind, &args); err != nil {
		return args, err
	}
	return args, args.Validate()
}

// Validate names the first bad field.
func (a Args) Validate() error {
	if a.MaxPreFilterNodes < 0 {
		return fmt.Errorf("%s: maxPreFilterNodes: %d must be 0 or more", ArgsKind, a.MaxPreFilterNodes)
	}
	return nil
}
