package main

import (
	"fmt"
	"strings"
)

// A part is one template file of the chart, made from kustomizations of
// manifests/.
type part struct {
	// file is the template's name under charts/ferry/templates.
	file string
	// variants are kustomize folders under manifests/ with the condition
	// choosing each ("" when there is one). Objects equal in every variant
	// are written once; the others under their variant's condition.
	variants []variant
	// cond guards the whole file ("" for none).
	cond string
	// keep selects the objects of the build that belong here (nil: all).
	keep func(obj map[string]any) bool
	// objectCond guards single objects ("" for none).
	objectCond func(obj map[string]any) string
}

type variant struct{ dir, cond string }

// parts is the chart: every manifest a user of kustomize applies for a full
// install, with the values that switch and shape them.
var parts = []part{
	{file: "crds.yaml", variants: []variant{{dir: "base"}}, keep: kindIs("CustomResourceDefinition")},
	{file: "namespace.yaml", variants: []variant{{dir: "base"}}, keep: kindIs("Namespace"), cond: ".Values.createNamespace"},
	{file: "rbac.yaml", variants: []variant{{dir: "base"}}, keep: not(kindIs("CustomResourceDefinition", "Namespace", "RuntimeClass"))},
	{file: "runtimeclass.yaml", variants: []variant{{dir: "base"}}, keep: kindIs("RuntimeClass")},
	{file: "controller-manager.yaml", variants: []variant{{dir: "controller-manager"}}},
	{file: "webhook.yaml", variants: []variant{
		{dir: "webhook", cond: `eq .Values.webhook.certificates "self-managed"`},
		{dir: "webhook-cert-manager", cond: `eq .Values.webhook.certificates "cert-manager"`},
	}},
	{file: "scheduler.yaml", variants: []variant{{dir: "scheduler"}}, cond: ".Values.scheduler.enabled"},
	{file: "storage.yaml", variants: []variant{{dir: "storage"}}, cond: ".Values.storage.enabled"},
	{file: "gateway.yaml", variants: []variant{{dir: "gateway"}}, cond: ".Values.network.gateway.enabled"},
	{file: "monitoring.yaml", variants: []variant{{dir: "monitoring"}}, objectCond: monitoringCond},
}

// monitoringCond switches each monitoring object by its kind.
func monitoringCond(obj map[string]any) string {
	switch obj["kind"] {
	case "ServiceMonitor", "Service":
		return ".Values.metrics.serviceMonitor.enabled"
	case "PrometheusRule":
		return ".Values.metrics.prometheusRule.enabled"
	case "ConfigMap":
		return ".Values.metrics.grafanaDashboard.enabled"
	}
	return ""
}

// workload says which values shape a Deployment or DaemonSet of the
// manifests (by name).
type workload struct {
	image, replicas, resources string
	// podSecurity and security are the expressions of the pod's and the
	// container's securityContext ("" keeps the manifest's).
	podSecurity, security string
	// args maps a flag of the container to the expression of its value.
	args map[string]string
	// extraArgs are list entries appended to the container's args.
	extraArgs []item
}

const clusterID = `include "ferry.clusterID" .`

