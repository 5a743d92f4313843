# The extender + monitor image used by k8s/extender.yaml: the service's dependencies only,
# no torch, pandas or scikit-learn (the offline tools come with `pip install -e .[tools]`).
#   docker build -t ghcr.io/schedtune/schedtune:0.2.0 .
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml ./
COPY estimator/ estimator/
COPY extender/ extender/
COPY scripts/ scripts/
COPY profiles/ profiles/
# Editable: the estimator reads its artefacts from profiles/ beside the packages.
RUN pip install --no-cache-dir -e .
USER 10001:10001
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 EXTENDER_STATE_DIR=/tmp/schedtune
EXPOSE 8888 9100
CMD ["schedtune", "serve"]
