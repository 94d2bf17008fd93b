// Package pluginargs decodes the args of ferry's scheduler plugins from a
// KubeSchedulerConfiguration's pluginConfig. ferry's args are versioned
// (apiVersion scheduler.ferry.io/v1alpha1) and decoded strictly: a mistyped
// field is an error naming it, not a silently ignored setting.
package pluginargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
)

// APIVersion is the version of every ferry plugin args kind.
const APIVersion = "scheduler.ferry.io/v1alpha1"

// Decode fills into (a pointer to an args struct of kind) from obj, the
// plugin's configuration as the scheduler hands it over: nil when the
// profile has no pluginConfig for the plugin (into keeps its defaults), or
// the raw args (*runtime.Unknown). apiVersion and kind may be omitted; when
// given they must be APIVersion and kind.
func Decode(obj runtime.Object, kind string, into any) error {
	if obj == nil {
		return nil
	}
	var raw []byte
	switch o := obj.(type) {
	case *runtime.Unknown:
		raw = o.Raw
	default:
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s: encode args of type %T: %w", kind, obj, err)
		}
		raw = b
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return fmt.Errorf("%s: args: %w", kind, err)
	}
	if tm.APIVersion != "" && tm.APIVersion != APIVersion {
		return fmt.Errorf("%s: args apiVersion %q is not supported (want %s)", kind, tm.APIVersion, APIVersion)
	}
	if tm.Kind != "" && tm.Kind != kind {
		return fmt.Errorf("%s: args kind %q, want %s", kind, tm.Kind, kind)
	}
	// Field names are matched case-sensitively, as Kubernetes does: a
	// miscased field is unknown, not silently accepted.
	strict, err := sigsjson.UnmarshalStrict(raw, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("%s: args: %w", kind, nameField(raw, into, err))
	}
	if len(strict) > 0 {
		return fmt.Errorf("%s: args: %w", kind, errors.Join(strict...))
	}
	return nil
}

// nameField finds the top-level field whose value failed to decode: some
// decoders (resource.Quantity's) do not say which field they were given.
func nameField(raw []byte, into any, err error) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return err
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		one, merr := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		if merr != nil {
			continue
		}
		fresh := reflect.New(reflect.TypeOf(into).Elem()).Interface()
		if _, ferr := sigsjson.UnmarshalStrict(one, fresh); ferr != nil {
			if strings.Contains(ferr.Error(), k) {
				return ferr
			}
			return fmt.Errorf("%s: %w", k, ferr)
		}
	}
	return err
}
