package charts

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ferry-io/ferry/api/grant"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/fabric/gateway"
)

// A flagValue is a value of the chart that reaches a flag of a component:
// the schema must refuse what the flag refuses, so that a bad value fails
// at helm install, naming it, not at the component's start.
type flagValue struct {
	// flag is the flag the value reaches, found in a container's args when
	// the first good example is set ("" for extraArgs, which are flags
	// themselves).
	flag string
	// with are values the examples need beside them (dotted paths).
	with map[string]any
	// list: the value is a list, and the examples are its items.
	list bool
	// good render; bad are refused with an error naming the value's path.
	good, bad []any
	// parse is the check the binary makes of the example's text (the same
	// Go function); nil when the schema's type or enum is the whole rule
	// (booleans and enums, which the templates print as they are).
	parse func(s string) error
}

var (
	goodCIDRs = []any{"10.244.0.0/16", "0.0.0.0/0", "255.255.255.255/32", "fd00:10:244::/64", "::/0", "2001:db8::/32",
		"1:2:3:4:5:6:7:8/128", "1:2:3:4:5:6:7::/112", "::1.2.3.0/120", "64:ff9b::/96", "FD00::/8", "10.244.0.0/14", "192.168.2.0/23", "172.16.0.128/25"}
	badCIDRs = []any{"10.244.0.0/33", "fd00::/129", "10.244.0.0", "10.244.0.0/", "10.244.0.0/-1", "10.244.0.0/08", "256.0.0.0/8",
		"10.244.0/16", "010.244.0.0/16", "10.244.0.0/16/8", "fd00:::/64", "fd00::g/64", "1:2:3:4:5:6:7:8:9/64", "fe80::%eth0/64",
		"::ffff:10.0.0.0/104", "::ffff:0:0/96", " 10.0.0.0/8", "10.0.0.0/8 ", "cidr", "10.244.0.1/16", "10.245.0.0/15", "192.168.1.0/23",
		"172.16.0.64/25", "10.0.0.1/0"}
	imageParse = func(image string) error {
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil {
			return err
		}
		if _, ok := named.(reference.Tagged); !ok {
			return fmt.Errorf("%s: no tag", image)
		}
		return nil
	}
)

