// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// OpenKruise-shaped objects that set every field of our types. Decoding strictly and encoding again
// must give the same JSON: that pins each JSON tag exactly (encoding/json matches keys
// case-insensitively on decode, so only the re-encode catches a tag like "ip" for "IP").
// PodProbeMarker status.conditions and the NodePodProbe probe's execFree are probeshim's own,
// additive to the OpenKruise schema.
var openKruiseJSON = map[string]struct {
	newObj func() runtime.Object
	json   string
}{
	"PodProbeMarker": {func() runtime.Object { return &PodProbeMarker{} }, `{
  "apiVersion": "apps.kruise.io/v1alpha1",
  "kind": "PodProbeMarker",
  "metadata": {"name": "game-server-probe", "namespace": "games", "creationTimestamp": "2026-01-02T03:04:05Z"},
  "spec": {
    "selector": {"matchLabels": {"app": "game-server"}},
    "probes": [{
      "name": "Idle",
      "containerName": "game-server",
      "probe": {"exec": {"command": ["bash", "/data/idle.sh"]}, "initialDelaySeconds": 10, "timeoutSeconds": 3,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
      "markerPolicy": [{"state": "Succeeded", "labels": {"gameserver-idle": "true"},
                        "annotations": {"controller.kubernetes.io/pod-deletion-cost": "-10"}}],
      "podConditionType": "game.kruise.io/idle"
    }, {
      "name": "grpc",
      "containerName": "game-server",
      "probe": {"grpc": {"port": 9090, "service": "game.Health"}},
      "podConditionType": "game.kruise.io/grpc"
    }]
  },
  "status": {"observedGeneration": 3, "matchedPods": 5,
    "conditions": [{"type": "NodeBudget", "status": "False", "observedGeneration": 3,
      "lastTransitionTime": "2026-11-29T10:00:00Z", "reason": "NodeBudgetExceeded", "message": "probes left out on 1 node(s)"}]}
}`},
	"NodePodProbe": {func() runtime.Object { return &NodePodProbe{} }, `{
  "apiVersion": "apps.kruise.io/v1alpha1",
  "kind": "NodePodProbe",
  "metadata": {"name": "node-1", "creationTimestamp": "2026-01-02T03:04:05Z"},
  "spec": {
    "podProbes": [{
      "name": "game-server-0", "namespace": "games", "uid": "0b8a5e8c-0000-0000-0000-000000000001", "IP": "10.244.1.7",
      "probes": [{
        "name": "game-server-probe#Idle",
        "containerName": "game-server",
        "probe": {"httpGet": {"path": "/idle", "port": 8080, "scheme": "HTTP",
                              "httpHeaders": [{"name": "Host", "value": "localhost"}]}, "timeoutSeconds": 1}
      }, {
        "name": "game-server-probe#state",
        "containerName": "game-server",
        "probe": {"exec": {"command": ["cat", "/tmp/state"]}, "timeoutSeconds": 1},
        "execFree": true
      }]
    }]
  },
  "status": {
    "podProbeStatuses": [{
      "name": "game-server-0", "namespace": "games", "uid": "0b8a5e8c-0000-0000-0000-000000000001",
      "probeStates": [{"name": "game-server-probe#Idle", "state": "Succeeded",
                       "lastProbeTime": "2026-01-02T03:05:00Z", "lastTransitionTime": "2026-01-02T03:04:30Z",
                       "message": "idle"}]
    }]
  }
}`},
	"ContainerRecreateRequest": {func() runtime.Object { return &ContainerRecreateRequest{} }, `{
  "apiVersion": "apps.kruise.io/v1alpha1",
  "kind": "ContainerRecreateRequest",
  "metadata": {"name": "web-0-restart", "namespace": "shop", "creationTimestamp": "2026-01-02T03:04:05Z",
               "labels": {"crr.apps.kruise.io/pod-uid": "u1", "crr.apps.kruise.io/node-name": "node-1", "crr.apps.kruise.io/active": "true"}},
  "spec": {
    "podName": "web-0",
    "containers": [{
      "name": "web",
      "preStop": {"exec": {"command": ["/bin/drain"]}, "httpGet": {"path": "/drain", "port": "http"}, "tcpSocket": {"port": 80}},
      "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
      "statusContext": {"containerID": "containerd://4f1c2a", "restartCount": 2}
    }],
    "strategy": {"failurePolicy": "Ignore", "orderedRecreate": true, "forceRecreate": true,
                 "terminationGracePeriodSeconds": 30, "unreadyGracePeriodSeconds": 5, "minStartedSeconds": 10},
    "activeDeadlineSeconds": 300,
    "ttlSecondsAfterFinished": 600
  },
  "status": {
    "phase": "Completed",
    "completionTime": "2026-01-02T03:06:00Z",
    "message": "all containers recreated",
    "containerRecreateStates": [{"name": "web", "phase": "Succeeded", "message": "restarted", "isKilled": true}]
  }
}`},
}

