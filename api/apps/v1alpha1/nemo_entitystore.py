"""NemoEntitystore (apps.nvidia.com/v1alpha1): the NeMo Entity Store service
(namespaces, projects, models and datasets), backed by PostgreSQL and a NeMo
Datastore; spec, status, API port, labels and finalizer.
"""

from __future__ import annotations

from typing import Final, Literal

from api.apps.v1alpha1.nemo_common import (
    DatabaseConfig,
    Datastore,
    NemoServiceSpec,
    NemoServiceStatus,
)
from api.base import CustomResource, KindInfo

__all__ = [
    "API_PORT",
    "FINALIZER",
    "PART_OF",
    "NemoEntitystore",
    "NemoEntitystoreSpec",
    "NemoEntitystoreStatus",
]

FINALIZER: Final = "finalizer.NemoEntitystore.apps.nvidia.com"
PART_OF: Final = "nemo-entitystore-service"
"""Value of the `app.kubernetes.io/part-of` label."""
API_PORT: Final = 8000


class NemoEntitystoreSpec(NemoServiceSpec):
    """Desired state of a NemoEntitystore."""

    database_config: DatabaseConfig
    """External PostgreSQL database."""
    datastore: Datastore
    """NeMo Datastore endpoint."""


class NemoEntitystoreStatus(NemoServiceStatus):
    """Observed state of a NemoEntitystore."""


class NemoEntitystore(CustomResource):
    """A NeMo Entity Store service."""

    kind_info = KindInfo(
        group="apps.nvidia.com",
        version="v1alpha1",
        kind="NemoEntitystore",
        plural="nemoentitystores",
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NemoEntitystore"] = "NemoEntitystore"
    spec: NemoEntitystoreSpec
    """Desired state."""
    status: NemoEntitystoreStatus | None = None
    """Observed state."""
