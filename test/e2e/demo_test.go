package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// The README's first command: make demo runs bin/ferry-demo up after
// building; this runs the same binary the same way, then up again in the
// same folder (refused: the running demo is left alone), kills a component
// (restarted, the demo goes on), then down, so the playground cannot rot.
var _ = Describe("The demo", Label("demo"), func() {
	It("peers two clusters with a real node each, offloads namespace demo, shows pods on the virtual node, ferry-scheduler's placements and refusals, a consumer pod's call answered by a provider pod through the Service, exec and logs of a real container; refuses a second demo in its folder, restarts a killed component, then stops everything, real nodes included", func(ctx context.Context) {
		if err := testbed.RealNodesAvailable(); err != nil {
			if os.Getenv("CI") != "" {
				Fail("the demo runs real nodes: " + err.Error())
			}
			Skip("the demo runs real nodes: " + err.Error())
		}
		bin, err := os.MkdirTemp("", "ferry-demo-bin-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, bin)
		state, err := os.MkdirTemp("", "ferry-demo-state-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, state)
		for _, pkg := range []string{"./cmd/...", "./test/cmd/demo"} {
			build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", pkg)
			build.Dir = framework.RepoRoot()
			out, err := build.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "go build %s:\n%s", pkg, out)
		}
		demoCmd := func(ctx context.Context, args ...string) *exec.Cmd {
			args = append(args, "--dir", state, "--bin-dir", bin, "--repo-root", framework.RepoRoot())
			return exec.CommandContext(ctx, filepath.Join(bin, "demo"), args...)
		}
		DeferCleanup(func() {
			// Also on failure: the daemon and all it started stop.
			out, _ := demoCmd(context.Background(), "down").CombinedOutput()
			GinkgoWriter.Printf("demo down:\n%s", out)
		})

		// Remote pods show their provider IP remapped into the pool
		// (10.64.0.0/11): both clusters use 10.244.0.0/16.
		remote := regexp.MustCompile(`(?m)^\s+api-\S+\s+Running\s+10\.(6[4-9]|[78]\d|9[0-5])\.\d+\.\d+\s+ferry-provider\s+provider: demo-consumer/api-\S+ on \S+, IP 10\.244\.\d+\.\d+ there`)
		local := regexp.MustCompile(`(?m)^\s+web-\S+\s+Running\s+10\.244\.\d+\.\d+\s+consumer-node-\d\s+this cluster`)
		// ferryctl status's network: the provider's pods mapped apart.
		network := regexp.MustCompile(`(?m)^\s+provider\s+10\.244\.0\.0/16\s+10\.\d+\.0\.0/16\s+10\.\d+\.0\.0/16\s+10\.\d+\.\d+\.\d+\s+(up|down \(\w+\))\s`)
		// The fabric's data path: a consumer pod called the api Service,
		// answered by a provider pod (its hostname).
		fabric := regexp.MustCompile(`(?m)^\s+answered "(api-\S+)": the hostname of the pod provider: demo-consumer/api-\S+ on provider-node-0, a container on that provider's real node$`)
		// exec in the answering pod: its kubelet-managed /etc/hosts names
		// it at its provider IP.
		execHosts := regexp.MustCompile(`(?m)^\s+10\.244\.\d+\.\d+\s+(api-\S+)$`)
		// ferryctl status's claims: the StatefulSet's data in the provider.
		data := regexp.MustCompile(`(?m)^\s+demo/data-db-\d\s+provider\s+demo-consumer/data-db-\d\s+1Gi\s+Bound`)
		// ferry-scheduler's placement and messages: the pods of
		// demo-scheduler carry its name and its events report it, the
		// Scheduled ones binding batch to the virtual node, the
		// FailedScheduling one RemoteFit's refusal of the pod no provider
		// node can hold. kube-scheduler's default-scheduler would have bound
		// render to the virtual node.
		byFerry := regexp.MustCompile(`(?m)^\s+batch-\S+\s+Running\s+ferry-scheduler\s+ferry-provider\s+ferry-scheduler\s+Scheduled: Successfully assigned demo-scheduler/batch-\S+ to ferry-provider$`)
		refused := regexp.MustCompile(`(?m)^\s+render-\S+\s+Pending\s+ferry-scheduler\s+<none>\s+ferry-scheduler\s+FailedScheduling: .*cluster provider: no real node fits the pod: cpu`)
		By("make demo")
		upCtx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		out, err := demoCmd(upCtx, "up").CombinedOutput()
		cancel()
		Expect(err).NotTo(HaveOccurred(), "demo up:\n%s", out)
		Expect(remote.FindAll(out, -1)).To(HaveLen(4), "demo up:\n%s", out)
		Expect(local.FindAll(out, -1)).To(HaveLen(3), "demo up:\n%s", out)
		Expect(data.FindAll(out, -1)).To(HaveLen(2), "demo up:\n%s", out)
		Expect(network.FindAll(out, -1)).To(HaveLen(1), "demo up:\n%s", out)
		Expect(fabric.FindAll(out, -1)).To(HaveLen(1), "demo up:\n%s", out)
		Expect(execHosts.FindSubmatch(out)).To(HaveLen(2), "demo up:\n%s", out)
		Expect(string(execHosts.FindSubmatch(out)[1])).To(Equal(string(fabric.FindSubmatch(out)[1])), "exec shows the pod that answered")
		Expect(byFerry.FindAll(out, -1)).To(HaveLen(2), "demo up:\n%s", out)
		Expect(refused.FindAll(out, -1)).To(HaveLen(1), "demo up:\n%s", out)
		Expect(string(out)).To(ContainSubstring("Started HTTP server on port 8080"))
		Expect(string(out)).To(MatchRegexp(`GET /hostname`))
		Expect(string(out)).To(ContainSubstring(filepath.Join(state, "consumer.kubeconfig")))

		var ready struct {
			ConsumerDir, ProviderDir string
		}
		readyJSON, err := os.ReadFile(filepath.Join(state, "ready.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(readyJSON, &ready)).To(Succeed())

		status := func() string {
			out, err := demoCmd(ctx, "status").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "demo status:\n%s", out)
			return string(out)
		}
		daemonLine := regexp.MustCompile(`demo in \S+, daemon PID (\d+)`)
		m := daemonLine.FindStringSubmatch(status())
		Expect(m).NotTo(BeNil(), "demo status:\n%s", status())
		daemonPID, _ := strconv.Atoi(m[1])

		By("make demo again in the same folder: refused, the running demo left alone")
		out, err = demoCmd(ctx, "up").CombinedOutput()
		Expect(err).To(HaveOccurred(), "a second demo up in %s succeeded:\n%s", state, out)
		Expect(string(out)).To(ContainSubstring(fmt.Sprintf("a demo is already running in %s (daemon PID %d)", state, daemonPID)))
		Expect(string(out)).To(ContainSubstring("make demo-down"))
		Expect(syscall.Kill(daemonPID, 0)).To(Succeed(), "the running demo's daemon is gone")

		By("killing the consumer's ferry-webhook: restarted with back-off, the demo goes on")
		webhook := regexp.MustCompile(`(?m)^consumer-webhook\s+(\S+)\s+(\S+)\s+(\d+)\s`)
		m = webhook.FindStringSubmatch(status())
		Expect(m).NotTo(BeNil(), "demo status:\n%s", status())
		Expect(m[1]).To(Equal("Running"))
		Expect(m[3]).To(Equal("0"))
		killed, err := strconv.Atoi(m[2])
		Expect(err).NotTo(HaveOccurred())
		Expect(syscall.Kill(killed, syscall.SIGKILL)).To(Succeed())
		// The first restart comes after the kubelet's 10 s back-off.
		Eventually(func(g Gomega) {
			s := status()
			m := webhook.FindStringSubmatch(s)
			g.Expect(m).NotTo(BeNil(), s)
			g.Expect(m[1:4]).To(HaveExactElements("Running", Not(Equal(strconv.Itoa(killed))), "1"), s)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(syscall.Kill(daemonPID, 0)).To(Succeed(), "the demo's daemon ended when a component exited")
		Expect(status()).To(ContainSubstring(fmt.Sprintf("daemon PID %d", daemonPID)))
		log, err := os.ReadFile(filepath.Join(state, "daemon.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).To(MatchRegexp(`"msg"="Process exited; restarting it after back-off" "process"="consumer-webhook" "pid"=%d`, killed))

		restarted, err := strconv.Atoi(webhook.FindStringSubmatch(status())[2])
		Expect(err).NotTo(HaveOccurred())

		By("make demo-down")
		out, err = demoCmd(ctx, "down").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "demo down:\n%s", out)
		Expect(string(out)).To(ContainSubstring("the demo is stopped"))
		_, err = os.Stat(filepath.Join(state, "daemon.pid"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "the daemon's PID file outlived it")
		Expect(syscall.Kill(restarted, 0)).To(MatchError(syscall.ESRCH), "the restarted webhook outlived the demo")
		out, err = demoCmd(ctx, "down").CombinedOutput()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("no demo is running"))

		By("nothing of the real nodes is left: no process, cgroup or mount of the clusters' folders")
		for _, dir := range []string{ready.ConsumerDir, ready.ProviderDir} {
			Expect(dir).NotTo(BeEmpty())
			cgroups, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", filepath.Base(dir)+"-*"))
			Expect(err).NotTo(HaveOccurred())
			Expect(cgroups).To(BeEmpty(), "cgroups of %s's real nodes", dir)
			mounts, err := os.ReadFile("/proc/self/mountinfo")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(mounts)).NotTo(ContainSubstring(dir))
			procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
			Expect(err).NotTo(HaveOccurred())
			for _, p := range procs {
				cmdline, err := os.ReadFile(p)
				if err == nil {
					Expect(string(cmdline)).NotTo(ContainSubstring(dir), "process %s outlived the demo", p)
				}
			}
			_, err = os.Stat(dir)
			Expect(os.IsNotExist(err)).To(BeTrue(), "%s outlived the demo", dir)
		}
	})
})
