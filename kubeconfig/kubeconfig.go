// Package kubeconfig finds the API server ferry's binaries and ferryctl
// talk to, and when it finds none says where it looked, naming the flag:
// client-go's own message then is "try setting KUBERNETES_MASTER", a
// variable nothing of ferry reads.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNotFound is wrapped by the errors of a search that found no
// kubeconfig at all.
var ErrNotFound = errors.New("no kubeconfig")

// ForComponent is the configuration of a component (controller manager,
// webhook, gateway, virtual kubelet): the kubeconfig file at path, which
// flag names, or, when path is empty, the in-cluster configuration of the
// pod it runs in. Like kube-scheduler, a component does not read
// $KUBECONFIG.
func ForComponent(flag, path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fileError(flag, path, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %s is empty and there is no in-cluster configuration (%v): pass %s=<file> (a component does not read $KUBECONFIG), or run it in a pod", ErrNotFound, flag, err, flag)
	}
	return cfg, nil
}

// ForCLI is the configuration kubectl would use: the kubeconfig file at
// path, which flag names, or by the default loading rules ($KUBECONFIG,
// then ~/.kube/config), at context (the current one when empty).
func ForCLI(flag, path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	switch {
	case err == nil:
		return cfg, nil
	case path != "":
		return nil, fileError(flag, path, err)
	case clientcmd.IsEmptyConfig(err) && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		return nil, fmt.Errorf("%w: the files of $KUBECONFIG (%s) do not exist or hold nothing: pass %s=<file>, or fix $KUBECONFIG",
			ErrNotFound, os.Getenv(clientcmd.RecommendedConfigPathEnvVar), flag)
	case clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("%w: $KUBECONFIG is unset and ~/.kube/config does not exist or holds nothing: pass %s=<file>, set $KUBECONFIG, or write ~/.kube/config", ErrNotFound, flag)
	case context != "":
		return nil, fmt.Errorf("kubeconfig of $KUBECONFIG or ~/.kube/config (context %q): %w", context, err)
	default:
		return nil, fmt.Errorf("kubeconfig of $KUBECONFIG or ~/.kube/config: %w", err)
	}
}

// Explain rewrites client-go's error for an empty configuration (that of
// kube-scheduler's loading, in ferry-scheduler) as ForComponent's, and
// returns any other error as it is.
func Explain(flag string, err error) error {
	if err == nil || !clientcmd.IsEmptyConfig(err) {
		return err
	}
	return fmt.Errorf("%w: %s is empty and there is no in-cluster configuration: pass %s=<file> (a component does not read $KUBECONFIG), or run it in a pod", ErrNotFound, flag, flag)
}

// fileError names the flag and file of err, and says what an empty file
// lacks instead of client-go's KUBERNETES_MASTER.
func fileError(flag, path string, err error) error {
	if clientcmd.IsEmptyConfig(err) {
		return fmt.Errorf("%s %q: the file holds no cluster, user or context", flag, path)
	}
	return fmt.Errorf("%s %q: %w", flag, path, err)
}
