// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package deploy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// TestFlowSchemaMatchesNodeServices installs the manifests on a real API server (priority and
// fairness on, as by default) and makes requests as each node identity: the node services'
// NodePodProbe and ContainerRecreateRequest traffic, under the kubelet's identity or the
// dedicated one, is classified by the probeshim-nodes FlowSchema into its own priority level
// (the response headers of priority and fairness say which); the kubelet's own pod reads and
// anyone else's requests are not.
func TestFlowSchemaMatchesNodeServices(t *testing.T) {
	c, cfg := applied(t)
	if t.Failed() {
		return // the manifests did not apply: nothing below would mean anything
	}
	ctx := context.Background()
	fs := &flowcontrolv1.FlowSchema{}
	pl := &flowcontrolv1.PriorityLevelConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "probeshim-nodes"}, fs); err != nil {
		t.Fatalf("the FlowSchema: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "probeshim-nodes"}, pl); err != nil {
		t.Fatalf("the PriorityLevelConfiguration: %v", err)
	}

	type who struct {
		user   string
		groups []string
	}
	kubelet := who{"system:node:node-a", []string{"system:nodes", "system:authenticated"}}
	dedicated := who{"probeshim:node:node-a", []string{"probeshim:nodes", "system:authenticated"}}
	someone := who{"alice", []string{"system:authenticated"}}
	const npps = "/apis/apps.kruise.io/v1alpha1/nodepodprobes"
	cases := []struct {
		who    who
		path   string
		ours   bool
		reason string
	}{
		{kubelet, npps + "/node-a", true, "the node service on the kubelet's identity reads its NodePodProbe"},
		{kubelet, "/apis/apps.kruise.io/v1alpha1/namespaces/default/containerrecreaterequests", true, "... lists ContainerRecreateRequests"},
		{dedicated, npps + "/node-a", true, "the dedicated identity reads its NodePodProbe"},
		{dedicated, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a", true, "the dedicated identity lists its node's pods"},
		{kubelet, "/api/v1/namespaces/default/pods", false, "the kubelet's own pod reads stay on the kubelets' level"},
		{kubelet, "/api/v1/nodes/node-a", false, "the kubelet's Node stays on node-high"},
		{someone, npps, false, "anyone else"},
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The API server takes up new FlowSchemas from its own informer: wait until the first case is
	// classified as ours, then check them all.
	classify := func(w who, path string) (fsUID, plUID string, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		if err != nil {
			return "", "", err
		}
		req.Header.Set("Impersonate-User", w.user)
		for _, g := range w.groups {
			req.Header.Add("Impersonate-Group", g)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", err
		}
		_ = resp.Body.Close()
		return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"), nil
	}
	err = poll.Until(context.Background(), 30*time.Second, "requests classified by probeshim-nodes "+string(fs.UID), func(context.Context) (bool, string, error) {
		got, _, err := classify(cases[0].who, cases[0].path)
		return err == nil && got == string(fs.UID), fmt.Sprintf("a request as %s classified by FlowSchema UID %q (%v)", cases[0].who.user, got, err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		gotFS, gotPL, err := classify(tc.who, tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.reason, err)
		}
		if gotFS == "" {
			t.Errorf("%s: no priority and fairness headers in the response", tc.reason)
			continue
		}
		if ours := gotFS == string(fs.UID) && gotPL == string(pl.UID); ours != tc.ours {
			t.Errorf("%s (GET %s as %s): FlowSchema %s, priority level %s; probeshim-nodes is %s/%s, want ours=%v",
				tc.reason, tc.path, tc.who.user, gotFS, gotPL, fs.UID, pl.UID, tc.ours)
		}
	}
	t.Logf("FlowSchema probeshim-nodes classified %d kinds of request as intended", len(cases))
}
