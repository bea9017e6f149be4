// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Namespace creates a namespace for the test, waits for its default
// ServiceAccount (pods need it) and deletes the namespace when the test ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + rand.String(5)
	ctx := Context(t, time.Minute)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e.probeshim.io/test": "true"}}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	if err := WaitFor(ctx, 30*time.Second, "ServiceAccount "+name+"/default", func(ctx context.Context) (bool, string, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, errString(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// NewPod returns a pod for the rig: images come from the rig's registry (IfNotPresent), termination is
// quick (1 s), and it is scheduled like any other pod.
func NewPod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	grace := int64(1)
	for i := range containers {
		if containers[i].ImagePullPolicy == "" {
			containers[i].ImagePullPolicy = corev1.PullIfNotPresent
		}
		if containers[i].Image == "" {
			containers[i].Image = TestImage
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			Containers:                    containers,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyAlways,
		},
	}
}

// Shell is a TestImage container running script with sh -c. Use exec for
// the last command so that it gets the signals.
func Shell(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: TestImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sh", "-c", script}}
}

// ServingScript is a Shell script that serves HTTP on ServingPort (TestImage's localhttp-server,
// which ends with the container's PID 1) and exits at once on SIGTERM (wait is interrupted by the
// signal), so a kill takes no grace period. Its server answers FailingWhile's probes.
const ServingScript = "localhttp-server -listen :8080 2>/dev/null & trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"

// ServingPort is the port of ServingScript's server.
const ServingPort = 8080

// FailingWhile is an HTTP check of ServingScript's server (GET /unless-exists/<file>) that fails
// while file exists in the container: a probe a test fails with `touch`, at the cost of an HTTP
// request instead of an exec (runc and its shim) every period.
func FailingWhile(file string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/unless-exists" + file, Port: intstr.FromInt32(ServingPort)}}
}

// Command is a TestImage container running argv, e.g.
// Command("grpc", "grpc-health-server", "-listen", ":9090").
func Command(name string, argv ...string) corev1.Container {
	return corev1.Container{Name: name, Image: TestImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: argv}
}

// CreatePod creates pod and returns it as created; the test fails on error.
func (c *Cluster) CreatePod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := c.Kube.CoreV1().Pods(pod.Namespace).Create(Context(t, 30*time.Second), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return p
}

// DeletePod deletes the pod (grace period 0 unless given) and waits until it
// is gone.
func (c *Cluster) DeletePod(ctx context.Context, pod *corev1.Pod, timeout time.Duration) error {
	grace := int64(0)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	err := c.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return c.WaitForPodGone(ctx, pod.Namespace, pod.Name, timeout)
}

// Events lists the events whose involved object is the named object in ns
// (any kind), oldest first.
func (c *Cluster) Events(ctx context.Context, ns, name string) ([]corev1.Event, error) {
	l, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	items := l.Items
	for i := 1; i < len(items); i++ { // insertion sort by time; lists are short
		for j := i; j > 0 && eventTime(items[j]).Before(eventTime(items[j-1])); j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
	return items, nil
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// WaitForEvent waits for an event with the given reason on the named object
// whose message contains substr ("" matches any) and returns it.
func (c *Cluster) WaitForEvent(ctx context.Context, ns, name, reason, substr string, timeout time.Duration) (*corev1.Event, error) {
	var found *corev1.Event
	err := WaitFor(ctx, timeout, fmt.Sprintf("event %s %q on %s/%s", reason, substr, ns, name), func(ctx context.Context) (bool, string, error) {
		evs, err := c.Events(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for i := range evs {
			if evs[i].Reason == reason && strings.Contains(evs[i].Message, substr) {
				found = &evs[i]
				return true, "", nil
			}
			seen = append(seen, evs[i].Reason)
		}
		return false, "events: " + strings.Join(seen, ","), nil
	})
	return found, err
}

// FormatEvents renders events one per line, for failure messages.
func FormatEvents(evs []corev1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s %s (x%d): %s\n", eventTime(e).Format("15:04:05"), e.Type, e.Reason, e.Count, e.Message)
	}
	return b.String()
}

// withEvents appends the pod's events to err.
func (c *Cluster) withEvents(pod *corev1.Pod, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, lerr := c.Events(ctx, pod.Namespace, pod.Name)
	if lerr != nil || len(evs) == 0 {
		return err
	}
	return fmt.Errorf("%w\nevents of pod %s/%s:\n%s", err, pod.Namespace, pod.Name, FormatEvents(evs))
}
