package charts

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// valueSets are the value sets docs/getting-started/install.md documents; each must lint and
// render.
var valueSets = map[string]map[string]any{
	"defaults":     {"clusterID": "c1"},
	"cert-manager": {"clusterID": "c1", "webhook": map[string]any{"certificates": "cert-manager"}},
	"no scheduler": {"clusterID": "c1", "scheduler": map[string]any{"enabled": false}},
	"single replicas": {"clusterID": "c1", "controllerManager": map[string]any{"leaderElection": false},
		"scheduler": map[string]any{"leaderElection": false, "replicas": 1}, "webhook": map[string]any{"replicas": 1}},
	"no storage": {"clusterID": "c1", "storage": map[string]any{"enabled": false}},
	"process launcher": {"clusterID": "c1", "virtualKubelet": map[string]any{
		"mode": "process", "binary": "/ferry-virtual-kubelet", "extraArgs": []any{"--health-check-period=5s"}}},
	"metrics": {"clusterID": "c1", "metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}}},
	"custom images": {"clusterID": "c1", "images": map[string]any{
		"registry": "registry.example.com:5000/platform", "tag": "v9.9.9", "pullPolicy": "Always",
		"pullSecrets": []any{map[string]any{"name": "regcred"}},
		"scheduler":   map[string]any{"repository": "ferry-scheduler", "tag": "v9.9.10"}}},
	"network": {"clusterID": "c1", "network": map[string]any{
		"podCIDR": "10.10.0.0/16", "serviceCIDR": "10.20.0.0/16", "ipamPool": []any{"10.64.0.0/11", "100.64.0.0/16"},
		"gateway": map[string]any{"enabled": true, "endpoint": "203.0.113.7:51820", "serviceType": "NodePort"}}},
	"no network": {"clusterID": "c1", "network": map[string]any{"enabled": false}},
}

func TestChartLintsWithEveryDocumentedValueSet(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			linter := lint.RunAll("ferry", values, Namespace)
			for _, msg := range linter.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", msg)
				}
			}
		})
	}
}

func TestRenderRequiresTheClusterID(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"missing": {},
		"empty":   {"clusterID": ""},
		"invalid": {"clusterID": "Not_A_Label"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(values, Namespace)
			if err == nil || !strings.Contains(err.Error(), "clusterID") {
				t.Fatalf("Render(%v) = %v, want an error naming clusterID", values, err)
			}
			if name != "invalid" && !strings.Contains(err.Error(), "clusterID is required") {
				t.Errorf("Render(%v) = %v, want the chart's own message, clusterID is required", values, err)
			}
			t.Log(err)
		})
	}
}

func TestRenderRefusesBadValuesNamingThem(t *testing.T) {
	for field, values := range map[string]map[string]any{
		"virtualKubelet":                   {"clusterID": "c1", "virtualKubelet": map[string]any{"mode": "pods"}},
		"certificates":                     {"clusterID": "c1", "webhook": map[string]any{"certificates": "vault"}},
		"replicas":                         {"clusterID": "c1", "webhook": map[string]any{"replicas": "two"}},
		"podCIDR":                          {"clusterID": "c1", "network": map[string]any{"podCIDR": "10.0.0.0"}},
		"unknownValue":                     {"clusterID": "c1", "unknownValue": true},
		"scheduler.leaderElection":         {"clusterID": "c1", "scheduler": map[string]any{"leaderElection": false}},
		"controllerManager.leaderElection": {"clusterID": "c1", "controllerManager": map[string]any{"leaderElection": false, "replicas": 2}},
	} {
		t.Run(field, func(t *testing.T) {
			_, err := Render(values, Namespace)
			if err == nil || !strings.Contains(err.Error(), field) {
				t.Fatalf("Render(%v) = %v, want an error naming %s", values, err, field)
			}
		})
	}
}

func TestRenderRefusesAnotherNamespace(t *testing.T) {
	_, err := Render(valueSets["defaults"], "default")
	if err == nil || !strings.Contains(err.Error(), "ferry-system") {
		t.Fatalf("Render in namespace default = %v, want an error naming ferry-system", err)
	}
}

