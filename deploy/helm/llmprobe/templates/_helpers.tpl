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

{{- define "llmprobe.labels" -}}
helm.sh/chart: {{ include "llmprobe.chart" . }}
{{ include "llmprobe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: llmprobe
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

{{- define "llmprobe.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
