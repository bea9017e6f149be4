// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package podcachetest makes realistic Pods for the tests and benchmarks of the pod cache's
// transform: what a Deployment's pod looks like in a production cluster (two containers with env,
// mounts, resources and probes, the service account volume, default tolerations, the kubelet's
// status with container statuses and five conditions, the managed fields of the controller
// manager and the kubelet).
package podcachetest

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// Options vary the pod.
type Options struct {
	// Liveness: the pod uses the enhanced liveness probe (the two annotations of the webhook).
	Liveness bool
	// Applied: the pod was created by kubectl apply (its last-applied-configuration annotation).
	Applied bool
	// Node is spec.nodeName ("" for node-<i mod 100>).
	Node string
}

// Pod is the i-th realistic pod of namespace ns: a whole object as the API server returns it,
// managed fields included. Pods of different i differ in names, UID, IPs and container IDs.
func Pod(ns string, i int, o Options) *corev1.Pod {
	now := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	rs := fmt.Sprintf("shop-cart-%x", 0x5d6f7c8b9+i/20)
	node := o.Node
	if node == "" {
		node = fmt.Sprintf("node-%03d", i%100)
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 64+i>>16, i>>8&255, i&255)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	app := corev1.Container{
		Name: "app", Image: "registry.example.com/shop/cart:v1.42.7", ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/app/cart"}, Args: []string{"--config=/etc/cart/config.yaml", "--listen=:8080", "--log-format=json"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
			{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1")}}},
			{Name: "DB_HOST", Value: "cart-db.shop.svc.cluster.local"},
			{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cart-db"}, Key: "password"}}},
			{Name: "CACHE_URL", Value: "redis://cart-cache.shop.svc.cluster.local:6379/0"},
			{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc:4317"},
			{Name: "FEATURE_FLAGS", Value: "checkout-v2,recommendations,express-shipping"},
			{Name: "HEALTH_PATH", Value: "/healthz"},
		},
		Resources: res,
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/cart", ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
			{Name: "kube-api-access-x7k2q", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
		LivenessProbe: probe("/healthz"), ReadinessProbe: probe("/ready"),
		TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(10001)),
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
	sidecar := corev1.Container{
		Name: "proxy", Image: "registry.example.com/mesh/proxy:1.31.2", ImagePullPolicy: corev1.PullIfNotPresent,
		Args:  []string{"proxy", "sidecar", "--log-level=warning", "--concurrency=2"},
		Ports: []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
			{Name: "MESH_CLUSTER", Value: "prod-eu-1"}},
		Resources:              corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-x7k2q", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
		LivenessProbe:          &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15000)}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05x", rs, i), GenerateName: rs + "-", Namespace: ns,
			UID:             types.UID(fmt.Sprintf("8f3c2a1e-5b7d-4e9f-a0c1-%012x", i)),
			ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: now,
			Labels: map[string]string{"app.example.com/name": "cart", "app.example.com/part-of": "shop",
				"app.example.com/version": "v1.42.7", "pod-template-hash": rs[len("shop-cart-"):], "team": "checkout"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				"checksum/config":         "3f2a9c1d7e5b4a6f8c0d2e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b",
				"example.com/restartedAt": "2026-11-30T08:12:44Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: "2b1f0e9d-8c7b-4a6f-9e5d-4c3b2a1f0e9d", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(specFields)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(statusFields), Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cart-config"}, DefaultMode: ptr.To(int32(420))}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access-x7k2q", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr.To(int32(420)), Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
					}}}},
			},
			Containers:                    []corev1.Container{app, sidecar},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "cart", DeprecatedServiceAccount: "cart",
			NodeName:        node,
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To(int64(10001)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			SchedulerName:   corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
			},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "example.com/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.example.com/name": "cart"}}}}}}},
			Priority: ptr.To(int32(0)), EnableServiceLinks: ptr.To(true), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: fmt.Sprintf("192.168.%d.%d", i%100>>8, i%100&255),
			HostIPs: []corev1.HostIP{{IP: fmt.Sprintf("192.168.%d.%d", i%100>>8, i%100&255)}},
			PodIP:   ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		},
	}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for ci, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:9b2f6c0e4d8a1f3e5c7b9d1a3f5e7c9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c",
			ContainerID: fmt.Sprintf("containerd://%060x%04x", i, ci), Ready: true, Started: ptr.To(true), RestartCount: int32(i % 3),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
				StartedAt: now, FinishedAt: now, ContainerID: fmt.Sprintf("containerd://%060x%04x", i+1, ci)}},
			VolumeMounts: []corev1.VolumeMountStatus{{Name: "kube-api-access-x7k2q", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
				ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyDisabled)}},
		})
	}
	if o.Liveness {
		var probes []v1alpha1.ContainerLivenessProbe
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			probes = append(probes, v1alpha1.ContainerLivenessProbe{Name: c.Name, LivenessProbe: *c.LivenessProbe})
			c.LivenessProbe = nil // the webhook moves it to the annotation
		}
		raw, err := v1alpha1.FormatContainerProbeContext(probes)
		if err != nil {
			panic(err)
		}
		pod.Annotations[v1alpha1.AnnotationUsingEnhancedLiveness] = "true"
		pod.Annotations[v1alpha1.AnnotationContainerProbeContext] = raw
	}
	if o.Applied {
		pod.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = lastAppliedJSON
	}
	return pod
}

// The managed fields of a Deployment's pod as the API server records them (abridged from a
// real cluster's: the controller manager's spec and the kubelet's status).
const specFields = `{"f:metadata":{"f:annotations":{".":{},"f:checksum/config":{},"f:example.com/restartedAt":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:generateName":{},"f:labels":{".":{},"f:app.example.com/name":{},"f:app.example.com/part-of":{},"f:app.example.com/version":{},"f:pod-template-hash":{},"f:team":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"2b1f0e9d-8c7b-4a6f-9e5d-4c3b2a1f0e9d\"}":{}}},"f:spec":{"f:affinity":{".":{},"f:podAntiAffinity":{".":{},"f:preferredDuringSchedulingIgnoredDuringExecution":{}}},"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:args":{},"f:command":{},"f:env":{".":{},"k:{\"name\":\"CACHE_URL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"DB_HOST\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}}},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:initialDelaySeconds":{},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:securityContext":{".":{},"f:allowPrivilegeEscalation":{},"f:readOnlyRootFilesystem":{},"f:runAsNonRoot":{},"f:runAsUser":{}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/cart\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}}}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{".":{},"f:fsGroup":{}},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}},"k:{\"name\":\"tmp\"}":{".":{},"f:emptyDir":{},"f:name":{}}}}}`

const statusFields = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.64.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`

const lastAppliedJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"labels":{"app.example.com/name":"cart"},"name":"cart-debug","namespace":"shop"},"spec":{"containers":[{"args":["--config=/etc/cart/config.yaml","--listen=:8080"],"command":["/app/cart"],"env":[{"name":"DB_HOST","value":"cart-db.shop.svc.cluster.local"},{"name":"CACHE_URL","value":"redis://cart-cache.shop.svc.cluster.local:6379/0"}],"image":"registry.example.com/shop/cart:v1.42.7","livenessProbe":{"httpGet":{"path":"/healthz","port":"http"}},"name":"app","ports":[{"containerPort":8080,"name":"http"}],"resources":{"limits":{"memory":"512Mi"},"requests":{"cpu":"250m","memory":"256Mi"}}}]}}`
