package demo

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/netlab"
	"github.com/ferry-io/ferry/test/testbed"
)

// fabricFile is where the daemon writes what the network fabric showed.
const fabricFile = "fabric.txt"

// The lab's node subnets: kwok gives pod IPs from the low half, the
// gateway pod sits in the other.
var (
	labSubnets = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/17"), netip.MustParsePrefix("10.244.128.0/17")}
	gatewayIP  = netip.MustParseAddr("10.244.255.250")
)

// demoFabric is the network fabric's data path in the demo: each cluster's
// nodes and pods as network namespaces of a lab that never touches the
// host's own network (nothing but new namespaces, gone with the daemon), a
// ferry-gateway per cluster and a route agent per lab node.
type demoFabric struct {
	lab  *netlab.Lab
	labs map[string]*netlab.Cluster
}

// startFabric builds the lab and starts the gateways and route agents, as
// components of the daemon.
func startFabric(comps *components, clusters []*testbed.Cluster) (*demoFabric, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the network fabric's data path needs root (network namespaces, links, nftables): not shown")
	}
	lab, err := netlab.New(netlab.Prefix())
	if err != nil {
		return nil, err
	}
	f := &demoFabric{lab: lab, labs: map[string]*netlab.Cluster{}}
	bin := filepath.Join(comps.cfg.BinDir, "ferry-gateway")
	for _, c := range clusters {
		lc, err := lab.AddCluster(c.Name, labSubnets)
		if err != nil {
			return f, err
		}
		gw, err := lc.AddGateway(1, "gw", gatewayIP)
		if err != nil {
			return f, err
		}
		f.labs[c.Name] = lc
		if _, err := comps.start(c.Name, kindGateway, c.Name+"-"+kindGateway, bin, "--kubeconfig="+c.KubeconfigPath, "--cluster-id="+c.Name,
			"--netns="+lab.Path(gw.NS), "--link-prefix="+lab.Prefix+"x"+linkTag(c.Name), fmt.Sprintf("--endpoint=%s:51820", gw.WANIP),
			"--pod-address="+gw.IP.String(), "--metrics-bind-address=0", "--health-probe-bind-address=0"); err != nil {
			return f, err
		}
		for _, n := range lc.Nodes {
			if _, err := comps.start(c.Name, kindRouteAgent, c.Name+"-"+kindRouteAgent+"-"+n.Name, bin, "route-agent", "--kubeconfig="+c.KubeconfigPath,
				"--cluster-id="+c.Name, "--netns="+lab.Path(n.NS), "--link-prefix="+lab.Prefix+"x",
				"--metrics-bind-address=0", "--health-probe-bind-address=0"); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

// linkTag tells a cluster's gateway links apart in a lab (userspace
// WireGuard's control socket is named after the link, in one folder for
// the whole host): c for the consumer, p for the provider, p2 for
// provider-2...
func linkTag(cluster string) string {
	if n, ok := strings.CutPrefix(cluster, providerName+"-"); ok {
		return providerName[:1] + n
	}
	return cluster[:1]
}

func (f *demoFabric) close() {
	if f != nil && f.lab != nil {
		_ = f.lab.Close()
	}
}

// show waits for the demo's pods, gives one consumer pod (of demo-local)
// and one offloaded pod (of demo) a network namespace at their IPs in
// their clusters' labs, and connects the first to the second at the IP the
// consumer shows, writing what happened to fabric.txt for `up` to print.
func (f *demoFabric) show(ctx context.Context, stateDir string, consumer *testbed.Cluster, providers []*testbed.Cluster) {
	report := func(lines ...string) {
		_ = writeText(filepath.Join(stateDir, fabricFile), strings.Join(lines, "\n")+"\n")
	}
	if err := f.connect(ctx, consumer, providers, report); err != nil {
		report("the fabric demonstration failed: " + err.Error())
	}
}

func (f *demoFabric) connect(ctx context.Context, consumer *testbed.Cluster, providers []*testbed.Cluster, report func(...string)) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var local, offloaded, remote *corev1.Pod
	var provider *testbed.Cluster
	for local == nil || offloaded == nil || remote == nil {
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("waiting for the demo's pods: %w", err)
		}
		local = firstRunning(ctx, consumer, LocalNamespace, func(p *corev1.Pod) bool { return !isVirtual(p.Spec.NodeName) })
		offloaded = firstRunning(ctx, consumer, Namespace, func(p *corev1.Pod) bool { return isVirtual(p.Spec.NodeName) })
		if offloaded == nil {
			continue
		}
		// Its virtual node tells which provider runs it.
		provider = providerOf(providers, offloaded.Spec.NodeName)
		if provider == nil {
			continue
		}
		var list corev1.PodList
		if err := provider.Client.List(ctx, &list, client.MatchingLabels{ferryv1alpha1.LabelOriginUID: string(offloaded.UID)}); err == nil && len(list.Items) == 1 && list.Items[0].Status.PodIP != "" {
			remote = &list.Items[0]
		}
	}
	for {
		var fc ferryv1alpha1.ForeignCluster
		if err := consumer.Client.Get(ctx, client.ObjectKey{Name: provider.Name}, &fc); err == nil && meta.IsStatusConditionTrue(fc.Status.Conditions, ferryv1alpha1.ForeignClusterNetworkReady) {
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("waiting for the tunnel (NetworkReady): %w", err)
		}
	}
	server, err := f.labs[provider.Name].AddPod(0, remote.Name, netip.MustParseAddr(remote.Status.PodIP))
	if err != nil {
		return err
	}
	if _, err := server.ServeEcho(8080); err != nil {
		return err
	}
	from, err := f.labs[consumer.Name].AddPod(0, local.Name, netip.MustParseAddr(local.Status.PodIP))
	if err != nil {
		return err
	}
	to := netip.AddrPortFrom(netip.MustParseAddr(offloaded.Status.PodIP), 8080)
	payload := []byte("hello from " + local.Name)
	var last error
	for range 20 {
		ectx, cancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		last = from.Echo(ectx, to, payload)
		cancel()
		if last == nil {
			report(fmt.Sprintf("%s/%s (%s, this cluster) connected to %s/%s at %s, the IP the consumer shows;",
				LocalNamespace, local.Name, local.Status.PodIP, Namespace, offloaded.Name, to),
				fmt.Sprintf("the provider's pod %s/%s (%s there, both clusters use %s) echoed %q back in %s,",
					remote.Namespace, remote.Name, remote.Status.PodIP, consumer.PodCIDR(), payload, time.Since(start).Round(time.Microsecond)),
				"through node → VXLAN → ferry-gateway (nftables 1:1 NAT) → WireGuard → ferry-gateway → node → pod.")
			return nil
		}
		if err := sleep(ctx, time.Second); err != nil {
			break
		}
	}
	return fmt.Errorf("%s could not reach %s: %w", local.Name, to, last)
}

// providerOf is the provider whose virtual node is node, or nil.
func providerOf(providers []*testbed.Cluster, node string) *testbed.Cluster {
	for _, p := range providers {
		if virtualNodeName(p.Name) == node {
			return p
		}
	}
	return nil
}

func firstRunning(ctx context.Context, c *testbed.Cluster, ns string, ok func(*corev1.Pod) bool) *corev1.Pod {
	var list corev1.PodList
	if err := c.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && ok(p) {
			return p
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func writeText(path, s string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
