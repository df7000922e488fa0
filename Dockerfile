# Production image of the portal: web (gunicorn), Celery worker and beat share it.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# Signed reports: WeasyPrint lays out with Pango and HarfBuzz; the worker exports figures through
# Chromium's headless shell (kaleido; Debian's chromium-headless-shell, from the chromium sources: the
# same figures as chromium's for about 56% of the CPU, without GTK, CUPS or cairo). The reports' fonts
# are in static/fonts, so no font package is needed.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 \
        chromium-headless-shell \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.lock ./
# Point this at PyTorch's CPU wheel index (build arg) to get the CPU build instead of a CUDA one.
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
# PYTHONDONTWRITEBYTECODE keeps processes from writing bytecode, so compile the portal once here:
# otherwise every process (each manage.py command too) compiles its modules from source.
RUN python -m compileall -q auditportal trainer manage.py
RUN useradd --system --home /app portal && mkdir -p /data && chown portal /data
USER portal
ENV PORTAL_VAR_DIR=/data
EXPOSE 8000
CMD ["gunicorn", "auditportal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "300"]
