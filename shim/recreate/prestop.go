package recreate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
)

// userAgent is what the kubelet of the same minor version sends with lifecycle hooks.
const userAgent = "kube-lifecycle/1.37"

// maxHookOutput caps what of a hook's output goes into a message.
const maxHookOutput = 256

// runPreStop runs the container's preStop hook, bounded by grace (the kubelet's rule: the hook
// runs inside the grace period). Network hooks are dialled inside the pod's network namespace
// and reach only the pod. An error says why the hook failed; the container is stopped anyway.
func runPreStop(ctx context.Context, rt Runtime, network prober.Network, pod *corev1.Pod,
	c *v1alpha1.ContainerRecreateRequestContainer, containerID string, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	h := c.PreStop
	switch {
	case h.Exec != nil:
		res, err := rt.Exec(ctx, containerID, h.Exec.Command, grace)
		if errors.Is(err, prober.ErrExecTimeout) || (err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) {
			return fmt.Errorf("preStop hook did not finish within the grace period (%v)", grace)
		}
		if err != nil {
			return fmt.Errorf("preStop hook: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("preStop hook exited with code %d: %s", res.ExitCode, capOutput(res.Output))
		}
		return nil
	case h.HTTPGet != nil:
		return httpHook(ctx, network, pod, c, h.HTTPGet)
	case h.TCPSocket != nil:
		d, addr, err := target(network, pod, c, h.TCPSocket.Host, h.TCPSocket.Port)
		if err != nil {
			return err
		}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("preStop hook: %w", err)
		}
		return conn.Close()
	}
	return nil
}

func httpHook(ctx context.Context, network prober.Network, pod *corev1.Pod, c *v1alpha1.ContainerRecreateRequestContainer, a *corev1.HTTPGetAction) error {
	d, addr, err := target(network, pod, c, a.Host, a.Port)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme, u.Host = scheme, addr
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("preStop hook: %w", err)
	}
	for _, hh := range a.HTTPHeaders {
		req.Header.Add(hh.Name, hh.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	req.Host = req.Header.Get("Host")
	client := &http.Client{
		Transport: &http.Transport{
			DialContext:       d.DialContext,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's hooks
			DisableKeepAlives: true,
			Proxy:             nil, // never the environment's proxy
		},
		// A redirect could name any host; the hook is done with the first answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("preStop hook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, 10<<10)
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("preStop hook: HTTP GET %s answered %d", u.Path, resp.StatusCode)
	}
	return nil
}

// target is where a network hook connects, and the dialer for the pod: only the pod itself,
// whatever the hook says (a request written around admission must not reach other machines).
func target(network prober.Network, pod *corev1.Pod, c *v1alpha1.ContainerRecreateRequestContainer,
	host string, port intstr.IntOrString) (prober.Dialer, string, error) {
	ip := pod.Status.PodIP
	switch {
	case host == "" || host == ip:
		host = ip
		if host == "" {
			if pod.Spec.HostNetwork {
				return nil, "", errors.New("preStop hook: the pod IP is not known yet")
			}
			host = "127.0.0.1" // the pod itself, inside its own network namespace
		}
	case !pod.Spec.HostNetwork && (host == "localhost" || isLoopback(host)):
	default:
		return nil, "", fmt.Errorf("preStop hook: host %q is not the pod", host)
	}
	p := int(port.IntVal)
	if port.Type == intstr.String {
		p = 0
		for _, cp := range c.Ports {
			if cp.Name == port.StrVal {
				p = int(cp.ContainerPort)
			}
		}
		if p == 0 {
			return nil, "", fmt.Errorf("preStop hook: port %q is not a port of container %s", port.StrVal, c.Name)
		}
	}
	if p < 1 || p > 65535 {
		return nil, "", fmt.Errorf("preStop hook: invalid port %d", p)
	}
	d, err := network.DialerFor(prober.PodRef{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name,
		IP: ip, HostNetwork: pod.Spec.HostNetwork})
	if err != nil {
		return nil, "", fmt.Errorf("preStop hook: network of the pod: %w", err)
	}
	return d, net.JoinHostPort(host, strconv.Itoa(p)), nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func capOutput(b []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(b)), "\uFFFD")
	if len(s) > maxHookOutput {
		s = s[:maxHookOutput] + "..."
	}
	return s
}
