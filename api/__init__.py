"""Typed API (pydantic v2) for apps.nvidia.com/v1alpha1 and nvidia.com/v1, and CRD
generation from those models. Every other room speaks this vocabulary.

Adding a kind (e.g. a NeMo kind or ClusterPolicy):

1. Declare its structs on :class:`api.base.ApiModel` (conventions in
   :mod:`api.base`: optional vs defaulted vs required fields, ``Literal`` enums,
   ``Field`` bounds/patterns, CEL rules via ``validations`` or :func:`api.base.markers`)
   and Kubernetes core types from its group's ``core_types`` module
   (:mod:`api.apps.v1alpha1.core_types`: Kubernetes v1.34,
   :mod:`api.nvidia.core_types`: v1.36, the versions NVIDIA's CRDs embed; add an
   alias there with :func:`api.k8s.core_type` when a new core type is needed).
2. Declare the top-level class on :class:`api.base.CustomResource` with a
   ``kind_info = KindInfo(...)`` and ``api_version``/``kind`` ``Literal`` defaults.
3. Export it from its version package (``api.apps.v1alpha1``, ``api.nvidia.v1``,
   ``api.nvidia.v1alpha1``): :data:`api.serialize.kind_registry` finds it there, and
   ``nimctl crds``, ``python -m api.reference`` and the tests pick it up.
4. Regenerate ``charts/nimctl/crds`` and ``docs/reference/api.md``, write the field
   inventory ``tests/unit/api/golden/<Kind>.fields`` and add negative rows; add
   NVIDIA's field paths (``tests/fixtures/nvidia_crd_paths``) for the kind.
"""
