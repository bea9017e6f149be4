{{/* Labels of every object: those of cluster/deploy (kustomization.yaml) plus Helm's. */}}
{{- define "probeshim.labels" -}}
app.kubernetes.io/name: probeshim
app.kubernetes.io/part-of: probeshim
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "probeshim.imageTag" . | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Deployment's pods. */}}
{{- define "probeshim.selector" -}}
app.kubernetes.io/name: probeshim
app.kubernetes.io/component: cluster
{{- end -}}

{{/* The deployment's own username: the only one the admission policies let write NodePodProbe specs
and the pods' records. */}}
{{- define "probeshim.clusterUsername" -}}
system:serviceaccount:{{ .Release.Namespace }}:probeshim-cluster
{{- end -}}

{{/* The image tag of appVersion, as make image tags it: "+" (SemVer's build metadata, which
OCI tags and label values do not allow) becomes "_" (charts/package.go). */}}
{{- define "probeshim.imageTag" -}}
{{ .Chart.AppVersion | replace "+" "_" }}
{{- end -}}

{{- define "probeshim.image" -}}
{{- $tag := .Values.image.tag | default (include "probeshim.imageTag" .) -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}{{ if .Values.image.tag }}:{{ .Values.image.tag }}{{ end }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The groups the node services' RBAC is granted to. */}}
{{- define "probeshim.nodeSubjects" -}}
{{- if .Values.nodeIdentity.kubelet }}
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes
{{- end }}
{{- if .Values.nodeIdentity.dedicated.enabled }}
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: {{ .Values.nodeIdentity.dedicated.group }}
{{- end }}
{{- end -}}

{{- define "probeshim.validate" -}}
{{- if not (or .Values.nodeIdentity.kubelet .Values.nodeIdentity.dedicated.enabled) -}}
{{- fail "nodeIdentity: enable kubelet, dedicated or both: the node services need one" -}}
{{- end -}}
{{- if and .Values.nodeIdentity.dedicated.enabled (not (and .Values.nodeIdentity.dedicated.group .Values.nodeIdentity.dedicated.userPrefix)) -}}
{{- fail "nodeIdentity.dedicated: group and userPrefix must both be set" -}}
{{- end -}}
{{- if and .Values.image.digest (not (hasPrefix "sha256:" .Values.image.digest)) -}}
{{- fail "image.digest: want sha256:<hex>" -}}
{{- end -}}
{{- end -}}

{{/* The CA bundle the deployment keeps in its Secret (cluster/certs), rendered into the webhook
configurations and the conversion webhook when the Secret exists (a `helm upgrade`): a webhook an
upgrade adds would otherwise reach the API server with no bundle, and admission through it would be
refused ("x509: certificate signed by unknown authority") until a replica patched it in. Empty when
rendered without a cluster (helm template, Argo CD: nothing to drift from) and with cert-manager,
whose cainjector owns the bundle. */}}
{{- define "probeshim.caBundle" -}}
{{- if not .Values.certManager.enabled -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace "probeshim-webhook-certs" -}}
{{- if $secret -}}
{{- index ($secret.data | default dict) "ca.crt" | default "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