var workloads = map[string]workload{
	"ferry-controller-manager": {
		image: "controllerManager", replicas: ".Values.controllerManager.replicas", resources: ".Values.controllerManager.resources",
		podSecurity: ".Values.podSecurityContext", security: ".Values.securityContext",
		args: map[string]string{
			"--cluster-id":                        clusterID,
			"--leader-elect":                      ".Values.controllerManager.leaderElection",
			"--virtual-kubelet-mode":              ".Values.virtualKubelet.mode",
			"--virtual-kubelet-image":             `include "ferry.image" (list . "virtualKubelet")`,
			"--virtual-kubelet-image-pull-policy": ".Values.images.pullPolicy",
			"--sharing-percentage":                ".Values.controllerManager.sharingPercentage",
			"--volume-mover-image":                `include "ferry.image" (list . "volumeMover")`,
			"--volume-mover-image-pull-policy":    ".Values.images.pullPolicy",
		},
		extraArgs: []item{
			{open: `if eq .Values.virtualKubelet.mode "process"`, entry: `{{ printf "--virtual-kubelet-binary=%s" .Values.virtualKubelet.binary | quote }}`},
			{open: "range .Values.virtualKubelet.extraArgs", entry: `{{ printf "--virtual-kubelet-arg=%s" . | quote }}`},
			{open: "range .Values.images.pullSecrets", entry: `{{ printf "--virtual-kubelet-image-pull-secret=%s" .name | quote }}`},
			{open: "if not .Values.storage.enabled", entry: "--disable-storage"},
			{open: "if not .Values.network.enabled", entry: "--disable-network"},
			{open: "with .Values.network.podCIDR", entry: `{{ printf "--pod-cidr=%s" . | quote }}`},
			{open: "with .Values.network.serviceCIDR", entry: `{{ printf "--service-cidr=%s" . | quote }}`},
			{open: "with .Values.network.ipamPool", entry: `{{ printf "--ipam-pool=%s" (join "," .) | quote }}`},
			{open: "range .Values.controllerManager.extraArgs", entry: "{{ . | quote }}"},
		},
	},
	"ferry-webhook": {
		image: "webhook", replicas: ".Values.webhook.replicas", resources: ".Values.webhook.resources",
		podSecurity: ".Values.podSecurityContext", security: ".Values.securityContext",
	},
	"ferry-scheduler": {
		image: "scheduler", replicas: ".Values.scheduler.replicas", resources: ".Values.scheduler.resources",
		podSecurity: ".Values.podSecurityContext", security: ".Values.securityContext",
		args: map[string]string{"--leader-elect": ".Values.scheduler.leaderElection"},
	},
	"ferry-gateway": {
		image: "gateway", replicas: ".Values.network.gateway.replicas", resources: ".Values.network.gateway.resources", security: ".Values.network.gateway.securityContext",
		args:      map[string]string{"--cluster-id": clusterID},
		extraArgs: []item{{open: "with .Values.network.gateway.endpoint", entry: `{{ printf "--endpoint=%s" . | quote }}`}},
	},
	"ferry-route-agent": {
		image: "gateway", resources: ".Values.network.gateway.routeAgent.resources", security: ".Values.network.gateway.routeAgent.securityContext",
		args: map[string]string{"--cluster-id": clusterID},
	},
}

// templatize sets the fields of obj that come from values to tokens of t.
func templatize(t *templater, obj map[string]any) error {
	t.escapeActions(obj)
	meta := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	labels[t.IncludeKey("ferry.labels")] = ""
	kind, name := obj["kind"].(string), meta["name"].(string)
	switch kind {
	case "CustomResourceDefinition":
		// Kept by helm uninstall: deleting a CRD deletes every object of
		// its kind, peerings and offloaded pods included.
		annotations, _ := meta["annotations"].(map[string]any)
		if annotations == nil {
			annotations = map[string]any{}
			meta["annotations"] = annotations
		}
		annotations["helm.sh/resource-policy"] = "keep"
	case "Service":
		if name == "ferry-gateway" {
			obj["spec"].(map[string]any)["type"] = t.Value(".Values.network.gateway.serviceType")
		}
	case "Deployment", "DaemonSet":
		w, ok := workloads[name]
		if !ok {
			return fmt.Errorf("%s %s: no values for it in hack/chartgen (workloads)", kind, name)
		}
		return templatizeWorkload(t, obj, kind+" "+name, w)
	}
	return nil
}

func templatizeWorkload(t *templater, obj map[string]any, what string, w workload) error {
	spec := obj["spec"].(map[string]any)
	if w.replicas != "" {
		spec["replicas"] = t.Value(w.replicas)
	}
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	if w.podSecurity != "" {
		pod["securityContext"] = t.Block(w.podSecurity)
	}
	pod["imagePullSecrets"] = t.Block(".Values.images.pullSecrets")
	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 {
		return fmt.Errorf("%s: want one container, found %d", what, len(containers))
	}
	c := containers[0].(map[string]any)
	c["image"] = t.Value(fmt.Sprintf(`include "ferry.image" (list . %q)`, w.image))
	c["imagePullPolicy"] = t.Value(".Values.images.pullPolicy")
	if w.resources != "" {
		c["resources"] = t.Block(w.resources)
	}
	if w.security != "" {
		c["securityContext"] = t.Block(w.security)
	}
	args, _ := c["args"].([]any)
	seen := map[string]bool{}
	for i, a := range args {
		flag, _, ok := strings.Cut(a.(string), "=")
		if expr, set := w.args[flag]; ok && set {
			args[i] = flag + "=" + t.Value(expr)
			seen[flag] = true
		}
	}
	for flag := range w.args {
		if !seen[flag] {
			return fmt.Errorf("%s: flag %s is not among the manifest's args %v", what, flag, args)
		}
	}
	for _, it := range w.extraArgs {
		args = append(args, t.Item(it.open, it.entry))
	}
	if args != nil {
		c["args"] = args
	}
	return nil
}

func kindIs(kinds ...string) func(map[string]any) bool {
	return func(obj map[string]any) bool {
		for _, k := range kinds {
			if obj["kind"] == k {
				return true
			}
		}
		return false
	}
}

func not(f func(map[string]any) bool) func(map[string]any) bool {
	return func(obj map[string]any) bool { return !f(obj) }
}
