from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditportal.settings.base")

application = get_wsgi_application()

# Web requests audit uploaded prediction files: load the compiled counting pass once, at start,
# rather than in the first large audit (see auditportal.audits.counting). A failure is logged, and
# audits then use pyarrow's dictionary encoding.
from auditportal.audits.counting import load_compiled_pass  # noqa: E402 - needs the settings above

load_compiled_pass()
