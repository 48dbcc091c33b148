{{/*
The operator's permissions, one list per controller group. The ClusterRole
(clusterrole.yaml) merges the lists of the enabled groups into one rule per
API group + resource (+ resourceNames), so every rule can be tested on its own.
Each entry: group, resources, verbs, optional names (resourceNames) and
optional api ("group/version/Kind": an optional API, granted always with the
default rbac.optionalAPIs=all, only when served at install time with detect).

tests/integration/chart checks these lists against what the controllers watch
and write (their owned kinds) and against the audit log of a full run: nothing
used is missing, nothing granted goes unused (exceptions are marked
"exception:" and documented in docs/install.md).
*/}}

{{- define "nimctl.rules.operator" -}}
# The /metrics endpoint authenticates and authorizes its callers by asking the
# API server (TokenReview, SubjectAccessReview), as controller-runtime's filter.
- group: authentication.k8s.io
  resources: [tokenreviews]
  verbs: [create]
- group: authorization.k8s.io
  resources: [subjectaccessreviews]
  verbs: [create]
# Events about the custom resources (every controller records them).
- group: ""
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "nimctl.rules.nim" -}}
# NIMService, NIMCache, NIMPipeline, NIMBuild: reconciled from the cache, status
# patched; NIMCache, NIMPipeline and NIMBuild carry a finalizer.
- group: apps.nvidia.com
  resources: [nimservices]
  verbs: [list, watch]
- group: apps.nvidia.com
  resources: [nimcaches, nimpipelines, nimbuilds]
  verbs: [list, watch, patch]
# NIMBuild reads its NIMCache from the API server before adding the built profile.
- group: apps.nvidia.com
  resources: [nimcaches]
  verbs: [get]
- group: apps.nvidia.com
  resources: [nimservices/status, nimcaches/status, nimpipelines/status, nimbuilds/status]
  verbs: [patch]
# exception: only clusters with the OwnerReferencesPermissionEnforcement
# admission plugin (OpenShift) check it, for the owner references we set.
- group: apps.nvidia.com
  resources: [nimservices/finalizers, nimcaches/finalizers, nimpipelines/finalizers, nimbuilds/finalizers]
  verbs: [update]
# Owned objects: created, updated when their render changes, pruned; read from
# the API server only when a write raced the cache.
- group: apps.nvidia.com
  resources: [nimservices]
  verbs: [get, create, update, delete]
- group: apps
  resources: [deployments]
  verbs: [get, list, watch, create, update, delete]
- group: ""
  resources: [services, serviceaccounts, persistentvolumeclaims]
  verbs: [get, list, watch, create, update, delete]
- group: ""
  resources: [pods]
  verbs: [get, list, watch, create, delete]
# Warning Events about the NIM's pods (FailedMount, a pull secret that cannot be
# read): cached (type=Warning only) to name what blocks a NIMService or NIMCache.
- group: ""
  resources: [events]
  verbs: [list, watch]
- group: ""
  resources: [pods/log]
  verbs: [get]
- group: ""
  resources: [configmaps, secrets]
  verbs: [get, list, watch, create, update, delete]
# NIMBuild adds the built engine's local manifest to its NIMCache's manifest ConfigMap.
- group: ""
  resources: [configmaps]
  verbs: [patch]
- group: batch
  resources: [jobs]
  verbs: [get, list, watch, create, update, delete]
- group: autoscaling
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch, create, update, delete]
- group: networking.k8s.io
  resources: [ingresses]
  verbs: [get, list, watch, create, update, delete]
- group: rbac.authorization.k8s.io
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, update, delete]
# The NIM pods' Roles grant the use of these OpenShift SecurityContextConstraints;
# Kubernetes lets us write such a Role only if we hold the permission ourselves.
- group: security.openshift.io
  resources: [securitycontextconstraints]
  names: [nonroot, anyuid, hostmount-anyuid]
  verbs: [use]
# Optional APIs appear while the operator runs: it watches the CRDs, then the
# new kinds (rbac.optionalAPIs=detect grants only those served at install).
- group: apiextensions.k8s.io
  resources: [customresourcedefinitions]
  verbs: [list, watch]