// flagValues are the values of the chart that reach flags. The test below
// finds them in the schema and the rendered objects on its own, and fails
// for one missing here.
var flagValues = map[string]flagValue{
	"clusterID": {
		flag: "--cluster-id",
		good: []any{"c1", "0", "a-b-0", strings.Repeat("a", 63)},
		bad:  []any{"", "Not_A_Label", "-a", "a-", "a.b", "a b", strings.Repeat("a", 64)},
		parse: func(s string) error {
			return ferryv1alpha1.ValidateClusterID("--cluster-id", s)
		},
	},
	"controllerManager.sharingPercentage": {
		flag: "--sharing-percentage",
		good: []any{50, 1, 100},
		bad:  []any{0, 101, -5, 50.5},
		parse: func(s string) error {
			n, err := strconv.Atoi(s) // pflag's IntVar
			if err != nil {
				return err
			}
			_, err = grant.Share(nil, n)
			return err
		},
	},
	"controllerManager.leaderElection": {flag: "--leader-elect", good: []any{false, true}, bad: []any{"no", 0}},
	"controllerManager.extraArgs": {list: true, good: []any{"--shadow-pod-workers=20", "--disable-storage", "--cluster-labels=a=b"},
		bad: []any{"shadow-pod-workers=20", "-v=2", "--", "--=x", ""}},
	"scheduler.leaderElection": {flag: "--leader-elect", with: map[string]any{"scheduler.replicas": 1}, good: []any{false, true}, bad: []any{"no"}},
	"virtualKubelet.mode":      {flag: "--virtual-kubelet-mode", good: []any{"process", "deployment"}, bad: []any{"pods", "Deployment", ""}},
	"virtualKubelet.binary": {flag: "--virtual-kubelet-binary", with: map[string]any{"virtualKubelet.mode": "process"},
		good: []any{"/usr/local/bin/ferry-virtual-kubelet", "ferry-virtual-kubelet"}, bad: []any{""}},
	"virtualKubelet.extraArgs": {flag: "--virtual-kubelet-arg", list: true, good: []any{"--health-check-period=5s", "--reflection-policy=secrets=AllowList,configmaps=AllowList"},
		bad: []any{"health-check-period=5s", "-v=2", "--", ""}},
	"webhook.certificates": {flag: "--self-signed-certs", good: []any{"cert-manager", "self-managed"}, bad: []any{"vault", ""}},
	"storage.enabled":      {flag: "--disable-storage", good: []any{false, true}, bad: []any{"false"}},
	"network.enabled":      {flag: "--disable-network", good: []any{false, true}, bad: []any{"false"}},
	"network.podCIDR":      {flag: "--pod-cidr", good: append(slices.Clone(goodCIDRs), ""), bad: badCIDRs, parse: parseCIDROrEmpty("--pod-cidr")},
	"network.serviceCIDR":  {flag: "--service-cidr", good: append(slices.Clone(goodCIDRs), ""), bad: badCIDRs, parse: parseCIDROrEmpty("--service-cidr")},
	"network.ipamPool": {flag: "--ipam-pool", list: true, good: goodCIDRs, bad: append(slices.Clone(badCIDRs), ""),
		parse: func(s string) error { _, err := fabric.ParsePrefix("--ipam-pool", s); return err }},
	"network.gateway.endpoint": {
		flag: "--endpoint", with: map[string]any{"network.gateway.enabled": true},
		good: []any{"203.0.113.7:51820", "gw.example.com:1", "[fd00::7]:65535", "gw:051820", strings.Repeat("a.", 126) + "a:1", ""},
		bad: []any{"203.0.113.7", "203.0.113.7:0", "203.0.113.7:65536", ":51820", "Gw.Example:51820", "gw_1:51820",
			"fd00::7:51820", "[1.2.3.4]:51820", "[gw]:51820", "[fe80::1%eth0]:51820", strings.Repeat("a.", 127) + "a:1"},
		parse: func(s string) error {
			if s == "" {
				return nil // found from the gateway's Service
			}
			_, _, err := gateway.ParseEndpoint(s)
			return err
		},
	},
	"images.registry": {flag: "--virtual-kubelet-image", good: []any{"registry.example.com:5000/platform", "localhost:5000", "Registry.Example.com", ""},
		bad: []any{"registry.example.com/Platform", "registry.example.com:port", "registry.example.com/", "-registry.example.com", "registry example"},
		parse: func(s string) error {
			if s != "" {
				s += "/"
			}
			return imageParse(s + "ferry-virtual-kubelet:v0.1.0")
		}},
	"images.tag": {flag: "--virtual-kubelet-image", good: []any{"v9.9.9", "latest", "_x", ""}, bad: []any{"-v9", ".v9", "v9+build", strings.Repeat("v", 129)},
		parse: func(s string) error {
			if s == "" {
				s = "v0.1.0"
			}
			return imageParse("ghcr.io/ferry-io/ferry-virtual-kubelet:" + s)
		}},
	"images.pullPolicy": {flag: "--virtual-kubelet-image-pull-policy", good: []any{"Always", "IfNotPresent", "Never"}, bad: []any{"always", ""}},
	// The items are objects: the schema's name pattern is the binary's
	// check (validation.IsDNS1123Subdomain), as TestPullSecretNamesAreSecretNames shows.
	"images.pullSecrets": {flag: "--virtual-kubelet-image-pull-secret", list: true,
		good: []any{map[string]any{"name": "regcred"}, map[string]any{"name": "a.b-c"}, map[string]any{"name": strings.Repeat("a", 253)}},
		bad:  []any{map[string]any{"name": "Not_A_Name"}, map[string]any{"name": ""}, map[string]any{}, map[string]any{"name": "-a"}, map[string]any{"name": strings.Repeat("a", 254)}}},
	"images.virtualKubelet.repository": {flag: "--virtual-kubelet-image", good: []any{"ferry/virtual-kubelet", "vk", "a__b.c-d"},
		bad:   []any{"", "Ferry", "ferry//vk", "/vk", "vk/", "vk:v1", "vk@sha256"},
		parse: func(s string) error { return imageParse("ghcr.io/ferry-io/" + s + ":v0.1.0") }},
	"images.virtualKubelet.tag": {flag: "--virtual-kubelet-image", good: []any{"v9.9.10", ""}, bad: []any{"v9:9", "-v9"},
		parse: func(s string) error {
			if s == "" {
				s = "v0.1.0"
			}
			return imageParse("ghcr.io/ferry-io/ferry-virtual-kubelet:" + s)
		}},
	"images.volumeMover.repository": {flag: "--volume-mover-image", good: []any{"ferry/volume-mover", "vm", "a__b.c-d"},
		bad:   []any{"", "Ferry", "ferry//vm", "/vm", "vm/", "vm:v1", "vm@sha256"},
		parse: func(s string) error { return imageParse("ghcr.io/ferry-io/" + s + ":v0.1.0") }},
	"images.volumeMover.tag": {flag: "--volume-mover-image", good: []any{"v9.9.10", ""}, bad: []any{"v9:9", "-v9"},
		parse: func(s string) error {
			if s == "" {
				s = "v0.1.0"
			}
			return imageParse("ghcr.io/ferry-io/ferry-volume-mover:" + s)
		}},
}

