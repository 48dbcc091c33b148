"""An in-memory API for reconciler unit tests: cache reads, client writes, a write log."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import jsonpatch

from nimctl_runtime.client.errors import AlreadyExists, Conflict, NotFound
from nimctl_runtime.meta import OWNER_UID_INDEX, Obj, dig, owner_uid_index


class FakeAPI:
    """Serves as cache (get/list), api_reader (get) and client (writes)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str, str], Obj] = {}
        self.writes: list[tuple[str, str, str]] = []
        #: (kind, name) -> the propagationPolicy of its last delete (None: the default)
        self.propagation: dict[tuple[str, str], str | None] = {}
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self.fail_create: dict[str, Exception] = {}

    # -- reads
    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        key = (api_version, kind, namespace or "", name)
        if key not in self.objects:
            raise NotFound(404, "NotFound", f"{kind} {name} not found")
        return copy.deepcopy(self.objects[key])

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: Any = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]:
        out = []
        for (av, k, ns, _), obj in self.objects.items():
            if av != api_version or k != kind or (namespace and ns != namespace):
                continue
            if index is not None:
                if index[0] == OWNER_UID_INDEX:
                    values = owner_uid_index(obj)
                else:
                    name = dig(obj, "spec", "storage", "nimCache", "name")
                    values = [name] if name else []
                if index[1] not in values:
                    continue
            if isinstance(label_selector, dict):
                labels = obj["metadata"].get("labels") or {}
                if any(labels.get(k2) != v for k2, v in label_selector.items()):
                    continue
            out.append(copy.deepcopy(obj))
        return out

    # -- writes
    def _bump(self, obj: Obj) -> Obj:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return obj

    def put(self, obj: Obj) -> Obj:
        """Seed an object (not counted as a write)."""
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", f"uid-{next(self._uid)}")
        obj["metadata"].setdefault("namespace", "default")
        self._bump(obj)
        self.objects[self._key(obj)] = obj
        return obj

    @staticmethod
    def _key(obj: Obj) -> tuple[str, str, str, str]:
        m = obj["metadata"]
        return (obj["apiVersion"], obj["kind"], m.get("namespace") or "", m["name"])

    async def create(self, obj: Obj) -> Obj:
        self.writes.append(("create", obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] in self.fail_create:
            raise self.fail_create[obj["kind"]]
        key = self._key(obj)
        if key in self.objects:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        return copy.deepcopy(self.put(obj))

    async def update(self, obj: Obj) -> Obj:
        self.writes.append(("update", obj["kind"], obj["metadata"]["name"]))
        key = self._key(obj)
        live = self.objects.get(key)
        if live is None:
            raise NotFound(404, "NotFound", "gone")
        if obj["metadata"].get("resourceVersion") != live["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "stale")
        new = copy.deepcopy(obj)
        new["metadata"]["uid"] = live["metadata"]["uid"]
        if "status" in live:
            new["status"] = live["status"]
        self.objects[key] = self._bump(new)
        return copy.deepcopy(new)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        self.writes.append(("patch" + (f"/{subresource}" if subresource else ""), kind, name))
        key = (api_version, kind, namespace or "", name)
        live = self.objects.get(key)
        if live is None:
            raise NotFound(404, "NotFound", "gone")
        if patch_type == "json":
            try:
                new = jsonpatch.apply_patch(live, body)
            except jsonpatch.JsonPatchTestFailed as exc:
                raise Conflict(409, "Conflict", str(exc)) from exc
        else:
            new = copy.deepcopy(live)
            for k, v in body.items():
                if isinstance(v, dict) and isinstance(new.get(k), dict):
                    new[k].update(v)
                else:
                    new[k] = v
        self.objects[key] = self._bump(new)
        return copy.deepcopy(new)

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
    ) -> Any:
        self.writes.append(("delete", kind, name))
        self.propagation[(kind, name)] = propagation_policy
        key = (api_version, kind, namespace or "", name)
        if key not in self.objects:
            raise NotFound(404, "NotFound", "gone")
        del self.objects[key]
        return {}

    # -- helpers
    def obj(self, api_version: str, kind: str, name: str, namespace: str = "default") -> Obj | None:
        return self.objects.get((api_version, kind, namespace, name))

    def set_status(
        self, api_version: str, kind: str, name: str, status: Obj, namespace: str = "default"
    ) -> None:
        o = self.objects[(api_version, kind, namespace, name)]
        o["status"] = copy.deepcopy(status)
        self._bump(o)


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Obj, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))