- group: gateway.networking.k8s.io
  resources: [httproutes]
  verbs: [get, list, watch, create, update, delete]
  api: gateway.networking.k8s.io/v1/HTTPRoute
- group: gateway.networking.k8s.io
  resources: [grpcroutes]
  verbs: [get, list, watch, create, update, delete]
  api: gateway.networking.k8s.io/v1/GRPCRoute
- group: leaderworkerset.x-k8s.io
  resources: [leaderworkersets]
  verbs: [get, list, watch, create, update, delete]
  api: leaderworkerset.x-k8s.io/v1/LeaderWorkerSet
- group: monitoring.coreos.com
  resources: [servicemonitors]
  verbs: [get, list, watch, create, update, delete]
  api: monitoring.coreos.com/v1/ServiceMonitor
- group: serving.kserve.io
  resources: [inferenceservices]
  verbs: [get, list, watch, create, update, delete]
  api: serving.kserve.io/v1beta1/InferenceService
- group: inference.networking.k8s.io
  resources: [inferencepools]
  verbs: [get, list, watch, create, update, delete]
  api: inference.networking.k8s.io/v1/InferencePool
- group: resource.k8s.io
  resources: [resourceclaimtemplates]
  verbs: [get, list, watch, create, update, delete]
  api: resource.k8s.io/v1/ResourceClaimTemplate
# DRA: the claims a NIMService's pods were allocated, for its status.
- group: resource.k8s.io
  resources: [resourceclaims]
  verbs: [list, watch]
  api: resource.k8s.io/v1/ResourceClaim
- group: resource.nvidia.com
  resources: [computedomains]
  verbs: [get, list, watch, create, update, delete]
  api: resource.nvidia.com/v1beta1/ComputeDomain
{{- end -}}

{{- define "nimctl.rules.nemo" -}}
# The five NeMo microservices: reconciled, status patched.
- group: apps.nvidia.com
  resources: [nemocustomizers, nemodatastores, nemoentitystores, nemoevaluators, nemoguardrails]
  verbs: [list, watch]
- group: apps.nvidia.com
  resources: [nemocustomizers/status, nemodatastores/status, nemoentitystores/status, nemoevaluators/status, nemoguardrails/status]
  verbs: [patch]
# exception: see the NIM finalizers.
- group: apps.nvidia.com
  resources: [nemocustomizers/finalizers, nemodatastores/finalizers, nemoentitystores/finalizers, nemoevaluators/finalizers, nemoguardrails/finalizers]
  verbs: [update]
# What they own (their DSN/URI Secrets and config ConfigMaps included).
- group: ""
  resources: [serviceaccounts, services, configmaps, secrets, persistentvolumeclaims]
  verbs: [get, list, watch, create, update, delete]
- group: rbac.authorization.k8s.io
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, update, delete]
- group: apps
  resources: [deployments]
  verbs: [get, list, watch, create, update, delete]
- group: networking.k8s.io
  resources: [ingresses]
  verbs: [get, list, watch, create, update, delete]
- group: autoscaling
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch, create, update, delete]
# The Customizer's Role lets its training jobs run (Kubernetes Jobs, Volcano,
# NeMo training CRs); we must hold what it grants to write it.
- group: batch
  resources: [jobs]
  verbs: [get, list, watch, create, update, patch, delete]
- group: batch
  resources: [jobs/status]
  verbs: [get, list, watch]
- group: batch.volcano.sh
  resources: [jobs]
  verbs: [get, list, watch, create, update, patch, delete]
- group: batch.volcano.sh
  resources: [jobs/status]
  verbs: [get, list, watch]
- group: scheduling.volcano.sh
  resources: [podgroups, queues, queues/status]
  verbs: [get, list, watch]
- group: scheduling.incubator.k8s.io
  resources: [podgroups, queues, queues/status]
  verbs: [get, list, watch]
- group: nodeinfo.volcano.sh
  resources: [numatopologies]
  verbs: [get, list, watch]
