"""Read side of the runtime: Reflector (list+watch), indexed Store, SharedInformer
and the label-filtered Cache that reconcilers read from instead of the API.
"""

from nimctl_runtime.cache.cache import ByObject, Cache, CacheNotStartedError, CacheNotSyncedError
from nimctl_runtime.cache.informer import HandlerRegistration, SharedInformer
from nimctl_runtime.cache.reflector import (
    ClientListerWatcher,
    ListerWatcher,
    Reflector,
    ReflectorStore,
    VeryShortWatchError,
)
from nimctl_runtime.cache.store import (
    NAMESPACE_INDEX,
    OWNER_UID_INDEX,
    DeletedFinalStateUnknown,
    IndexFunc,
    Store,
    object_key,
    strip_managed_fields,
)

__all__ = [
    "NAMESPACE_INDEX",
    "OWNER_UID_INDEX",
    "ByObject",
    "Cache",
    "CacheNotStartedError",
    "CacheNotSyncedError",
    "ClientListerWatcher",
    "DeletedFinalStateUnknown",
    "HandlerRegistration",
    "IndexFunc",
    "ListerWatcher",
    "Reflector",
    "ReflectorStore",
    "SharedInformer",
    "Store",
    "VeryShortWatchError",
    "object_key",
    "strip_managed_fields",
]
