# syntax=docker/dockerfile:1
# ostinato's container image: `docker build -t ostinato .` (see docs/deploy.md).
#
# Two stages: the first builds a virtual environment with ostinato and its PostgreSQL and
# Redis extras (wheels only, with a compiler at hand for any package without one); the
# second copies that environment onto a clean slim Python, with no compiler, and runs it
# as an unprivileged user. The chat page's built files ship inside the package
# (src/ostinato/server/static/page), so no Node.js is needed here.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/ostinato
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/ostinato/bin/pip install '.[postgres,redis]'

FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
ENV PATH=/opt/ostinato/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OSTINATO_SERVER__HOST=0.0.0.0 \
    OSTINATO_SERVER__PORT=8000 \
    OSTINATO_DATA_DIR=/var/lib/ostinato/data \
    OSTINATO_DATABASE_URL=sqlite:////var/lib/ostinato/ostinato.db
RUN groupadd --system --gid 10001 ostinato \
    && useradd --system --uid 10001 --gid ostinato --home-dir /var/lib/ostinato \
       --shell /usr/sbin/nologin ostinato \
    && mkdir -p /var/lib/ostinato/data \
    && chown -R ostinato:ostinato /var/lib/ostinato
COPY --from=build /opt/ostinato /opt/ostinato
COPY deploy/entrypoint.sh /usr/local/bin/ostinato-entrypoint
WORKDIR /var/lib/ostinato
USER 10001:10001
EXPOSE 8000
VOLUME ["/var/lib/ostinato"]
# /livez answers while the process runs (a draining server included); /healthz is the
# readiness check: 503 once SIGTERM begins the drain or when the store does not answer.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('OSTINATO_SERVER__PORT', '8000'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status == 200 else 1)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["ostinato-entrypoint"]
CMD ["serve"]
