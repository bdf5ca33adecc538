{{/*
Chart name, or nameOverride.
*/}}
{{- define "llmprobe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name, suffixed with the chart name
unless the release name already contains it.
*/}}
{{- define "llmprobe.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "llmprobe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: they select the pods, so they never change.
*/}}
{{- define "llmprobe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmprobe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object (and of the pods): the chart's, then commonLabels.
*/}}
{{- define "llmprobe.labels" -}}
helm.sh/chart: {{ include "llmprobe.chart" . }}
{{ include "llmprobe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: llmprobe
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount the pods run as.
*/}}
{{- define "llmprobe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "llmprobe.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The ConfigMap holding llmprobe.yml: config.existingConfigMap, or the one
the chart renders from config.
*/}}
{{- define "llmprobe.configMapName" -}}
{{- default (include "llmprobe.fullname" .) .Values.config.existingConfigMap }}
{{- end }}

{{/*
The Secret mounted at /run/secrets/llmprobe, or "" when none is.
*/}}
{{- define "llmprobe.secretName" -}}
{{- if .Values.credentials.existingSecret }}
{{- .Values.credentials.existingSecret }}
{{- else if .Values.credentials.create }}
{{- include "llmprobe.fullname" . }}-credentials
{{- end }}
{{- end }}

{{/*
The image: repository@digest when image.digest is set, else
repository:tag (the appVersion by default).
*/}}
{{- define "llmprobe.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
An httpGet probe of path on the metrics port: scheme and httpHeaders, then
the timing fields, from a livenessProbe or readinessProbe value.
*/}}
{{- define "llmprobe.probe" -}}
{{- $p := .probe -}}
httpGet:
  path: {{ .path }}
  port: http-metrics
  scheme: {{ $p.scheme }}
  {{- with $p.httpHeaders }}
  httpHeaders:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- range $k := list "initialDelaySeconds" "periodSeconds" "timeoutSeconds" "successThreshold" "failureThreshold" }}
{{- if hasKey $p $k }}
{{ $k }}: {{ index $p $k }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The install notes (NOTES.txt), a named template so that the tests can
render them with `helm template`.
*/}}
{{- define "llmprobe.notes" -}}
{{- $fullname := include "llmprobe.fullname" . }}
{{- $scheme := lower .Values.readinessProbe.scheme -}}
IMAGE: this release runs
  {{ include "llmprobe.image" . }}
The release of each version tag vX.Y.Z publishes ghcr.io/llmprobe/llmprobe:X.Y.Z
and this chart at version X.Y.Z, whose default image it is. A chart from an
untagged commit, or a private registry, needs an image you build from the
repository (deploy/docker/Dockerfile, or `make release-snapshot`'s OCI layout),
push, and set as image.repository and image.tag (or image.digest). Until the
image exists the pods stay in ImagePullBackOff:
  docker build -f deploy/docker/Dockerfile -t REGISTRY/llmprobe:TAG . && docker push REGISTRY/llmprobe:TAG
  helm upgrade {{ .Release.Name }} deploy/helm/llmprobe -n {{ .Release.Namespace }} --reuse-values --set image.repository=REGISTRY/llmprobe --set image.tag=TAG
{{ if .Values.config.existingConfigMap }}
llmprobe reads its configuration from ConfigMap {{ .Values.config.existingConfigMap }} (key llmprobe.yml), from
{{- else }}
llmprobe is probing {{ len .Values.config.targets }} target(s) from
{{- end }} {{ .Values.replicaCount }} pod(s); each pod sends 1/{{ .Values.replicaCount }} of every target's rate (--probe.replicas={{ .Values.replicaCount }}).

Status page and metrics:

  kubectl -n {{ .Release.Namespace }} rollout status deployment/{{ $fullname }}
  kubectl -n {{ .Release.Namespace }} port-forward svc/{{ $fullname }} {{ .Values.service.port }}:{{ .Values.service.port }}
  open {{ $scheme }}://localhost:{{ .Values.service.port }}/          # requested vs achieved rate, harness health, recent requests
  curl -s{{ if eq $scheme "https" }}k{{ end }} {{ $scheme }}://localhost:{{ .Values.service.port }}/metrics | grep llmprobe_requests_total

Check llmprobe_harness_saturated (0 = the numbers can be trusted) and
llmprobe_config_last_reload_successful. Configuration changes (config:) roll
the pods out with `helm upgrade`.
{{- if and .Values.credentials.existingSecret .Values.credentials.optional }}

Credentials: Secret {{ .Values.credentials.existingSecret }} is mounted at /run/secrets/llmprobe if it exists (optional).
llmprobe refuses a configuration whose credentials_file does not exist: create it first.
  kubectl -n {{ .Release.Namespace }} create secret generic {{ .Values.credentials.existingSecret }} --from-file=api-key=./api-key.txt
{{- end }}
{{- if not .Values.serviceMonitor.enabled }}

No ServiceMonitor was created: scrape the Service's http-metrics port under
job="llmprobe" with native histograms (docs/dashboards.md), or set
serviceMonitor.enabled=true.
{{- end }}
{{- if .Values.prometheusRule.enabled }}

PrometheusRule {{ $fullname }} (namespace {{ default .Release.Namespace .Values.prometheusRule.namespace }}) holds the recording and alerting rules.
{{- end }}
{{- if .Values.networkPolicy.enabled }}

NetworkPolicy {{ $fullname }} restricts who may reach port http-metrics{{ if .Values.networkPolicy.egress.enabled }} and where the pods may connect (egress.rules must allow the targets){{ end }}.
{{- end }}
{{- end }}
