{{/* Names, labels and shared values of the nimctl chart. */}}

{{- define "nimctl.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nimctl.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nimctl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nimctl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end -}}

{{- define "nimctl.labels" -}}
{{ include "nimctl.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nimctl
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "nimctl.serviceAccountName" -}}
{{- default (include "nimctl.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "nimctl.image" -}}
{{- $image := include "nimctl.operatorImage" . | splitList "|" -}}
{{- printf "%s:%s" (index $image 0) (index $image 1) -}}
{{- end -}}

{{- define "nimctl.webhookServiceName" -}}
{{- printf "%s-webhook-service" (include "nimctl.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nimctl.webhookSecretName" -}}
{{- if eq (include "nimctl.tlsMode" .) "secret" -}}
{{- required "operator.admissionController.tls.secret.name is required with tls.mode=secret" .Values.operator.admissionController.tls.secret.name -}}
{{- else -}}
{{- printf "%s-webhook-server-cert" (include "nimctl.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The certificate mode in effect: auto resolves to cert-manager or generated. */}}
{{- define "nimctl.tlsMode" -}}
{{- $mode := .Values.operator.admissionController.tls.mode -}}
{{- if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}cert-manager{{- else -}}generated{{- end -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end -}}

{{/* Whether the webhooks are served: only when some group with webhooks is on. */}}
{{- define "nimctl.webhooksEnabled" -}}
{{- if and .Values.operator.admissionController.enabled .Values.nim.enabled -}}true{{- end -}}
{{- end -}}
