package testbed

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CNIPluginDir is where Debian's containernetworking-plugins installs the CNI
// plugins real nodes use.
const CNIPluginDir = "/usr/lib/cni"

// NodeCommands are the host programs real nodes run, from Debian packages
// (containerd, runc, iptables, conntrack, nftables: kube-proxy runs in
// nftables mode); `make node-packages` installs them.
var NodeCommands = []string{"containerd", "ctr", "runc", "iptables", "conntrack", "nft"}

// CNIPlugins are the plugins in CNIPluginDir real nodes use.
var CNIPlugins = []string{"bridge", "host-local", "loopback", "ptp", "portmap"}

// sbinDirs hold system programs, absent from the PATH of many non-root shells.
var sbinDirs = []string{"/usr/sbin", "/sbin"}

// NodeCommand is the path of one of NodeCommands: from PATH, or /usr/sbin or
// /sbin.
func NodeCommand(name string) (string, error) {
	return lookCommand(exec.LookPath, sbinDirs, name)
}

// NodePackages checks that the host programs and CNI plugins real nodes need
// are installed, and otherwise names the missing ones and how to install
// them.
func NodePackages() error {
	return nodePackages(exec.LookPath, sbinDirs, CNIPluginDir)
}

func nodePackages(lookPath func(string) (string, error), sbin []string, cniDir string) error {
	var missing []string
	for _, name := range NodeCommands {
		if _, err := lookCommand(lookPath, sbin, name); err != nil {
			missing = append(missing, name)
		}
	}
	for _, plugin := range CNIPlugins {
		p := filepath.Join(cniDir, plugin)
		if err := executable(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("host packages for real test-bed nodes: missing %s: run `make node-packages` as root (containerd, runc, containernetworking-plugins, iptables, conntrack, nftables from Debian)", strings.Join(missing, ", "))
	}
	return nil
}

func lookCommand(lookPath func(string) (string, error), sbin []string, name string) (string, error) {
	p, err := lookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range sbin {
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("host program %s: not in PATH nor in %s: run `make node-packages`: %w", name, strings.Join(sbin, ", "), err)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", p, fs.ErrPermission)
	}
	return nil
}