- group: nvidia.com
  resources: [nemotrainingjobs, nemotrainingjobs/status, nemoentityhandlers]
  verbs: [get, list, watch, create, update, patch, delete]
# With scheduler.type runai the Customizer's Role grants Run:ai's training kinds.
- group: run.ai
  resources: [trainingworkloads, runaijobs]
  verbs: [get, list, watch, create, update, patch, delete]
  api: run.ai/v2alpha1/TrainingWorkload
- group: ""
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- group: ""
  resources: [events]
  verbs: [get, list, watch]
- group: gateway.networking.k8s.io
  resources: [httproutes]
  verbs: [get, list, watch, create, update, delete]
  api: gateway.networking.k8s.io/v1/HTTPRoute
- group: monitoring.coreos.com
  resources: [servicemonitors]
  verbs: [get, list, watch, create, update, delete]
  api: monitoring.coreos.com/v1/ServiceMonitor
{{- end -}}

{{- define "nimctl.rules.gpu" -}}
# ClusterPolicy: reconciled, status patched.
- group: nvidia.com
  resources: [clusterpolicies]
  verbs: [list, watch]
- group: nvidia.com
  resources: [clusterpolicies/status]
  verbs: [patch]
# exception: see the NIM finalizers.
- group: nvidia.com
  resources: [clusterpolicies/finalizers]
  verbs: [update]
# NVIDIADriver: reconciled, status patched.
- group: nvidia.com
  resources: [nvidiadrivers]
  verbs: [list, watch]
- group: nvidia.com
  resources: [nvidiadrivers/status]
  verbs: [patch]
# exception: see the NIM finalizers.
- group: nvidia.com
  resources: [nvidiadrivers/finalizers]
  verbs: [update]
# Node labelling (gpu.present, deploy.* labels, the NVIDIADriver owner) and the node facts.
- group: ""
  resources: [nodes]
  verbs: [get, list, watch, patch, update]
- group: ""
  resources: [namespaces]
  verbs: [list, watch]
# The operand states in the operator's namespace and their cluster-scoped RBAC.
- group: apps
  resources: [daemonsets]
  verbs: [get, list, watch, create, update, delete]
- group: apps
  resources: [controllerrevisions]
  verbs: [list, watch]
- group: ""
  resources: [serviceaccounts, services, configmaps]
  verbs: [get, list, watch, create, update, delete]
- group: rbac.authorization.k8s.io
  resources: [roles, rolebindings, clusterroles, clusterrolebindings]
  verbs: [get, list, watch, create, update, delete]
- group: node.k8s.io
  resources: [runtimeclasses]
  verbs: [get, list, watch, create, update, delete]
# Driver upgrades drain nodes: evictions, and the PodDisruptionBudgets they
# must respect. The operands' Roles and ClusterRoles grant these too;
# Kubernetes lets us write them only if we hold them ourselves (no escalate).
- group: ""
  resources: [pods]
  verbs: [get, list, watch, create, delete]
# What NVIDIA's operand Roles and ClusterRoles grant beyond the above, held so we
# may grant it: the validator patches and updates pods and sets the owners'
# finalizers, the MIG manager patches its ConfigMaps.
- group: ""
  resources: [pods]
  verbs: [update, patch]
- group: ""
  resources: [configmaps]
  verbs: [patch]
- group: nvidia.com
  resources: [clusterpolicies/finalizers, nvidiadrivers/finalizers]
  verbs: [create, get, list, watch, update, patch, delete]
# exception: on OpenShift only, the prometheus-k8s Role lets cluster monitoring
# read the operator's Services, Endpoints and Pods (state-operator-metrics).
- group: ""
  resources: [endpoints]
  verbs: [get, list, watch]
- group: ""
  resources: [pods/eviction]
  verbs: [create]
- group: policy
  resources: [poddisruptionbudgets]
  verbs: [list]
- group: ""
  resources: [secrets]
  verbs: [get, list, watch]
- group: nfd.k8s-sigs.io
  resources: [nodefeatures]
  verbs: [get, list, watch, create, update]
