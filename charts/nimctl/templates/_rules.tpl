{{/*
The operator's permissions, one list per controller group. The ClusterRole
(clusterrole.yaml) merges the lists of the enabled groups into one rule per
API group + resource (+ resourceNames), so every rule can be tested on its own.
Each entry: group, resources, verbs, optional names (resourceNames) and
optional api ("group/version/Kind": granted only when the cluster serves it, or
always with rbac.optionalAPIs=all).

tests/integration/chart checks these lists against what the controllers watch
and write (their owned kinds) and against the audit log of a full run: nothing
used is missing, nothing granted goes unused (exceptions are marked
"exception:" and documented in docs/install.md).
*/}}

{{- define "nimctl.rules.nim" -}}
# NIMService and NIMCache: reconciled (cache), finalizers and status patched.
- group: apps.nvidia.com
  resources: [nimservices, nimcaches]
  verbs: [list, watch, patch]
- group: apps.nvidia.com
  resources: [nimservices/status, nimcaches/status]
  verbs: [patch]
# exception: only used on clusters with the OwnerReferencesPermissionEnforcement
# admission plugin (OpenShift): owner references that block deletion.
- group: apps.nvidia.com
  resources: [nimservices/finalizers, nimcaches/finalizers]
  verbs: [update]
# Objects the NIMService and NIMCache controllers create, update and prune.
- group: apps
  resources: [deployments]
  verbs: [list, watch, create, update, delete]
- group: ""
  resources: [services, serviceaccounts]
  verbs: [list, watch, create, update, delete]
- group: ""
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, create, update, delete]
- group: ""
  resources: [pods]
  verbs: [list, watch, create, delete]
- group: ""
  resources: [pods/log]
  verbs: [get]
- group: batch
  resources: [jobs]
  verbs: [list, watch, create, update, delete]
- group: autoscaling
  resources: [horizontalpodautoscalers]
  verbs: [list, watch, create, update, delete]
- group: networking.k8s.io
  resources: [ingresses]
  verbs: [list, watch, create, update, delete]
- group: rbac.authorization.k8s.io
  resources: [roles, rolebindings]
  verbs: [list, watch, create, update, delete]
# The Roles above grant the NIM pods' ServiceAccounts the use of these OpenShift
# SecurityContextConstraints; Kubernetes lets us write such a Role only if we
# hold the permission ourselves (no escalate verb needed).
- group: security.openshift.io
  resources: [securitycontextconstraints]
  names: [nonroot, anyuid, hostmount-anyuid]
  verbs: [use]
# Facts the controllers read: GPU nodes, NIMCache profile ConfigMaps.
- group: ""
  resources: [nodes]
  verbs: [list, watch]
- group: ""
  resources: [configmaps]
  verbs: [get, list, watch]
- group: ""
  resources: [events]
  verbs: [create, patch]
# Optional APIs, only when served.
- group: gateway.networking.k8s.io
  resources: [httproutes]
  verbs: [list, watch, create, update, delete]
  api: gateway.networking.k8s.io/v1/HTTPRoute
- group: gateway.networking.k8s.io
  resources: [grpcroutes]
  verbs: [list, watch, create, update, delete]
  api: gateway.networking.k8s.io/v1/GRPCRoute
- group: leaderworkerset.x-k8s.io
  resources: [leaderworkersets]
  verbs: [list, watch, create, update, delete]
  api: leaderworkerset.x-k8s.io/v1/LeaderWorkerSet
- group: monitoring.coreos.com
  resources: [servicemonitors]
  verbs: [list, watch, create, update, delete]
  api: monitoring.coreos.com/v1/ServiceMonitor
- group: serving.kserve.io
  resources: [inferenceservices]
  verbs: [list, watch, create, update, delete]
  api: serving.kserve.io/v1beta1/InferenceService
{{- end -}}

{{- define "nimctl.rules.nemo" -}}
[]
{{- end -}}

{{- define "nimctl.rules.gpu" -}}
[]
{{- end -}}

{{/* Leader election, in the release namespace only (role.yaml). */}}
{{- define "nimctl.rules.leaderElection" -}}
- group: coordination.k8s.io
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}