// parseCIDROrEmpty is the controller manager's check of --pod-cidr and
// --service-cidr: empty is detected, anything else is fabric.ParsePrefix's.
func parseCIDROrEmpty(flag string) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		_, err := fabric.ParsePrefix(flag, s)
		return err
	}
}

// baselines are the value sets whose renders every value is compared with:
// between them, every flag the chart can pass is on (the gateway's, and the
// process launcher's); a single scheduler so that leader election may be off.
var baselines = []map[string]any{
	{"clusterID": "c1", "scheduler": map[string]any{"replicas": 1}},
	{"clusterID": "c1", "scheduler": map[string]any{"replicas": 1}, "network": map[string]any{"gateway": map[string]any{"enabled": true, "endpoint": "gw.example:51820"}}},
	{"clusterID": "c1", "scheduler": map[string]any{"replicas": 1}, "virtualKubelet": map[string]any{"mode": "process"}},
}

// TestEveryValueReachingAFlagIsCheckedAsStrictlyAsTheFlag walks every leaf
// of values.schema.json, sets it to a value the schema accepts, and says
// it reaches a flag when a container's args change. Each such value must
// be in flagValues, and each entry there must reach its flag: a new value
// passed to a flag without examples and a parser fails here.
func TestEveryValueReachingAFlagIsCheckedAsStrictlyAsTheFlag(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(readSchema(t), &schema); err != nil {
		t.Fatal(err)
	}
	var leaves []schemaLeaf
	walkSchema(schema, schema, "", &leaves)
	if len(leaves) < 20 {
		t.Fatalf("found only %d leaves in values.schema.json: the walk is broken", len(leaves))
	}
	var before []map[string][]string
	for _, base := range baselines {
		objs, err := renderWorkloads(base)
		if err != nil {
			t.Fatalf("baseline %v: %v", base, err)
		}
		before = append(before, containerArgs(t, objs))
	}
	reaching := map[string]string{}
	for _, l := range leaves {
		probes := l.probes()
		rendered := false
	probing:
		for i, base := range baselines {
			for _, p := range probes {
				objs, err := renderWorkloads(withValues(base, map[string]any{l.path: p}))
				if err != nil {
					continue
				}
				rendered = true
				if diff := argsDiff(before[i], containerArgs(t, objs)); diff != "" {
					reaching[l.path] = fmt.Sprintf("%s=%v changes %s", l.path, p, diff)
					break probing
				}
				if l.freeForm() {
					break // one value of a string, list or map stands for all
				}
			}
		}
		if !rendered {
			t.Errorf("%s: none of the values %v renders; give the test a value for it (flagValues, or probes)", l.path, probes)
		}
	}
	for path, how := range reaching {
		if _, ok := flagValues[path]; !ok {
			t.Errorf("%s reaches a flag (%s) but flagValues has no examples and parser for it: make its schema as strict as the flag, and add it", path, how)
		}
	}
	for path := range flagValues {
		if reaching[path] == "" {
			t.Errorf("flagValues has %s, which reaches no flag (or is not a leaf of the schema)", path)
		}
	}
	t.Logf("%d leaves, %d reach flags", len(leaves), len(reaching))
}

