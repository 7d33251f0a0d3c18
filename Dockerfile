# The bot's image: python -m bot (polling by default; "webhook" as the command for webhook mode).
# An exact base image version: a rebuild months later gets the same Python and Debian release.

# The build stage: the project's wheel, holding exactly the packages and data files that
# pyproject.toml declares (the one list: no COPY line here names a package).
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_NO_CACHE=1
WORKDIR /src
# The installer first (uv, pinned with its hashes: the base image's pip only installs
# that one wheel), then the build backend, pinned with its hashes as the dependencies are.
COPY requirements-bootstrap.lock requirements-build.lock ./
RUN pip install --require-hashes --no-deps -r requirements-bootstrap.lock \
    && uv pip install --system --require-hashes --no-deps -r requirements-build.lock
# The build context is the project minus .dockerignore; pyproject.toml picks from it.
COPY . ./
RUN pip wheel --no-deps --no-build-isolation --no-index --wheel-dir /wheels .

FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_NO_CACHE=1

WORKDIR /app

# The dependency layer: only the lock file goes in, so edits to the code, the README or
# pyproject.toml's other fields reuse it. Exact versions, every file checked by its hash.
# The installer as in the build stage (scripts/bootstrap does the same for .venv).
COPY requirements-bootstrap.lock requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements-bootstrap.lock \
    && uv pip install --system --require-hashes --no-deps -r requirements.lock

# The project itself, from the wheel built above: nothing to resolve or download.
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-deps --no-index /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels

# Never run as root; numeric ids so that Kubernetes' runAsNonRoot can verify them.
RUN groupadd --gid 10001 bot \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin bot
USER 10001:10001
WORKDIR /home/bot

# WEBHOOK_PORT (webhook mode: the webhook, /healthz and /metrics);
# HEALTH_PORT (polling mode: /healthz and /metrics, on HEALTH_HOST, loopback by default).
EXPOSE 8080 8081

# /healthz of whichever mode PID 1 runs: the webhook server's port, else the health port;
# directly, whatever proxy variables the container has (python: no curl in slim images).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os,urllib.request as u; w=b'webhook' in open('/proc/1/cmdline','rb').read(); p=os.environ.get('WEBHOOK_PORT','8080') if w else os.environ.get('HEALTH_PORT','8081'); u.build_opener(u.ProxyHandler({})).open(f'http://127.0.0.1:{p}/healthz', timeout=4)"]

ENTRYPOINT ["python", "-m", "bot"]
CMD ["polling"]
