"""NemoDatastore: Gitea with Git LFS on an object store (nim-operator.md §5).

The data volume is PVC ``<pvc.name or name-pvc>`` (created when
``pvc.create`` is true; it must exist otherwise) or an emptyDir without
``pvc``; the three prerequisite Secrets are mounted for the init scripts;
three init containers (``init-directories``, ``init-app-ini``,
``configure-datastore``: the Gitea admin and database setup) share the
Gitea env with the admin credentials; the pod runs with ``fsGroup`` only;
the Gitea env carries the database password and the LFS secrets by
``secretKeyRef`` only.
"""

from __future__ import annotations

from typing import ClassVar

from api.apps.v1alpha1 import nemo_datastore as api
from manifests import pod
from manifests.labels import INSTANCE_LABEL, NAME_LABEL
from platforms.nemo.common import NemoRenderer, pvc_name

__all__ = ["DatastoreRenderer"]

from nimctl_runtime.meta import Obj

GITEA_PATHS = (
    ("GITEA_APP_INI", "/data/gitea/conf/app.ini"),
    ("GITEA_CUSTOM", "/data/gitea"),
    ("GITEA_WORK_DIR", "/data"),
    ("TMPDIR", "/tmp/gitea"),
    ("GITEA_TEMP", "/tmp/gitea"),
    ("HOME", "/data/gitea/git"),
)


def _secret_volume(name: str, secret: str, mode: int) -> Obj:
    return {"name": name, "secret": {"secretName": secret, "defaultMode": mode}}


class DatastoreRenderer(NemoRenderer[api.NemoDatastore]):
    part_of: ClassVar[str] = api.PART_OF
    api_port: ClassVar[int] = api.API_PORT

    def service_selector(self) -> dict[str, str]:
        return {NAME_LABEL: self.name, INSTANCE_LABEL: self.name}

    def pod_security_context(self) -> Obj:
        """NVIDIA's Datastore pod runs with ``fsGroup`` only (``groupID``, default 1000)."""
        group_id = 1000 if self.spec.group_id is None else int(self.spec.group_id)
        return {"fsGroup": group_id}

    def data_pvc_name(self) -> str | None:
        return pvc_name(self.name, self.spec.pvc) if self.spec.pvc is not None else None

    def _secret_env(self) -> list[Obj]:
        creds = self.spec.database_config.credentials
        return [
            pod.secret_env_var(
                "GITEA__SERVER__LFS_JWT_SECRET", self.spec.secrets.lfs_jwt_secret, "jwtSecret"
            ),
            pod.secret_env_var("GITEA__DATABASE__PASSWD", creds.secret_name, creds.password_key),
        ]

    def _object_store_secret_env(self) -> list[Obj]:
        store = self.spec.object_store_config
        if store is None:
            return []
        return [
            pod.env_var("GITEA__LFS__MINIO_ACCESS_KEY_ID", store.credentials.user),
            pod.secret_env_var(
                "GITEA__LFS__MINIO_SECRET_ACCESS_KEY",
                store.credentials.secret_name,
                store.credentials.password_key,
            ),
        ]

    def standard_env(self) -> list[Obj]:
        return [
            pod.env_var("SSH_LISTEN_PORT", "2222"),
            pod.env_var("SSH_PORT", "22"),
            *(pod.env_var(k, v) for k, v in GITEA_PATHS),
            *self._secret_env(),
            *self._object_store_secret_env(),
        ]

    def init_env(self) -> list[Obj]:
        db = self.spec.database_config
        admin = self.spec.secrets.gitea_admin_secret
        env = [
            *(pod.env_var(k, v) for k, v in GITEA_PATHS),
            *self._secret_env(),
            pod.secret_env_var("GITEA_ADMIN_USERNAME", admin, "GITEA_ADMIN_USERNAME"),
            pod.secret_env_var("GITEA_ADMIN_PASSWORD", admin, "GITEA_ADMIN_PASSWORD"),
            pod.env_var("GITEA__DATABASE__SSL_MODE", "disable"),
            pod.env_var("GITEA__DATABASE__NAME", db.database_name),
            pod.env_var("GITEA__DATABASE__HOST", f"{db.host}:{db.port}"),
            pod.env_var("GITEA__DATABASE__USER", db.credentials.user),
        ]
        store = self.spec.object_store_config
        if store is not None:
            env.extend(
                [
                    pod.env_var("GITEA__LFS__SERVE_DIRECT", str(store.serve_direct).lower()),
                    pod.env_var("GITEA__LFS__STORAGE_TYPE", "minio"),
                    pod.env_var("GITEA__LFS__MINIO_ENDPOINT", store.endpoint),
                    pod.env_var("GITEA__LFS__MINIO_BUCKET", store.bucket_name),
                    pod.env_var("GITEA__LFS__MINIO_LOCATION", store.region),
                    pod.env_var("GITEA__LFS__MINIO_USE_SSL", str(store.ssl).lower()),
                    *self._object_store_secret_env(),
                ]
            )
        return env

    def _data_mount(self) -> Obj:
        sub_path = self.spec.pvc.sub_path if self.spec.pvc is not None else None
        return pod.volume_mount("data", "/data", sub_path=sub_path)

    def init_containers(self) -> list[Obj]:
        mounts = [
            pod.volume_mount("config", "/usr/sbin"),
            pod.volume_mount("temp", "/tmp"),
            pod.volume_mount("inline-config-sources", "/env-to-ini-mounts/inlines/"),
            pod.volume_mount("init", "/usr/sbin/init"),
            self._data_mount(),
        ]
        env = self.init_env()
        return [
            pod.container(
                "init-directories",
                self.image,
                image_pull_policy=self.pull_policy,
                command=["/usr/sbin/init/init_directory_structure.sh"],
                env=env,
                volume_mounts=mounts,
            ),
            pod.container(
                "init-app-ini",
                self.image,
                image_pull_policy=self.pull_policy,
                command=["/usr/sbin/config_environment.sh"],
                env=env,
                volume_mounts=mounts,
            ),
            # Gitea admin user and database setup.
            pod.container(
                "configure-datastore",
                self.image,
                image_pull_policy=self.pull_policy,
                command=["/bin/sh", "-c"],
                args=["/usr/sbin/init/configure_gitea.sh"],
                env=env,
                volume_mounts=mounts,
            ),
        ]

    def volumes(self) -> list[Obj]:
        secrets = self.spec.secrets
        claim = self.data_pvc_name()
        data = pod.pvc_volume("data", claim) if claim else pod.empty_dir_volume("data")
        return [
            _secret_volume("init", secrets.datastore_init_secret, 110),
            _secret_volume("config", secrets.datastore_config_secret, 110),
            _secret_volume("inline-config-sources", secrets.datastore_inline_config_secret, 420),
            pod.empty_dir_volume("temp"),
            data,
        ]

    def volume_mounts(self) -> list[Obj]:
        return [pod.volume_mount("temp", "/tmp"), self._data_mount()]

    def objects_before_service(self) -> list[Obj]:
        claim = self.spec.pvc
        if claim is not None and claim.create:
            return [self.created_pvc(claim, self.data_pvc_name() or "", "spec.pvc")]
        return []