func TestOpenKruiseJSONRoundTrip(t *testing.T) {
	for kind, tc := range openKruiseJSON {
		t.Run(kind, func(t *testing.T) {
			obj := tc.newObj()
			dec := json.NewDecoder(bytes.NewReader([]byte(tc.json)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(obj); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			out, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal([]byte(tc.json), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("re-encoded JSON differs from the OpenKruise shape\n got: %s\nwant: %s", out, tc.json)
			}
		})
	}
}

// Every field of every type in this package must appear in the fixtures above, so a new field
// cannot slip in without its JSON tag being pinned.
func TestOpenKruiseJSONCoversEveryField(t *testing.T) {
	all, set := map[string]bool{}, map[string]bool{}
	pkg := reflect.TypeOf(PodProbeMarker{}).PkgPath()
	for _, tc := range openKruiseJSON {
		obj := tc.newObj()
		if err := json.Unmarshal([]byte(tc.json), obj); err != nil {
			t.Fatal(err)
		}
		walkFields(reflect.ValueOf(obj).Elem(), pkg, all, set)
	}
	for f := range all {
		if !set[f] {
			t.Errorf("field %s is not set by any OpenKruise JSON fixture", f)
		}
	}
}

// walkFields records in all every field of this package's structs reachable from v, and in set
// those holding a non-zero value somewhere.
func walkFields(v reflect.Value, pkg string, all, set map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkFields(v.Elem(), pkg, all, set)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walkFields(v.Index(i), pkg, all, set)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != pkg {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			name := v.Type().Name() + "." + f.Name
			all[name] = true
			if !v.Field(i).IsZero() {
				set[name] = true
			}
			walkFields(v.Field(i), pkg, all, set)
		}
	}
}

// DeepCopy must copy everything and share nothing.
func TestDeepCopy(t *testing.T) {
	for kind, tc := range openKruiseJSON {
		t.Run(kind, func(t *testing.T) {
			obj := tc.newObj()
			if err := json.Unmarshal([]byte(tc.json), obj); err != nil {
				t.Fatal(err)
			}
			cp := obj.DeepCopyObject()
			if !equality.Semantic.DeepEqual(obj, cp) {
				t.Fatal("copy differs from the original")
			}
			before, _ := json.Marshal(obj)
			mutate(cp)
			after, _ := json.Marshal(obj)
			if !bytes.Equal(before, after) {
				t.Errorf("changing the copy changed the original:\n%s\n%s", before, after)
			}
		})
	}
}

// mutate changes nested values in place (not by replacing the top-level field), which is what
// would leak into the original if DeepCopy shared memory.
func mutate(obj runtime.Object) {
	switch o := obj.(type) {
	case *PodProbeMarker:
		o.Spec.Selector.MatchLabels["app"] = "changed"
		o.Spec.Probes[0].Probe.Exec.Command[0] = "changed"
		o.Spec.Probes[0].MarkerPolicy[0].Labels["gameserver-idle"] = "changed"
	case *NodePodProbe:
		o.Spec.PodProbes[0].Probes[0].Probe.HTTPGet.HTTPHeaders[0].Value = "changed"
		o.Status.PodProbeStatuses[0].ProbeStates[0].State = ProbeFailed
	case *ContainerRecreateRequest:
		o.Labels["crr.apps.kruise.io/active"] = "changed"
		o.Spec.Containers[0].PreStop.Exec.Command[0] = "changed"
		*o.Spec.Strategy.TerminationGracePeriodSeconds = 1
		o.Status.ContainerRecreateStates[0].IsKilled = false
	}
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{
		"PodProbeMarker", "PodProbeMarkerList", "NodePodProbe", "NodePodProbeList",
		"ContainerRecreateRequest", "ContainerRecreateRequestList",
	} {
		if !s.Recognizes(SchemeGroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not know %s", kind)
		}
	}
	if got := Resource("nodepodprobes").String(); got != "nodepodprobes.apps.kruise.io" {
		t.Errorf("Resource() = %s", got)
	}
}
