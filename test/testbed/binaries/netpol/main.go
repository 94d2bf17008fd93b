// Command kube-network-policies runs SIG Network's NetworkPolicy engine,
// sigs.k8s.io/kube-network-policies v0.8.0 (its pkg/networkpolicy
// controller, unchanged), on a test-bed real node whose kernel lacks the
// nftables queue expression (CONFIG_NFT_QUEUE unset).
//
// Upstream's controller does two things: it decides each queued packet
// (nfnetlink_queue, which such kernels have), and it installs an nftables
// table whose rules send new connections of pods selected by a policy to
// its queue with the nft `queue` expression, which such kernels refuse
// (ENOENT): its table is never installed (the transaction fails whole, and
// the controller logs and retries). This command installs the one rule it
// needs instead, with the xtables NFQUEUE target (through nft_compat, which
// such kernels have), in the same place: postrouting, before source NAT,
// for packets of connections not yet established to or from the node's pod
// range, sent to the controller's queue without bypass (no verdict: the
// packet is dropped, upstream's default, fail closed). It queues the new
// connections of every pod of the node, not only those a policy selects;
// the controller accepts those no policy governs. Traffic the node's root
// processes originate (the kubelet's probes) is not queued, as upstream.
//
// The rule is installed once the controller listens on its queue, and
// removed when this command ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	var kubeconfig, nodeName, podCIDR, iptables string
	var queueID int
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flag.StringVar(&nodeName, "hostname-override", "", "the Node's name (required)")
	flag.StringVar(&podCIDR, "pod-cidr", "", "the node's pod range, whose pods' new connections are queued (required)")
	flag.StringVar(&iptables, "iptables", "iptables-nft", "iptables command installing the NFQUEUE rule")
	flag.IntVar(&queueID, "nfqueue-id", 100, "number of the nfqueue")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(kubeconfig, nodeName, podCIDR, iptables, queueID); err != nil {
		klog.ErrorS(err, "kube-network-policies stopped")
		os.Exit(1)
	}
}

func run(kubeconfig, nodeName, podCIDR, iptables string, queueID int) error {
	if kubeconfig == "" || nodeName == "" || podCIDR == "" {
		return errors.New("--kubeconfig, --hostname-override and --pod-cidr are required")
	}
	pods, err := netip.ParsePrefix(podCIDR)
	if err != nil || pods.Masked() != pods {
		return fmt.Errorf("--pod-cidr %q is not a CIDR", podCIDR)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(), factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID: queueID, NodeName: nodeName,
			// Kernels from 6.12 have the conntrack fix; the workaround
			// would queue DNS with the nft queue expression too.
			NetfilterBug1766Fix: false,
			// NRI stays on, as upstream's default: with it disabled,
			// v0.8.0 dereferences its nil NRI plugin for every packet
			// of an address no pod has (pkg/networkpolicy/controller.go,
			// getPodAssignedToIP) and crashes. Without an NRI socket (the
			// bed's containerd has NRI off) the plugin only logs that it
			// could not connect, and pods are known from the API server.
			NRIdisabled: false,
		})
	if err != nil {
		return fmt.Errorf("start the NetworkPolicy controller: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	factory.Start(ctx.Done())

	if err := waitListening(ctx, queueID, done); err != nil {
		return err
	}
	rules := queueRules(pods, queueID)
	for _, r := range rules {
		if out, err := exec.CommandContext(ctx, iptables, append([]string{"-t", "mangle", "-A", "POSTROUTING"}, r...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("install the NFQUEUE rule %q: %w: %s", strings.Join(r, " "), err, out)
		}
	}
	klog.InfoS("Queueing the new connections of the node's pods to the NetworkPolicy controller", "podCIDR", pods, "queue", queueID, "iptables", iptables)
	defer func() {
		for _, r := range rules {
			_ = exec.Command(iptables, append([]string{"-t", "mangle", "-D", "POSTROUTING"}, r...)...).Run()
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// queueRules are the iptables rules (mangle POSTROUTING, before source
// NAT) sending new connections to or from pods to the queue: upstream's
// rules, with NFQUEUE in place of the nft queue expression.
func queueRules(pods netip.Prefix, queueID int) [][]string {
	q := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(queueID)}
	notEstablished := []string{"-m", "conntrack", "!", "--ctstate", "ESTABLISHED,RELATED"}
	return [][]string{
		{"-m", "owner", "--uid-owner", "0", "-j", "RETURN"},
		append(append([]string{"-s", pods.String()}, notEstablished...), q...),
		append(append([]string{"-d", pods.String()}, notEstablished...), q...),
	}
}

// waitListening waits until a process of this network namespace listens on
// queue (/proc/net/netfilter/nfnetlink_queue lists it): before, a queued
// packet would be dropped.
func waitListening(ctx context.Context, queue int, done <-chan error) error {
	want := strconv.Itoa(queue)
	for {
		b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == want {
					return nil
				}
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("the NetworkPolicy controller stopped before listening on queue %d: %v", queue, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
