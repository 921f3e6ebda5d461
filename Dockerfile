# NeuRules service image: the API (`neurules-admin serve`) and the Celery training worker
# (`neurules-admin worker`) run from the same image; docker-compose.yml wires them.
#
#   docker build -t neurules .        # torch 2.13.0 from the package index (on Linux x86-64 that
#                                     # wheel bundles CUDA: it runs on CPU and on an NVIDIA GPU)
#   docker build -t neurules-gpu --build-arg TORCH_SPEC="torch==2.13.0" \
#       --build-arg PIP_EXTRA_INDEX_URL=<a wheel index for another CUDA version> .
FROM python:3.11-slim AS base

ARG TORCH_SPEC="torch==2.13.0"
ARG PIP_EXTRA_INDEX_URL=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NEURULES_DATA_DIR=/data

WORKDIR /srv/neurules

# torch first, in a layer cached until TORCH_SPEC or pyproject.toml changes; the project and its service extra
# install after the sources are copied (the `pip install -e` below)
COPY pyproject.toml README.md ./
RUN pip install ${PIP_EXTRA_INDEX_URL:+--extra-index-url "$PIP_EXTRA_INDEX_URL"} "$TORCH_SPEC"

COPY models ./models
COPY app ./app
COPY worker ./worker
COPY migrations ./migrations
COPY alembic.ini ./
RUN pip install -e ".[service]" \
    && useradd --system --uid 10001 --home /data neurules \
    && mkdir -p /data && chown neurules /data

USER neurules
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"

# `docker run --stop-timeout 45` (or less NEURULES_SHUTDOWN_GRACE_S): requests in flight get that grace after SIGTERM,
# and the embedded worker then queues its training job again; docker's default 10 s SIGKILLs before
# one server process by default (NEURULES_WORKERS, or `serve --workers N`: one per core is best, each with its own
# SO_REUSEPORT listener, not uvicorn --workers)
CMD ["neurules-admin", "serve", "--host", "0.0.0.0", "--port", "8000"]