// TestValuesReachingFlagsAreCheckedByTheSchema: for each value that reaches
// a flag, its good examples render (the first one into its flag), its bad
// ones are refused naming the value, and the chart's verdict on each is the
// verdict of the Go function the binary parses the flag with.
func TestValuesReachingFlagsAreCheckedByTheSchema(t *testing.T) {
	for path, fv := range flagValues {
		t.Run(path, func(t *testing.T) {
			verdicts := map[string]error{} // the chart's, by example (as printed: an example may be a map)
			for i, ex := range fv.good {
				objs, err := renderWorkloads(fv.values(path, ex))
				verdicts[fmt.Sprint(ex)] = err
				if err != nil {
					t.Errorf("good value %s=%q refused: %v", path, ex, err)
					continue
				}
				if i == 0 && !slices.ContainsFunc(allArgs(t, objs), func(a string) bool { return reaches(fv, a, ex) }) {
					t.Errorf("%s=%q: no container arg %s carries it; args %v", path, ex, fv.flag, allArgs(t, objs))
				}
			}
			pointer := "/" + strings.ReplaceAll(path, ".", "/")
			if fv.list {
				pointer += "/0"
			}
			for _, ex := range fv.bad {
				_, err := renderWorkloads(fv.values(path, ex))
				verdicts[fmt.Sprint(ex)] = err
				if err == nil {
					t.Errorf("bad value %s=%q renders", path, ex)
				} else if !strings.Contains(err.Error(), pointer) && !strings.Contains(err.Error(), path) {
					t.Errorf("bad value %s=%q: the error does not name %s or %s: %v", path, ex, pointer, path, err)
				}
			}
			if fv.parse == nil {
				return
			}
			for _, ex := range append(slices.Clone(fv.good), fv.bad...) {
				chartErr := verdicts[fmt.Sprint(ex)]
				parseErr := fv.parse(fmt.Sprint(ex))
				if (chartErr == nil) != (parseErr == nil) {
					t.Errorf("%s=%q: the chart says %v, the binary's parser says %v", path, ex, orOK(chartErr), orOK(parseErr))
				}
			}
		})
	}
}

// FuzzCIDRSchemaAgreesWithParsePrefix holds the schema's CIDR pattern to
// fabric.ParsePrefix, which --pod-cidr, --service-cidr and --ipam-pool are
// parsed with, on any text. The one rule the schema leaves to the binary is
// host bits set in an IPv6 prefix: it accepts exactly those IPv6 prefixes
// that netip parses but ParsePrefix refuses for their host bits.
func FuzzCIDRSchemaAgreesWithParsePrefix(f *testing.F) {
	for _, s := range append(slices.Clone(goodCIDRs), badCIDRs...) {
		f.Add(s.(string))
	}
	for _, s := range []string{"10.244.0.1/16", "10.244.0.0/13", "10.244.0.0/14", "0.0.0.1/31", "fd00::1/64", "::ffff:1.2.3.4/128", "0:0:0:0:0:ffff::/96", "0::ffff:1:2/100",
		"::FFFF:0.0.0.0/96", "::1.2.3.4/128", "1::2:3:4:5:6:7/128", "10.0.0.0/8\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return // podCIDR: detect; ipamPool items are checked non-empty by TestValuesReachingFlagsAreCheckedByTheSchema
		}
		chartErr := validate(map[string]any{"clusterID": "c1", "network": map[string]any{"podCIDR": s}})
		_, parseErr := fabric.ParsePrefix("--pod-cidr", s)
		if parseErr != nil {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is6() && p.Masked() != p && !p.Addr().Is4In6() {
				if chartErr != nil {
					t.Fatalf("%q (host bits set, a rule only the binary checks): the schema refuses it for another reason: %v", s, chartErr)
				}
				return
			}
		}
		if (chartErr == nil) != (parseErr == nil) {
			t.Fatalf("network.podCIDR=%q: the schema says %v, fabric.ParsePrefix says %v", s, orOK(chartErr), orOK(parseErr))
		}
	})
}

