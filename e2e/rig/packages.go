package rig

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/probeshim/probeshim/internal/logtail"
)

// Packages are the Debian packages the rig runs: the container runtime, the CNI
// plugins, the busybox the test images are built from, and the tools it shells
// out to. kube-proxy needs iptables; nsenter comes from util-linux.
var Packages = []string{
	"containerd", "runc", "containernetworking-plugins", "busybox-static",
	"iproute2", "iptables", "openssl", "util-linux", "mount", "procps",
}

// EnsurePackages installs whichever of pkgs is missing with apt-get, waiting for
// the dpkg lock rather than failing when another apt is running. It runs
// `apt-get update` only when an install is needed.
func EnsurePackages(ctx context.Context, logf func(string, ...any), pkgs ...string) error {
	var missing []string
	for _, p := range pkgs {
		if !packageInstalled(ctx, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	logf("installing Debian packages: %s", strings.Join(missing, " "))
	lock := []string{"-o", "DPkg::Lock::Timeout=300"}
	update := append(append([]string{}, lock...), "update", "-q")
	if err := runApt(ctx, update...); err != nil {
		return err
	}
	install := append(append([]string{}, lock...), "install", "-y", "-q", "--no-install-recommends")
	if err := runApt(ctx, append(install, missing...)...); err != nil {
		return err
	}
	for _, p := range missing {
		if !packageInstalled(ctx, p) {
			return fmt.Errorf("package %s still not installed after apt-get install", p)
		}
	}
	return nil
}

func packageInstalled(ctx context.Context, name string) bool {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", name).Output()
	return err == nil && strings.HasSuffix(strings.TrimSpace(string(out)), " installed")
}

func runApt(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, logtail.Last(out.String(), 40))
	}
	return nil
}
