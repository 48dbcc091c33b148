# syntax=docker/dockerfile:1
# The nimctl operator image: `nimctl run` as a non-root user, nothing to build
# software with at run time. Dependency versions come from constraints.txt
# (checked against pyproject.toml by tests/integration/chart/test_image.py).
#
#   docker build -t nimctl:0.1.0 .
#
# Stage 1: install nimctl and its pinned dependencies into a virtualenv.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/nimctl
COPY pyproject.toml README.md constraints.txt ./
COPY nimctl ./nimctl
COPY nimctl_runtime ./nimctl_runtime
COPY localcluster ./localcluster
COPY api ./api
COPY controllers ./controllers
COPY webhooks ./webhooks
COPY platforms ./platforms
COPY manifests ./manifests
RUN /opt/nimctl/bin/pip install --constraint constraints.txt . \
 && /opt/nimctl/bin/pip uninstall --yes pip \
 && find /opt/nimctl -name '__pycache__' -type d -prune -exec rm -rf {} + \
 && /opt/nimctl/bin/python -m compileall -q /opt/nimctl/lib

# Stage 2: the run-time image: the interpreter, the virtualenv, no pip.
FROM python:3.11-slim-bookworm
RUN python -m pip uninstall --yes pip setuptools wheel \
 && rm -rf /usr/local/lib/python3.11/ensurepip
COPY --from=build /opt/nimctl /opt/nimctl
ENV PATH=/opt/nimctl/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the "nonroot" user of distroless images; the chart runs as it too.
USER 65532:65532
ENTRYPOINT ["nimctl"]
CMD ["run"]
