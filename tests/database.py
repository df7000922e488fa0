"""The test database, as a DATABASE_URL for a subprocess (a command line, a Celery worker) to open.

The subprocess sees only committed rows: tests that use it are transactional.
"""

from __future__ import annotations

from django.db import connection


def subprocess_database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        assert db["NAME"] != ":memory:", "a subprocess needs a database file"
        assert "mode=memory" not in str(db["NAME"]), "a subprocess needs a database file"
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
