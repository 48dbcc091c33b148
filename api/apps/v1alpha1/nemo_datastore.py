"""NemoDatastore (apps.nvidia.com/v1alpha1): the NeMo Data Store service (Gitea
with Git LFS on an object store), backed by PostgreSQL; spec (object store,
prerequisite secrets, PVC), status, API port, labels and finalizer.
"""

from __future__ import annotations

from typing import Final, Literal

from api.apps.v1alpha1.common import PersistentVolumeClaim
from api.apps.v1alpha1.nemo_common import DatabaseConfig, NemoServiceSpec, NemoServiceStatus
from api.base import ApiModel, CustomResource, KindInfo

__all__ = [
    "API_PORT",
    "FINALIZER",
    "PART_OF",
    "NemoDatastore",
    "NemoDatastoreSpec",
    "NemoDatastoreStatus",
    "ObjectStoreConfig",
    "ObjectStoreCredentials",
    "Secrets",
]

FINALIZER: Final = "finalizer.nemodatastore.apps.nvidia.com"
PART_OF: Final = "nemo-datastore-service"
"""Value of the `app.kubernetes.io/part-of` label."""
API_PORT: Final = 3000


class ObjectStoreCredentials(ApiModel):
    """Object store access key and where its secret key is."""

    user: str
    """Access key id."""
    secret_name: str
    """Secret holding the secret access key."""
    password_key: str
    """Key of the secret access key in the secret."""


class ObjectStoreConfig(ApiModel):
    """S3-compatible object store for LFS files (e.g. MinIO)."""

    credentials: ObjectStoreCredentials
    """Credentials."""
    serve_direct: bool = True
    """Let clients download LFS objects directly from the store."""
    endpoint: str
    """Object store endpoint (host:port)."""
    bucket_name: str
    """Bucket for LFS files."""
    region: str
    """Bucket region."""
    ssl: bool
    """Use TLS to the object store."""


class Secrets(ApiModel):
    """Secrets that must exist before the datastore is deployed."""

    gitea_admin_secret: str
    """Gitea admin user name and password."""
    lfs_jwt_secret: str
    """LFS JWT secret (key `jwtSecret`)."""
    datastore_init_secret: str
    """Init scripts."""
    datastore_config_secret: str
    """Gitea configuration script."""
    datastore_inline_config_secret: str
    """Inline configuration sources."""


class NemoDatastoreSpec(NemoServiceSpec):
    """Desired state of a NemoDatastore."""

    object_store_config: ObjectStoreConfig | None = None
    """Object store for LFS files."""
    database_config: DatabaseConfig
    """External PostgreSQL database."""
    secrets: Secrets
    """Prerequisite secrets."""
    pvc: PersistentVolumeClaim | None = None
    """Data volume (default `<name>-pvc`; created when `create` is true)."""


class NemoDatastoreStatus(NemoServiceStatus):
    """Observed state of a NemoDatastore."""


class NemoDatastore(CustomResource):
    """A NeMo Data Store service."""

    kind_info = KindInfo(
        group="apps.nvidia.com", version="v1alpha1", kind="NemoDatastore", plural="nemodatastores"
    )

    api_version: Literal["apps.nvidia.com/v1alpha1"] = "apps.nvidia.com/v1alpha1"
    kind: Literal["NemoDatastore"] = "NemoDatastore"
    spec: NemoDatastoreSpec
    """Desired state."""
    status: NemoDatastoreStatus | None = None
    """Observed state."""