# NVIDIA's operand Roles grant use of the privileged SCC, the node status
# exporter's of every SCC (its Role names none), so we hold use of every SCC.
- group: security.openshift.io
  resources: [securitycontextconstraints]
  verbs: [use]
- group: monitoring.coreos.com
  resources: [servicemonitors]
  verbs: [get, list, watch, create, update, delete]
  api: monitoring.coreos.com/v1/ServiceMonitor
# The driver ClusterRole (ClusterPolicy's state-driver and every NVIDIADriver pool)
# grants these, as NVIDIA's does; we must hold them to write it (no escalate).
# (resourceclaims get/list: in the GPUCluster operands' rule below.)
- group: config.openshift.io
  resources: [clusterversions]
  verbs: [get, list]
# OpenShift: the ClusterPolicy and NVIDIADriver controllers tell it from Kubernetes
# by the ClusterVersion and read the cluster Proxy, NVIDIADriver also the Driver
# Toolkit ImageStream, all from their caches (listed and watched by name); there
# each operand gets a SecurityContextConstraints the operator creates, updates and
# prunes. NVIDIA's chart grants the same SCC verbs (patch too, which nimctl, writing
# with PUT, does not use).
- group: config.openshift.io
  resources: [clusterversions]
  verbs: [watch]
  api: config.openshift.io/v1/ClusterVersion
- group: config.openshift.io
  resources: [proxies]
  verbs: [list, watch]
  api: config.openshift.io/v1/Proxy
- group: image.openshift.io
  resources: [imagestreams]
  verbs: [list, watch]
  api: image.openshift.io/v1/ImageStream
- group: security.openshift.io
  resources: [securitycontextconstraints]
  verbs: [get, list, watch, create, update, patch, delete]
  api: security.openshift.io/v1/SecurityContextConstraints
# GPUCluster: reconciled, status patched, its finalizer (dra-resourceclaim) set.
- group: nvidia.com
  resources: [gpuclusters]
  verbs: [list, watch, patch]
- group: nvidia.com
  resources: [gpuclusters/status]
  verbs: [patch]
# exception: see the NIM finalizers.
- group: nvidia.com
  resources: [gpuclusters/finalizers]
  verbs: [update]
# GPUCluster's operands: the DRA driver's controller Deployment, its DeviceClasses,
# the operands' admin-access claim templates, the ResourceSlice admission policy;
# the admin-access label on the operator namespace.
- group: apps
  resources: [deployments]
  verbs: [get, list, watch, create, update, delete]
- group: resource.k8s.io
  resources: [deviceclasses]
  verbs: [get, list, watch, create, update, delete]
- group: resource.k8s.io
  resources: [resourceclaimtemplates]
  verbs: [get, list, watch, create, update, delete]
- group: admissionregistration.k8s.io
  resources: [validatingadmissionpolicies, validatingadmissionpolicybindings]
  verbs: [get, list, watch, create, update, delete]
- group: ""
  resources: [namespaces]
  verbs: [get, patch]
# What the DRA driver's, DCGM's and the exporter's Roles and ClusterRoles grant:
# Kubernetes lets us write them only if we hold it ourselves (no escalate).
- group: resource.k8s.io
  resources: [resourceslices]
  verbs: [get, list, watch, create, update, delete]
- group: resource.k8s.io
  resources: [resourceclaims]
  verbs: [get, list, watch]
- group: resource.nvidia.com
  resources: [computedomains, computedomains/status]
  verbs: [get, list, watch, update, patch]
- group: resource.nvidia.com
  resources: [computedomaincliques]
  verbs: [get, list, watch, create, update, patch]
- group: coordination.k8s.io
  resources: [leases]
  verbs: [get, create, update]
- group: apps
  resources: [daemonsets, deployments]
  verbs: [patch]
- group: ""
  resources: [pods]
  verbs: [patch]
{{- end -}}

{{/* Leader election, in the release namespace only (role.yaml). */}}
{{- define "nimctl.rules.leaderElection" -}}
- group: coordination.k8s.io
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}