// FuzzEndpointSchemaAgreesWithParseEndpoint holds the schema of
// network.gateway.endpoint to gateway.ParseEndpoint, ferry-gateway's parser
// of --endpoint, on any text.
func FuzzEndpointSchemaAgreesWithParseEndpoint(f *testing.F) {
	for _, s := range append(slices.Clone(flagValues["network.gateway.endpoint"].good), flagValues["network.gateway.endpoint"].bad...) {
		f.Add(s.(string))
	}
	f.Add("[::ffff:1.2.3.4]:1")
	f.Add("a.b:0065535")
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return // not passed: the gateway finds its endpoint from its Service
		}
		chartErr := validate(map[string]any{"clusterID": "c1", "network": map[string]any{"gateway": map[string]any{"enabled": true, "endpoint": s}}})
		_, _, parseErr := gateway.ParseEndpoint(s)
		if (chartErr == nil) != (parseErr == nil) {
			t.Fatalf("network.gateway.endpoint=%q: the schema says %v, gateway.ParseEndpoint says %v", s, orOK(chartErr), orOK(parseErr))
		}
	})
}

// renderWorkloads renders values as Render does, and returns the objects of
// the templates holding workloads only: decoding the others (the CRDs)
// is most of a render's time.
func renderWorkloads(values map[string]any) ([]*unstructured.Unstructured, error) {
	manifests, err := renderTemplates(values, Namespace)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(manifests)) {
		if text := manifests[name]; strings.Contains(text, "\nkind: Deployment\n") || strings.Contains(text, "\nkind: DaemonSet\n") {
			decoded, err := decode(text)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			objs = append(objs, decoded...)
		}
	}
	return objs, nil
}

// validate checks values against the chart's schema only, as helm does
// before rendering.
func validate(values map[string]any) error {
	ch, err := Chart()
	if err != nil {
		return err
	}
	_, err = chartutil.ToRenderValues(ch, values, common.ReleaseOptions{Name: ReleaseName, Namespace: Namespace, IsInstall: true}, nil)
	return err
}

