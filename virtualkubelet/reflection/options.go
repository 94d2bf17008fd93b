package reflection

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Policy says which objects of a kind are reflected.
type Policy string

const (
	// DenyList reflects every object except those annotated
	// ferry.io/skip-reflection: "true" (the default).
	DenyList Policy = "DenyList"
	// AllowList reflects only the objects annotated
	// ferry.io/allow-reflection: "true".
	AllowList Policy = "AllowList"
)

// Defaults of Options' zero fields.
const (
	DefaultClientQPS       = 100
	DefaultClientBurst     = 200
	DefaultResyncPeriod    = 10 * time.Minute
	DefaultTokenExpiration = time.Hour
	// minTokenExpiration is the API server's lower bound of a TokenRequest.
	minTokenExpiration = 10 * time.Minute
)

// DefaultWorkers is each kind's worker count when Options.Workers does not
// name it.
var DefaultWorkers = map[Kind]int{
	ConfigMaps: 4, Secrets: 4, Services: 4, EndpointSlices: 4,
	Ingresses: 2, NetworkPolicies: 2, ServiceAccounts: 2, PersistentVolumeClaims: 2, Events: 2,
}

// Options tune the reflection; their zero value reflects every kind with the
// defaults.
type Options struct {
	// Workers is how many objects of each kind are synced at once; 0
	// disables the kind. A kind not named takes DefaultWorkers.
	Workers map[Kind]int
	// Policies is each kind's Policy (default DenyList). Events have none:
	// every event about an offloaded pod or a reflected object comes back.
	Policies map[Kind]Policy
	// ClientQPS and ClientBurst bound the reflection's requests to each
	// cluster (defaults 100 and 200).
	ClientQPS   float32
	ClientBurst int
	// ResyncPeriod is how often every local object is compared with its
	// provider copy again although no watch reported a change (default
	// 10m); an equal copy is not written.
	ResyncPeriod time.Duration
	// IngressClasses and StorageClasses map local class names to the
	// provider's ("*": any other); unmapped classes are dropped, so the
	// provider's default serves.
	IngressClasses, StorageClasses map[string]string
	// TokenExpiration is the lifetime of the consumer tokens handed to
	// offloaded pods (default 1h, at least 10m); they are renewed at 80% of it.
	TokenExpiration time.Duration
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o Options) WithDefaults() Options {
	workers := make(map[Kind]int, len(AllKinds))
	for _, k := range AllKinds {
		workers[k] = DefaultWorkers[k]
		if n, ok := o.Workers[k]; ok {
			workers[k] = n
		}
	}
	o.Workers = workers
	policies := make(map[Kind]Policy, len(AllKinds))
	for _, k := range AllKinds {
		policies[k] = DenyList
		if p, ok := o.Policies[k]; ok && p != "" {
			policies[k] = p
		}
	}
	o.Policies = policies
	if o.ClientQPS == 0 {
		o.ClientQPS = DefaultClientQPS
	}
	if o.ClientBurst == 0 {
		o.ClientBurst = DefaultClientBurst
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.TokenExpiration == 0 {
		o.TokenExpiration = DefaultTokenExpiration
	}
	return o
}

// Validate reports every invalid option, naming its command-line flag.
func (o *Options) Validate() error {
	var errs []error
	known := func(flag string, k Kind) bool {
		if slices.Contains(AllKinds, k) {
			return true
		}
		errs = append(errs, fmt.Errorf("--%s: unknown kind %q (kinds: %s)", flag, k, kindList()))
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(o.Workers)) {
		if n := o.Workers[k]; known("reflection-workers", k) && n < 0 {
			errs = append(errs, fmt.Errorf("--reflection-workers: %s=%d must not be negative (0 disables the kind)", k, n))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o.Policies)) {
		p := o.Policies[k]
		if !known("reflection-policy", k) {
			continue
		}
		switch {
		case k == Events:
			errs = append(errs, fmt.Errorf("--reflection-policy: %s have no policy: every event about an offloaded pod or a reflected object comes back", k))
		case p != DenyList && p != AllowList:
			errs = append(errs, fmt.Errorf("--reflection-policy: %s=%q must be %s or %s", k, p, DenyList, AllowList))
		}
	}
	if o.ClientQPS < 0 || o.ClientBurst < 0 {
		errs = append(errs, fmt.Errorf("--reflection-client-qps (%g) and --reflection-client-burst (%d) must not be negative", o.ClientQPS, o.ClientBurst))
	}
	if o.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--reflection-resync-period (%s) must not be negative", o.ResyncPeriod))
	}
	for _, flag := range []string{"ingress-class-map", "storage-class-map"} {
		m := o.IngressClasses
		if flag == "storage-class-map" {
			m = o.StorageClasses
		}
		for _, from := range slices.Sorted(maps.Keys(m)) {
			to := m[from]
			if from == "" {
				errs = append(errs, fmt.Errorf("--%s: empty local class name (use * for every other class)", flag))
			}
			if strings.ContainsAny(to, "*,= ") {
				errs = append(errs, fmt.Errorf("--%s: %s=%q is not a class name", flag, from, to))
			}
		}
	}
	if o.TokenExpiration != 0 && o.TokenExpiration < minTokenExpiration {
		errs = append(errs, fmt.Errorf("--service-account-token-expiration (%s) must be at least %s", o.TokenExpiration, minTokenExpiration))
	}
	return errors.Join(errs...)
}

func kindList() string {
	names := make([]string, len(AllKinds))
	for i, k := range AllKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