func TestRenderOrdersObjectsForApplying(t *testing.T) {
	objs := render(t, map[string]any{"clusterID": "c1", "createNamespace": true})
	rank := func(kind string) int {
		switch kind {
		case "CustomResourceDefinition", "Namespace":
			return 0
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			return 1
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			return 3
		}
		return 2
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if !slices.IsSortedFunc(kinds, func(a, b string) int { return rank(a) - rank(b) }) {
		t.Fatalf("objects not in apply order: %v", kinds)
	}
	if kinds[len(kinds)-1] != "ValidatingWebhookConfiguration" && kinds[len(kinds)-1] != "MutatingWebhookConfiguration" {
		t.Errorf("last object is a %s, want a webhook configuration", kinds[len(kinds)-1])
	}
	if find(objs, "Namespace", "ferry-system") == nil {
		t.Errorf("createNamespace: true rendered no Namespace ferry-system")
	}
	if find(render(t, valueSets["defaults"]), "Namespace", "ferry-system") != nil {
		t.Errorf("the default values render the Namespace ferry-system, which helm install --create-namespace makes")
	}
}

func TestImagesAreQualifiedAndTheVirtualKubeletImageFollows(t *testing.T) {
	for name, want := range map[string]struct{ manager, vk, scheduler, policy string }{
		"defaults": {"ghcr.io/ferry-io/ferry-controller-manager:v0.1.0", "ghcr.io/ferry-io/ferry-virtual-kubelet:v0.1.0", "ghcr.io/ferry-io/ferry-scheduler:v0.1.0", "IfNotPresent"},
		"custom images": {"registry.example.com:5000/platform/ferry-controller-manager:v9.9.9", "registry.example.com:5000/platform/ferry-virtual-kubelet:v9.9.9",
			"registry.example.com:5000/platform/ferry-scheduler:v9.9.10", "Always"},
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, valueSets[name])
			manager := deployment(t, objs, "ferry-controller-manager")
			c := manager.Spec.Template.Spec.Containers[0]
			if c.Image != want.manager || string(c.ImagePullPolicy) != want.policy {
				t.Errorf("controller manager image %s (%s), want %s (%s)", c.Image, c.ImagePullPolicy, want.manager, want.policy)
			}
			if !slices.Contains(c.Args, "--virtual-kubelet-image="+want.vk) {
				t.Errorf("controller manager args %v, want --virtual-kubelet-image=%s", c.Args, want.vk)
			}
			// The virtual kubelets' Deployments, made by the controller
			// manager, pull as the chart's do.
			if !slices.Contains(c.Args, "--virtual-kubelet-image-pull-policy="+want.policy) {
				t.Errorf("controller manager args %v, want --virtual-kubelet-image-pull-policy=%s", c.Args, want.policy)
			}
			if secret := slices.Contains(c.Args, "--virtual-kubelet-image-pull-secret=regcred"); secret != (name == "custom images") {
				t.Errorf("controller manager args %v: --virtual-kubelet-image-pull-secret=regcred is there: %v, want %v", c.Args, secret, name == "custom images")
			}
			if img := deployment(t, objs, "ferry-scheduler").Spec.Template.Spec.Containers[0].Image; img != want.scheduler {
				t.Errorf("scheduler image %s, want %s", img, want.scheduler)
			}
			for _, o := range objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				d := deployment(t, objs, o.GetName())
				for _, c := range d.Spec.Template.Spec.Containers {
					if strings.Count(c.Image, "/") < 2 || !strings.Contains(c.Image, ":v") {
						t.Errorf("Deployment %s: image %q is not <registry>/<component>:<tag>", d.Name, c.Image)
					}
				}
				if name == "custom images" && (len(d.Spec.Template.Spec.ImagePullSecrets) != 1 || d.Spec.Template.Spec.ImagePullSecrets[0].Name != "regcred") {
					t.Errorf("Deployment %s: pull secrets %v, want regcred", d.Name, d.Spec.Template.Spec.ImagePullSecrets)
				}
			}
		})
	}
}

