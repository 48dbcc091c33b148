"""String formats of OpenAPI v3 schemas in custom resources (``format: date-time`` ...).

:func:`check_format` answers whether a string satisfies a ``format`` the way
kube-openapi's format registry does for the formats CRDs use; unknown formats
always pass, as in kube-apiserver.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import uuid
from datetime import datetime

_HOSTNAME_RE = re.compile(
    r"^(?=.{1,255}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC_RE = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_DURATION_RE = re.compile(r"^(-?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w))+$")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")


def check_format(fmt: str, value: str) -> bool:
    """True when ``value`` satisfies ``format``; unknown formats always pass."""
    try:
        if fmt == "date-time":
            if not _DATETIME_RE.match(value):
                return False
            datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
            return True
        if fmt == "date":
            if not _DATE_RE.match(value):
                return False
            datetime.strptime(value, "%Y-%m-%d")
            return True
        if fmt == "byte":
            base64.b64decode(value, validate=True)
            return True
        if fmt in ("uuid", "uuid3", "uuid4", "uuid5"):
            parsed = uuid.UUID(value)
            want = {"uuid3": 3, "uuid4": 4, "uuid5": 5}.get(fmt)
            return len(value) == 36 and (want is None or parsed.version == want)
        if fmt == "ipv4":
            ipaddress.IPv4Address(value)
            return True
        if fmt == "ipv6":
            ipaddress.IPv6Address(value)
            return True
        if fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
            return "/" in value
        if fmt == "hostname":
            return bool(_HOSTNAME_RE.match(value))
        if fmt == "email":
            return bool(_EMAIL_RE.match(value))
        if fmt == "mac":
            return bool(_MAC_RE.match(value))
        if fmt == "duration":
            return bool(_DURATION_RE.match(value))
        if fmt == "uri":
            return bool(_URI_RE.match(value))
    except ValueError:
        return False
    return True
