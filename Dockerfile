# syntax=docker/dockerfile:1
# Tessera: one image for the scheduler (`tessera run`) and the node agent (`tessera agent`).
#
#   docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t tessera:0.1.0 .
#   docker run --rm tessera:0.1.0 --version
#
# GIT_COMMIT (and GIT_TREE_STATE, clean or dirty) name the commit the image is built from in
# `tessera --version`, the tessera.starting log line and the tessera_build_info metric: the build
# context holds no .git to read it from. Without them the image says "unknown".
#
# Small: a wheel is built in a throw-away stage and installed into a venv that is the only thing
# copied into the final stage (no compilers, no build tools, no pip cache, no sources).
# Non-root: uid/gid 65532 (the "nonroot" convention of distroless images; deploy/ sets the same).
# Read-only root filesystem: nothing is written at run time; bytecode is compiled at build time
# and PYTHONDONTWRITEBYTECODE stops Python from trying to write more.
# Reproducible: the base image is pinned by version tag (pin a digest too in your registry
# mirror if you need bit-for-bit rebuilds), build tools are pinned here, runtime packages come
# from deploy/requirements.lock with --no-deps (nothing the resolver would pick on the day of the
# build) and --only-binary (no compiler decides anything), and `pip check` proves the set whole.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG GIT_COMMIT=unknown
ARG GIT_TREE_STATE=unknown
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN pip install --no-cache-dir setuptools==80.9.0 wheel==0.45.1
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
RUN printf '%s\n%s\n' "$GIT_COMMIT" "$GIT_TREE_STATE" > scheduler/data/build-commit
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .
COPY deploy/requirements.lock /tmp/requirements.lock
# The venv gets no pip or setuptools of its own: the build stage's pip installs into it.
RUN python -m venv --without-pip /opt/tessera \
    && pip --python /opt/tessera/bin/python install --no-cache-dir --no-deps --only-binary=:all: \
           --requirement /tmp/requirements.lock \
    && pip --python /opt/tessera/bin/python install --no-cache-dir --no-deps /wheels/*.whl \
    && pip --python /opt/tessera/bin/python check \
    && /opt/tessera/bin/python -m compileall -q /opt/tessera/lib \
    && /opt/tessera/bin/tessera --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="tessera" \
      org.opencontainers.image.description="Kubernetes scheduler for GPU batch work (binpack, gangs, device classes) and its node agent" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.14-slim-bookworm"
ENV PATH=/opt/tessera/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TESSERA_LOG_FORMAT=json
COPY --from=build /opt/tessera /opt/tessera
USER 65532:65532
ENTRYPOINT ["tessera"]
CMD ["--help"]
