package kubeconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// outsideAPod makes the in-cluster configuration unavailable, as on a
// laptop.
func outsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

func expectNotFound(t *testing.T, err error, wants ...string) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if strings.Contains(err.Error(), "KUBERNETES_MASTER") {
		t.Errorf("err = %v names KUBERNETES_MASTER, which nothing reads", err)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %s", err, want)
		}
	}
}

func TestForComponentWithoutKubeconfigOrPodNamesTheFlag(t *testing.T) {
	outsideAPod(t)
	_, err := ForComponent("--kubeconfig", "")
	expectNotFound(t, err, "--kubeconfig", "in-cluster", "$KUBECONFIG")
}

func TestForCLIWithoutKubeconfigNamesTheFlagAndKUBECONFIG(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	t.Setenv("KUBECONFIG", missing)
	_, err := ForCLI("--consumer-kubeconfig", "", "")
	expectNotFound(t, err, "--consumer-kubeconfig", "$KUBECONFIG", missing)

	t.Setenv("KUBECONFIG", "")
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists on this machine: the case of no kubeconfig at all cannot be made", clientcmd.RecommendedHomeFile)
	}
	_, err = ForCLI("--kubeconfig", "", "")
	expectNotFound(t, err, "--kubeconfig", "$KUBECONFIG", "~/.kube/config")
}

func TestAnEmptyKubeconfigFileIsNamed(t *testing.T) {
	outsideAPod(t)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, load := range map[string]func() error{
		"component": func() error { _, err := ForComponent("--kubeconfig", empty); return err },
		"cli":       func() error { _, err := ForCLI("--kubeconfig", empty, ""); return err },
	} {
		err := load()
		if err == nil || !strings.Contains(err.Error(), `--kubeconfig "`+empty+`": the file holds no cluster`) || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
			t.Errorf("%s: err = %v, want it to name --kubeconfig, the file and what it lacks", name, err)
		}
	}
}

// Explain rewrites client-go's own error, which ferry-scheduler gets from
// kube-scheduler's loading; other errors pass unchanged.
func TestExplainRewritesClientGosEmptyConfigError(t *testing.T) {
	outsideAPod(t)
	_, raw := clientcmd.BuildConfigFromFlags("", "")
	if raw == nil || !strings.Contains(raw.Error(), "KUBERNETES_MASTER") {
		t.Fatalf("client-go's error = %v; this test expects its KUBERNETES_MASTER message", raw)
	}
	expectNotFound(t, Explain("--kubeconfig", raw), "--kubeconfig", "in-cluster")
	other := errors.New("other")
	if got := Explain("--kubeconfig", other); got != other {
		t.Errorf("Explain(other) = %v, want it unchanged", got)
	}
}