func TestCertManagerReplacesTheSelfManagedCertificate(t *testing.T) {
	objs := render(t, valueSets["cert-manager"])
	if find(objs, "Certificate", "ferry-webhook") == nil || find(objs, "Issuer", "ferry-webhook-selfsigned") == nil {
		t.Fatalf("no cert-manager Certificate and Issuer for the webhook")
	}
	args := deployment(t, objs, "ferry-webhook").Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--self-signed-certs=false") || !slices.Contains(args, "--cert-dir=/certs") || hasFlag(args, "--cert-secret") {
		t.Errorf("webhook args %v, want --self-signed-certs=false --cert-dir=/certs and no --cert-secret", args)
	}
	for _, flag := range []string{"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(args, flag) {
			t.Errorf("webhook args %v lack %s: the kubelet's probes and Prometheus would not reach it", args, flag)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if got := find(objs, kind, "ferry-webhook").GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "ferry-system/ferry-webhook" {
			t.Errorf("%s inject-ca-from = %q", kind, got)
		}
	}

	self := render(t, valueSets["defaults"])
	if find(self, "Certificate", "ferry-webhook") != nil {
		t.Errorf("self-managed certificates render a cert-manager Certificate")
	}
	if args := deployment(t, self, "ferry-webhook").Spec.Template.Spec.Containers[0].Args; !hasFlag(args, "--cert-secret") || hasFlag(args, "--self-signed-certs") {
		t.Errorf("self-managed webhook args %v, want --cert-secret and the default --self-signed-certs", args)
	}
}

func TestOptionalPartsFollowTheirValues(t *testing.T) {
	if objs := render(t, valueSets["no scheduler"]); find(objs, "Deployment", "ferry-scheduler") != nil {
		t.Errorf("scheduler.enabled=false still renders ferry-scheduler")
	}
	noStorage := render(t, valueSets["no storage"])
	if find(noStorage, "StorageClass", "ferry") != nil || find(noStorage, "CSIDriver", "virtual.storage.ferry.io") != nil {
		t.Errorf("storage.enabled=false still renders the storage class")
	}
	if args := managerArgs(t, noStorage); !slices.Contains(args, "--disable-storage") {
		t.Errorf("storage.enabled=false: controller manager args %v lack --disable-storage", args)
	}
	defaults := render(t, valueSets["defaults"])
	if find(defaults, "StorageClass", "ferry") == nil || find(defaults, "Deployment", "ferry-scheduler") == nil {
		t.Errorf("defaults lack the storage class or the scheduler")
	}
	if find(defaults, "Deployment", "ferry-gateway") != nil || find(defaults, "ServiceMonitor", "ferry") != nil {
		t.Errorf("defaults render the gateway or monitoring, which are opt-in")
	}
	if args := managerArgs(t, defaults); hasFlag(args, "--disable-storage") || hasFlag(args, "--disable-network") || hasFlag(args, "--virtual-kubelet-binary") {
		t.Errorf("default controller manager args %v", args)
	}
	if args := managerArgs(t, render(t, valueSets["no network"])); !slices.Contains(args, "--disable-network") {
		t.Errorf("network.enabled=false: controller manager args %v lack --disable-network", args)
	}
}

func TestLeaderElectionAndReplicas(t *testing.T) {
	objs := render(t, valueSets["single replicas"])
	if args := managerArgs(t, objs); !slices.Contains(args, "--leader-elect=false") {
		t.Errorf("controller manager args %v lack --leader-elect=false", args)
	}
	scheduler := deployment(t, objs, "ferry-scheduler")
	if !slices.Contains(scheduler.Spec.Template.Spec.Containers[0].Args, "--leader-elect=false") || *scheduler.Spec.Replicas != 1 {
		t.Errorf("scheduler args %v, replicas %d", scheduler.Spec.Template.Spec.Containers[0].Args, *scheduler.Spec.Replicas)
	}
	if r := deployment(t, objs, "ferry-webhook").Spec.Replicas; *r != 1 {
		t.Errorf("webhook replicas %d, want 1", *r)
	}
	if args := deployment(t, render(t, valueSets["defaults"]), "ferry-scheduler").Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--leader-elect=true") {
		t.Errorf("default scheduler args %v lack --leader-elect=true", args)
	}
}

func TestLauncherModes(t *testing.T) {
	if args := managerArgs(t, render(t, valueSets["defaults"])); !slices.Contains(args, "--virtual-kubelet-mode=deployment") {
		t.Errorf("default launcher args %v", args)
	}
	args := managerArgs(t, render(t, valueSets["process launcher"]))
	for _, want := range []string{"--virtual-kubelet-mode=process", "--virtual-kubelet-binary=/ferry-virtual-kubelet", "--virtual-kubelet-arg=--health-check-period=5s"} {
		if !slices.Contains(args, want) {
			t.Errorf("process launcher args %v lack %s", args, want)
		}
	}
}

