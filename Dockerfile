# Production image of the portal: web (gunicorn), Celery worker and beat share it.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# WeasyPrint needs Pango; kaleido (static chart export) needs a Chromium; pdfsig verifies signatures.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core \
        chromium poppler-utils \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.lock ./
# Point this at PyTorch's CPU wheel index (build arg) to get the CPU build instead of a CUDA one.
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN useradd --system --home /app portal && mkdir -p /data && chown portal /data
USER portal
# numba keeps the compiled audit kernel here (the code directories are not writable by this user).
ENV PORTAL_VAR_DIR=/data NUMBA_CACHE_DIR=/data/numba-cache
EXPOSE 8000
CMD ["gunicorn", "auditportal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "300"]
