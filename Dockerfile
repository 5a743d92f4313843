# The extender + monitor image used by k8s/extender.yaml.
#   docker build -t ghcr.io/schedtune/schedtune:0.1.0 .
FROM python:3.11-slim
WORKDIR /app
COPY requirements.txt .
# torch from the CPU index: the service never imports it, but the feature CLI does, and the
# default PyPI wheel would pull gigabytes of CUDA libraries.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu \
        -r requirements.txt
COPY estimator/ estimator/
COPY extender/ extender/
COPY profiles/ profiles/
COPY scripts/ scripts/
USER 10001:10001
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 EXTENDER_STATE_DIR=/tmp/schedtune
EXPOSE 8888 9100
CMD ["python", "-m", "extender"]
