package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
)

// httpPort is where the demo's netexec containers (api, web) serve.
const httpPort = 8080

// podNodeSelectorAnnotation is the PodNodeSelector admission plugin's
// namespace annotation: every pod created in the namespace gets that node
// selector.
const podNodeSelectorAnnotation = "scheduler.alpha.kubernetes.io/node-selector"

// twinNodeSelectors is where each offloaded namespace's pods run in the
// providers: the demo's (api, db) on the real node, as real containers;
// the scheduling part's on the simulated nodes, whose capacity it is about.
var twinNodeSelectors = []struct{ namespace, selector string }{
	{Namespace, testbed.RealNodeLabel + "=true"},
	{SchedulerNamespace, "type=kwok"},
}

// agnhostContainer is a container of Kubernetes' e2e image (imported in
// every real node, never pulled) running args, requesting cpu and 128Mi.
// With netexec it serves HTTP on httpPort and is Ready once it does.
func agnhostContainer(name, cpu string, args ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: args,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}
	if len(args) > 0 && args[0] == "netexec" {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: httpPort}}
		// A TCP probe: netexec logs every HTTP request, and its log is
		// shown.
		c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(httpPort)}}}
	}
	return c
}

// apiService is the Service of the offloaded api pods, as users write it.
func apiService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "api"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "api"},
			Ports: []corev1.ServicePort{{Name: "http", Port: httpPort, TargetPort: intstr.FromString("http")}}},
	}
}

// serviceHost is the api Service's DNS name, which web pods call.
func serviceHost() string { return "api." + Namespace + ".svc.cluster.local" }

// dialAnswer is netexec's answer to /dial: what each try got back.
type dialAnswer struct {
	Responses []string `json:"responses"`
	Errors    []string `json:"errors"`
}

// parseDial reads netexec's /dial answer and checks that every response
// is the hostname of one of the pods that may answer (the provider's api
// pods): a response from anything else is no proof.
func parseDial(raw []byte, hostnames []string) (dialAnswer, error) {
	var a dialAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("netexec's /dial answered %q: %w", raw, err)
	}
	if len(a.Responses) == 0 {
		if len(a.Errors) == 0 {
			return a, fmt.Errorf("netexec's /dial answered neither a response nor an error: %s", raw)
		}
		return a, fmt.Errorf("no answer: %s", strings.Join(a.Errors, "; "))
	}
	for _, r := range a.Responses {
		if !slices.Contains(hostnames, r) {
			return a, fmt.Errorf("answer %q is the hostname of none of the api pods (%s)", r, strings.Join(hostnames, ", "))
		}
	}
	return a, nil
}

// callService has web (a pod of this cluster, on its real node) call the
// api Service by its DNS name through netexec's /dial, reached through
// the consumer's API server (pod proxy); it retries for up to a minute
// while the answer is missing or not an api pod's. It returns the URL
// asked for and the answer.
func callService(ctx context.Context, c *clients, web string, hostnames []string) (string, dialAnswer, error) {
	path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/dial?request=hostname&protocol=http&host=%s&port=%d&tries=1",
		LocalNamespace, web, httpPort, serviceHost(), httpPort)
	deadline := time.Now().Add(time.Minute)
	for {
		req := c.kube.CoreV1().RESTClient().Get().Namespace(LocalNamespace).Resource("pods").Name(fmt.Sprintf("%s:%d", web, httpPort)).
			SubResource("proxy").Suffix("dial").Param("request", "hostname").Param("protocol", "http").
			Param("host", serviceHost()).Param("port", fmt.Sprint(httpPort)).Param("tries", "1")
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		raw, err := req.DoRaw(cctx)
		cancel()
		var a dialAnswer
		if err != nil {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(raw)))
		} else {
			a, err = parseDial(raw, hostnames)
		}
		if err == nil || time.Now().After(deadline) {
			return path, a, err
		}
		if serr := sleep(ctx, 2*time.Second); serr != nil {
			return path, a, err
		}
	}
}

// annotateTwins gives the twin namespaces of the offloaded namespaces, in
// every provider, their PodNodeSelector annotation (twinNodeSelectors), as
// the provider's administrator would: kubectl annotate.
func annotateTwins(ctx context.Context, out io.Writer, consumer *clients, kubectl string, providers []ProviderReady) error {
	kubeconfigs := map[ferryv1alpha1.ClusterID]string{}
	for _, p := range providers {
		kubeconfigs[ferryv1alpha1.ClusterID(p.Name)] = p.Kubeconfig
	}
	for _, t := range twinNodeSelectors {
		var nso ferryv1alpha1.NamespaceOffloading
		if err := consumer.ctrl.Get(ctx, client.ObjectKey{Namespace: t.namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso); err != nil {
			return fmt.Errorf("read the NamespaceOffloading of %s: %w", t.namespace, err)
		}
		for _, cs := range nso.Status.Clusters {
			kubeconfig, ok := kubeconfigs[cs.ClusterID]
			if !ok || cs.TwinNamespace == "" {
				continue
			}
			if err := run(ctx, out, kubectl, "--kubeconfig", kubeconfig, "annotate", "--overwrite", "namespace", cs.TwinNamespace,
				podNodeSelectorAnnotation+"="+t.selector); err != nil {
				return err
			}
		}
	}
	return nil
}

// remoteHostnames are the hostnames of the provider pods running the
// consumer's pods of namespace (a pod's hostname is its name), with the
// provider running each.
func remoteHostnames(ctx context.Context, providers map[string]*clients, namespace string) ([]string, map[string]string, error) {
	var names []string
	where := map[string]string{}
	for name, p := range providers {
		var list corev1.PodList
		if err := p.ctrl.List(ctx, &list, client.MatchingLabels{ferryv1alpha1.LabelOriginNamespace: namespace}); err != nil {
			return nil, nil, fmt.Errorf("list pods of %s in %s: %w", namespace, name, err)
		}
		for _, r := range list.Items {
			names = append(names, r.Name)
			where[r.Name] = name + ": " + r.Namespace + "/" + r.Name + " on " + r.Spec.NodeName
		}
	}
	slices.Sort(names)
	return names, where, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