func readSchema(t *testing.T) []byte {
	t.Helper()
	data, err := files.ReadFile("ferry/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A schemaLeaf is a value of the chart that is not an object of named
// properties.
type schemaLeaf struct {
	path string
	node map[string]any
	root map[string]any
}

// walkSchema collects the leaves under node (references resolved).
func walkSchema(root, node map[string]any, path string, out *[]schemaLeaf) {
	node = resolve(root, node)
	props, ok := node["properties"].(map[string]any)
	if !ok {
		*out = append(*out, schemaLeaf{path: path, node: node, root: root})
		return
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p := name
		if path != "" {
			p = path + "." + name
		}
		walkSchema(root, props[name].(map[string]any), p, out)
	}
}

func resolve(root, node map[string]any) map[string]any {
	for {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		node = root["definitions"].(map[string]any)[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
}

// probes are values to try for the leaf: each member of an enum, both
// booleans, two integers in range, strings of several shapes, a list of
// the items' probes, a map.
func (l schemaLeaf) probes() []any {
	return probesOf(l.root, l.node)
}

// freeForm says whether the leaf takes more values than probes can list
// (not an enum, a boolean or an integer): one value that renders then
// stands for all, a render being most of the test's time.
func (l schemaLeaf) freeForm() bool {
	node := resolve(l.root, l.node)
	if _, ok := node["enum"]; ok {
		return false
	}
	return node["type"] != "boolean" && node["type"] != "integer"
}

func probesOf(root, node map[string]any) []any {
	node = resolve(root, node)
	if enum, ok := node["enum"].([]any); ok {
		return enum
	}
	switch node["type"] {
	case "boolean":
		return []any{true, false}
	case "integer":
		lo := 1
		if m, ok := node["minimum"].(float64); ok {
			lo = int(m)
		}
		return []any{lo, lo + 1}
	case "array":
		var out []any
		if items, ok := node["items"].(map[string]any); ok {
			for _, p := range probesOf(root, items) {
				out = append(out, []any{p})
			}
		}
		return append(out, []any{})
	case "object":
		return []any{map[string]any{"name": "probe"}, map[string]any{}}
	}
	return []any{"probe", "--probe", "10.99.0.0/16", "probe.example:1234", "probe/probe"}
}

// values are the values of the example ex at path, with fv.with, in the
// first baseline.
func (fv flagValue) values(path string, ex any) map[string]any {
	set := map[string]any{path: ex}
	if fv.list {
		set[path] = []any{ex}
	}
	maps.Copy(set, fv.with)
	return withValues(baselines[0], set)
}

// withValues is a deep copy of base with the dotted paths of set set.
func withValues(base map[string]any, set map[string]any) map[string]any {
	data, _ := json.Marshal(base)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	for path, v := range set {
		m := out
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}

// containerArgs maps each container of each workload to its command and
// args.
func containerArgs(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				c := c.(map[string]any)
				var line []string
				for _, f := range []string{"command", "args"} {
					a, _, _ := unstructured.NestedStringSlice(c, f)
					line = append(line, a...)
				}
				out[fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetName(), c["name"])] = line
			}
		}
	}
	return out
}

func allArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	var all []string
	for _, a := range containerArgs(t, objs) {
		all = append(all, a...)
	}
	return all
}

// argsDiff says how the args of containers in both before and after differ
// ("" when they do not).
func argsDiff(before, after map[string][]string) string {
	for _, c := range slices.Sorted(maps.Keys(before)) {
		a, ok := after[c]
		if ok && !slices.Equal(before[c], a) {
			return fmt.Sprintf("the args of %s from %v to %v", c, before[c], a)
		}
	}
	return ""
}

// reaches says whether arg carries example ex of fv.
func reaches(fv flagValue, arg string, ex any) bool {
	if fv.flag == "" {
		return arg == fmt.Sprint(ex)
	}
	flag, value, _ := strings.Cut(arg, "=")
	if flag != fv.flag {
		return false
	}
	if _, isString := ex.(string); isString && fv.parse != nil {
		return strings.Contains(value, ex.(string))
	}
	return true
}

func orOK(err error) string {
	if err == nil {
		return "OK"
	}
	return err.Error()
}

// TestPullSecretNamesAreSecretNames holds the schema's pattern for
// images.pullSecrets[].name to the controller manager's check of
// --virtual-kubelet-image-pull-secret (validation.IsDNS1123Subdomain).
func TestPullSecretNamesAreSecretNames(t *testing.T) {
	names := []string{"regcred", "a", "0", "a.b-c", "a-b.c-d.e", strings.Repeat("a", 253), strings.Repeat("a", 254), "", "Not_A_Name", "-a", "a-", "a..b", ".a", "a.", "a_b", "A", "a b", "a.-b"}
	for _, name := range names {
		chartErr := validate(map[string]any{"clusterID": "c1", "images": map[string]any{"pullSecrets": []any{map[string]any{"name": name}}}})
		binaryErrs := validation.IsDNS1123Subdomain(name)
		if (chartErr == nil) != (len(binaryErrs) == 0) {
			t.Errorf("images.pullSecrets[0].name=%q: the schema says %v, the controller manager says %v", name, orOK(chartErr), binaryErrs)
		}
	}
}
