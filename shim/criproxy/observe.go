// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"context"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const runtimeService = "runtime.v1.RuntimeService"

// methodInfo is what the proxy does beyond forwarding, per method.
type methodInfo struct {
	service, method string
	// logInfo: one Info line per call (what a person debugging a node wants
	// to see the kubelet do); every other call is logged at Debug.
	logInfo bool
	// decodeRequest, decodeResponse: a copy of the first message is decoded
	// for the log and the Observer.
	decodeRequest, decodeResponse bool
	// eventStream: a stream the kubelet holds open for as long as it runs.
	eventStream bool
}

// special lists the RuntimeService methods the proxy looks into; the rest
// (and every other service) are only forwarded, counted and timed.
var special = map[string]methodInfo{
	"RunPodSandbox":      {decodeRequest: true, decodeResponse: true, logInfo: true},
	"StopPodSandbox":     {decodeRequest: true, logInfo: true},
	"RemovePodSandbox":   {decodeRequest: true, logInfo: true},
	"CreateContainer":    {decodeRequest: true, decodeResponse: true, logInfo: true},
	"StartContainer":     {decodeRequest: true, logInfo: true},
	"StopContainer":      {decodeRequest: true, logInfo: true},
	"RemoveContainer":    {decodeRequest: true, logInfo: true},
	"ExecSync":           {decodeRequest: true, decodeResponse: true, logInfo: true},
	"Exec":               {decodeRequest: true, logInfo: true},
	"GetContainerEvents": {eventStream: true},
}

func lookupMethod(full string) methodInfo {
	service, method := splitMethod(full)
	var info methodInfo
	if service == runtimeService {
		info = special[method]
	}
	info.service, info.method = service, method
	return info
}

// observed is what the proxy learned from a call's messages. The request
// is set by the goroutine that forwards it, hence the lock.
type observed struct {
	info methodInfo

	mu  sync.Mutex
	id  string // container or sandbox ID the call is about
	log logrus.Fields
	// cmdLine is an exec's whole command line, logged only at Debug: its
	// arguments may hold what the pod's author keeps out of the node's
	// journal (a password on a command line, a token in a URL).
	cmdLine string
	respID  string // ID the runtime answered with (RunPodSandbox, CreateContainer)
}

// maxCmdLog bounds the command line of an exec in the log.
const maxCmdLog = 200

// capCmd joins and bounds a command line, or one word of it, for the log.
func capCmd(c []string) string {
	s := strings.Join(c, " ")
	if len(s) > maxCmdLog {
		s = s[:maxCmdLog] + "..."
	}
	return s
}

// setRequest decodes a copy of the request (b is never changed) and names
// the pod it is about, looked up now: after a removal nobody knows it.
func (o *observed) setRequest(b []byte, pods func(string) (Pod, bool)) {
	f := logrus.Fields{}
	var id, cmdLine string
	// An exec's program is logged; its arguments only at Debug (cmdLine).
	cmd := func(c []string) {
		if len(c) > 0 {
			f["cmd"] = capCmd(c[:1])
		}
		cmdLine = capCmd(c)
	}
	switch o.info.method {
	case "RunPodSandbox":
		var r criapi.RunPodSandboxRequest
		if proto.Unmarshal(b, &r) == nil {
			m := r.GetConfig().GetMetadata()
			f["namespace"], f["pod"], f["pod_uid"] = m.GetNamespace(), m.GetName(), m.GetUid()
		}
	case "CreateContainer":
		var r criapi.CreateContainerRequest
		if proto.Unmarshal(b, &r) == nil {
			m := r.GetSandboxConfig().GetMetadata()
			f["namespace"], f["pod"], f["pod_uid"] = m.GetNamespace(), m.GetName(), m.GetUid()
			f["container"], f["sandbox_id"] = r.GetConfig().GetMetadata().GetName(), r.GetPodSandboxId()
		}
	case "StopPodSandbox":
		var r criapi.StopPodSandboxRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetPodSandboxId()
		}
	case "RemovePodSandbox":
		var r criapi.RemovePodSandboxRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetPodSandboxId()
		}
	case "StartContainer":
		var r criapi.StartContainerRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetContainerId()
		}
	case "StopContainer":
		var r criapi.StopContainerRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetContainerId()
			f["timeout"] = r.GetTimeout()
		}
	case "RemoveContainer":
		var r criapi.RemoveContainerRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetContainerId()
		}
	case "ExecSync":
		var r criapi.ExecSyncRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetContainerId()
			cmd(r.GetCmd())
			f["timeout"] = r.GetTimeout()
		}
	case "Exec":
		var r criapi.ExecRequest
		if proto.Unmarshal(b, &r) == nil {
			id = r.GetContainerId()
			cmd(r.GetCmd())
			f["tty"] = r.GetTty()
		}
	}
	if id != "" {
		if o.info.method == "StopPodSandbox" || o.info.method == "RemovePodSandbox" {
			f["sandbox_id"] = id
		} else {
			f["container_id"] = id
		}
		if pods != nil {
			if p, ok := pods(id); ok {
				f["namespace"], f["pod"], f["pod_uid"] = p.Namespace, p.Name, p.UID
				if p.Container != "" {
					f["container"] = p.Container
				}
			}
		}
	}
	o.mu.Lock()
	o.id, o.log, o.cmdLine = id, f, cmdLine
	o.mu.Unlock()
}

// setResponse decodes a copy of the first response message.
func (o *observed) setResponse(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.log == nil {
		o.log = logrus.Fields{}
	}
	switch o.info.method {
	case "RunPodSandbox":
		var r criapi.RunPodSandboxResponse
		if proto.Unmarshal(b, &r) == nil {
			o.respID = r.GetPodSandboxId()
			o.log["sandbox_id"] = o.respID
		}
	case "CreateContainer":
		var r criapi.CreateContainerResponse
		if proto.Unmarshal(b, &r) == nil {
			o.respID = r.GetContainerId()
			o.log["container_id"] = o.respID
		}
	case "ExecSync":
		var r criapi.ExecSyncResponse
		if proto.Unmarshal(b, &r) == nil {
			o.log["exit_code"] = r.GetExitCode()
		}
	}
}

// fields returns a copy of the log fields gathered so far.
// fields are the call's log fields; the command line of an exec only with
// debug.
func (o *observed) fields(debug bool) logrus.Fields {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := make(logrus.Fields, len(o.log)+5)
	for k, v := range o.log {
		f[k] = v
	}
	if debug && o.cmdLine != "" {
		f["cmd_line"] = o.cmdLine
	}
	return f
}

type kind int

const (
	created kind = iota
	started
	stopped
	removed
)

func (k kind) apply(ctx context.Context, o Observer, id string) {
	switch k {
	case created:
		o.Created(ctx, id)
	case started:
		o.Started(ctx, id)
	case stopped:
		o.Stopped(ctx, id)
	case removed:
		o.Removed(ctx, id)
	}
}

type observation struct {
	kind kind
	id   string
}

// observation is what a successful call tells the Observer, if anything.
func (o *observed) observation() (observation, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ob observation
	switch o.info.method {
	case "RunPodSandbox":
		ob = observation{started, o.respID}
	case "CreateContainer":
		ob = observation{created, o.respID}
	case "StartContainer":
		ob = observation{started, o.id}
	case "StopContainer", "StopPodSandbox":
		ob = observation{stopped, o.id}
	case "RemoveContainer", "RemovePodSandbox":
		ob = observation{removed, o.id}
	default:
		return observation{}, false
	}
	return ob, ob.id != ""
}
