package datagravity

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ferry-io/ferry/plugins/pluginargs"
)

// ArgsKind is the kind of DataGravity's args.
const ArgsKind = "DataGravityArgs"

// Args configures DataGravity (apiVersion scheduler.ferry.io/v1alpha1, kind
// DataGravityArgs).
type Args struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`

	// FullPullBytes is the amount of ferry.io/data-gravity data in one
	// cluster at which that cluster's nodes score the maximum. Less data
	// pulls proportionally less: 1Gi with the default 10Gi scores 10 of
	// 100, so a small dataset does not outweigh the other scores. When
	// the data exceeds it, scores are relative to the largest location.
	FullPullBytes resource.Quantity `json:"fullPullBytes"`

	// MaxPreFilterNodes: when a pod's bound volumes live in a provider and
	// it has at most this many virtual nodes, PreFilter hands the
	// scheduler that set. 0 turns it off. Default 256.
	MaxPreFilterNodes int32 `json:"maxPreFilterNodes"`
}

// DefaultArgs are the args of a profile that sets none.
func DefaultArgs() Args {
	return Args{FullPullBytes: resource.MustParse("10Gi"), MaxPreFilterNodes: 256}
}

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
	if a.FullPullBytes.Sign() <= 0 {
		return fmt.Errorf("%s: fullPullBytes: %s must be more than 0", ArgsKind, a.FullPullBytes.String())
	}
	if a.MaxPreFilterNodes < 0 {
		return fmt.Errorf("%s: maxPreFilterNodes: %d must be 0 or more", ArgsKind, a.MaxPreFilterNodes)
	}
	return nil
}