func TestNetworkValues(t *testing.T) {
	objs := render(t, valueSets["network"])
	args := managerArgs(t, objs)
	for _, want := range []string{"--pod-cidr=10.10.0.0/16", "--service-cidr=10.20.0.0/16", "--ipam-pool=10.64.0.0/11,100.64.0.0/16"} {
		if !slices.Contains(args, want) {
			t.Errorf("controller manager args %v lack %s", args, want)
		}
	}
	gw := deployment(t, objs, "ferry-gateway").Spec.Template.Spec.Containers[0]
	if !slices.Contains(gw.Args, "--endpoint=203.0.113.7:51820") || !slices.Contains(gw.Args, "--cluster-id=c1") {
		t.Errorf("gateway args %v", gw.Args)
	}
	if gw.Image != "ghcr.io/ferry-io/ferry-gateway:v0.1.0" {
		t.Errorf("gateway image %s", gw.Image)
	}
	if typ, _, _ := unstructured.NestedString(find(objs, "Service", "ferry-gateway").Object, "spec", "type"); typ != "NodePort" {
		t.Errorf("gateway Service type %s, want NodePort", typ)
	}
	if find(objs, "DaemonSet", "ferry-route-agent") == nil {
		t.Errorf("no route agents with the gateway")
	}
}

// Without an endpoint the gateway finds its own from its Service: it gets
// no --endpoint, and its node's IP for a NodePort Service.
func TestGatewayWithoutEndpointFindsItFromItsService(t *testing.T) {
	objs := render(t, map[string]any{"clusterID": "c1", "network": map[string]any{"gateway": map[string]any{"enabled": true, "serviceType": "NodePort"}}})
	gw := deployment(t, objs, "ferry-gateway").Spec.Template.Spec.Containers[0]
	for _, a := range gw.Args {
		if strings.HasPrefix(a, "--endpoint") {
			t.Errorf("gateway args %v: an --endpoint, though none was set", gw.Args)
		}
	}
	hostIP := false
	for _, e := range gw.Env {
		hostIP = hostIP || e.Name == "HOST_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	}
	if !hostIP {
		t.Errorf("gateway env %v: no HOST_IP from status.hostIP", gw.Env)
	}
	if typ, _, _ := unstructured.NestedString(find(objs, "Service", "ferry-gateway").Object, "spec", "type"); typ != "NodePort" {
		t.Errorf("gateway Service type %s, want NodePort", typ)
	}
}

func TestMetricsObjects(t *testing.T) {
	objs := render(t, valueSets["metrics"])
	for _, kind := range [][2]string{{"ServiceMonitor", "ferry"}, {"PrometheusRule", "ferry"}, {"ConfigMap", "ferry-grafana-dashboard"}, {"Service", "ferry-controller-manager-metrics"}} {
		if find(objs, kind[0], kind[1]) == nil {
			t.Errorf("metrics on: no %s %s", kind[0], kind[1])
		}
	}
}

func TestSecurityContextsAreOverridable(t *testing.T) {
	objs := render(t, map[string]any{"clusterID": "c1",
		"podSecurityContext": map[string]any{"runAsNonRoot": true, "runAsUser": 1234},
		"securityContext":    map[string]any{"readOnlyRootFilesystem": false}})
	d := deployment(t, objs, "ferry-webhook")
	if u := d.Spec.Template.Spec.SecurityContext.RunAsUser; u == nil || *u != 1234 {
		t.Errorf("pod securityContext %+v, want runAsUser 1234", d.Spec.Template.Spec.SecurityContext)
	}
	if ro := d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem; ro == nil || *ro {
		t.Errorf("container securityContext %+v, want readOnlyRootFilesystem false", d.Spec.Template.Spec.Containers[0].SecurityContext)
	}
	defaults := deployment(t, render(t, valueSets["defaults"]), "ferry-controller-manager").Spec.Template.Spec
	if nr := defaults.SecurityContext.RunAsNonRoot; nr == nil || !*nr {
		t.Errorf("default pod securityContext %+v is not non-root", defaults.SecurityContext)
	}
	if ro := defaults.Containers[0].SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
		t.Errorf("default container securityContext has no read-only root filesystem")
	}
}

func render(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Render(values, Namespace)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func deployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	o := find(objs, "Deployment", name)
	if o == nil {
		t.Fatalf("no Deployment %s", name)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
		t.Fatalf("Deployment %s: %v", name, err)
	}
	return &d
}

func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	return deployment(t, objs, "ferry-controller-manager").Spec.Template.Spec.Containers[0].Args
}

func hasFlag(args []string, flag string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
}
