# The gateway image: the package and `gateway serve`. Mount lightspeed-stack.yaml at
# /app/lightspeed-stack.yaml (or set LIGHTSPEED_STACK_CONFIG_PATH).
FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip install --no-cache-dir . && useradd --create-home gateway
USER gateway
ENV LIGHTSPEED_STACK_CONFIG_PATH=/app/lightspeed-stack.yaml
EXPOSE 8080
ENTRYPOINT ["gateway", "serve"]
