{{/*
Values written for NVIDIA's charts, read the nimctl way.

NVIDIA's k8s-nim-operator and gpu-operator charts both use an `operator:` section,
each in its own shape; these helpers take whichever is given:
  log level   operator.log.level, or operator.logging.level when log.level is
              the default (warn -> warning, dpanic/panic/fatal -> error)
  log format  operator.log.format | operator.log.encoder
  pull policy operator.image.pullPolicy | operator.imagePullPolicy
  pull secrets operator.image.pullSecrets | operator.imagePullSecrets
An operator image naming NVIDIA's own operator (k8s-nim-operator, gpu-operator)
is not ours to run: the chart's own image is used and NOTES.txt says so.
*/}}

{{- define "nimctl.operatorImage" -}}
{{- $image := .Values.operator.image -}}
{{- if and (kindIs "map" $image) $image.repository (not (include "nimctl.nvidiaImage" $image.repository)) -}}
{{- $image.repository -}}|{{- default .Chart.AppVersion $image.tag -}}
{{- else -}}
nimctl|{{- .Chart.AppVersion -}}
{{- end -}}
{{- end -}}

{{/* "true" when a repository names one of NVIDIA's operator images. */}}
{{- define "nimctl.nvidiaImage" -}}
{{- if regexMatch "(^|/)(k8s-nim-operator|gpu-operator)$" . -}}true{{- end -}}
{{- end -}}

{{- define "nimctl.logLevel" -}}
{{- $log := .Values.operator.log | default dict -}}
{{- $logging := .Values.operator.logging | default dict -}}
{{- /* our default (info) gives way to gpu-operator's operator.logging.level */ -}}
{{- $level := $log.level | default "info" -}}
{{- if and (eq $level "info") $logging.level -}}{{- $level = $logging.level -}}{{- end -}}
{{- if eq $level "warn" -}}warning
{{- else if has $level (list "dpanic" "panic" "fatal") -}}error
{{- else -}}{{ $level }}
{{- end -}}
{{- end -}}

{{- define "nimctl.logFormat" -}}
{{- $log := .Values.operator.log | default dict -}}
{{- $log.format | default $log.encoder | default "json" -}}
{{- end -}}

{{- define "nimctl.pullPolicy" -}}
{{- $image := .Values.operator.image -}}
{{- if and (kindIs "map" $image) $image.pullPolicy -}}
{{- $image.pullPolicy -}}
{{- else -}}
{{- .Values.operator.imagePullPolicy | default "IfNotPresent" -}}
{{- end -}}
{{- end -}}

{{/* The image pull Secret names, one per line. */}}
{{- define "nimctl.pullSecrets" -}}
{{- $image := .Values.operator.image -}}
{{- $names := list -}}
{{- if kindIs "map" $image -}}{{- $names = concat $names ($image.pullSecrets | default list) -}}{{- end -}}
{{- $names = concat $names (.Values.operator.imagePullSecrets | default list) -}}
{{- range uniq $names }}
{{ . }}
{{- end -}}
{{- end -}}

{{/*
The keys of the values that have no meaning in nimctl (comma-separated), named in
NOTES.txt so that nothing is dropped silently.
*/}}
{{- define "nimctl.ignoredValues" -}}
{{- $v := .Values -}}
{{- $op := $v.operator -}}
{{- $ignored := list -}}
{{- $image := $op.image -}}
{{- if kindIs "string" $image -}}
{{- $ignored = append $ignored "operator.image (gpu-operator's image name; nimctl runs its own image)" -}}
{{- else if and (kindIs "map" $image) $image.repository (include "nimctl.nvidiaImage" $image.repository) -}}
{{- $ignored = append $ignored (printf "operator.image.repository/tag (%s is NVIDIA's operator; nimctl runs its own image)" $image.repository) -}}
{{- end -}}
{{- range $key := list "repository" "version" "cleanupCRD" -}}
{{- if hasKey $op $key -}}{{- $ignored = append $ignored (printf "operator.%s" $key) -}}{{- end -}}
{{- end -}}
{{- range $key := list "development" "stacktraceLevel" -}}
{{- if hasKey ($op.log | default dict) $key -}}{{- $ignored = append $ignored (printf "operator.log.%s" $key) -}}{{- end -}}
{{- end -}}
{{- range $key := list "develMode" "timeEncoding" -}}
{{- if hasKey ($op.logging | default dict) $key -}}{{- $ignored = append $ignored (printf "operator.logging.%s" $key) -}}{{- end -}}
{{- end -}}
{{- range $key := list "platform" "nfd" "dynamo" "gpuCluster" "draDriver" "node-feature-discovery" -}}
{{- if hasKey $v $key -}}{{- $ignored = append $ignored $key -}}{{- end -}}
{{- end -}}
{{- if not (and $v.clusterPolicy $v.clusterPolicy.deployCR) -}}
{{- range $key := include "nimctl.operandSections" . | splitList " " -}}
{{- if hasKey $v $key -}}{{- $ignored = append $ignored (printf "%s (clusterPolicy.deployCR is false)" $key) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- join ", " $ignored -}}
{{- end -}}

{{/* The ClusterPolicy spec sections NVIDIA's gpu-operator chart fills from its values. */}}
{{- define "nimctl.operandSections" -}}
hostPaths mig psa cdi sandboxWorkloads daemonsets validator driver toolkit devicePlugin dcgm dcgmExporter gfd migManager nodeStatusExporter gds gdrcopy vgpuManager vgpuDeviceManager vfioManager kataManager sandboxDevicePlugin kataSandboxDevicePlugin ccManager
{{- end -}}
