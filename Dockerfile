# The gateway image: the package and `gateway serve`. Mount lightspeed-stack.yaml at
# /app/lightspeed-stack.yaml (or set LIGHTSPEED_STACK_CONFIG_PATH); its `service.host` must be
# 0.0.0.0 in a container (127.0.0.1 is unreachable from outside it). docs/deploy.md.
#
# The base is pinned by digest (a python:3.12-slim published on Docker Hub), so a rebuild gets
# the same system; bump it deliberately: `docker pull python:3.12-slim && docker images --digests`.
FROM python:3.12-slim@sha256:57cd7c3a7a273101a6485ba99423ee568157882804b1124b4dd04266317710de
WORKDIR /app
# Exactly the locked runtime dependencies (deploy/requirements.lock, `make lock`), then the
# package without resolving anything again.
COPY deploy/requirements.lock ./
RUN pip install --no-cache-dir --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip install --no-cache-dir --no-deps . && useradd --create-home gateway
USER gateway
ENV LIGHTSPEED_STACK_CONFIG_PATH=/app/lightspeed-stack.yaml
EXPOSE 8080
# Alive when the process answers HTTP at all: /liveness may need a credential (401 is an
# answer; authentication.skip_for_health_probes lets probes through). GATEWAY_HEALTHCHECK_URL
# changes the port.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request, urllib.error\ntry:\n    urllib.request.urlopen(os.environ.get('GATEWAY_HEALTHCHECK_URL', 'http://127.0.0.1:8080/liveness'), timeout=4)\nexcept urllib.error.HTTPError as e:\n    sys.exit(e.code >= 500)\nexcept OSError:\n    sys.exit(1)"]
ENTRYPOINT ["gateway", "serve"]
