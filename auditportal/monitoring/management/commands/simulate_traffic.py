from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.csv as pacsv
from django.core.management.base import CommandError, CommandParser
from django.http import Http404

from auditportal.accounts.cli import PortalCommand
from auditportal.accounts.models import User
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import traffic as gen
from auditportal.fairness.files.tabular.read import file_sha256
from auditportal.monitoring import rules, selectors, services
from auditportal.monitoring.models import Deployment

# Exit codes (docs/monitoring.md, "Simulated traffic and the demo").
DONE, REFUSED, USAGE = 0, 1, 2
TOKEN_ENV = "PORTAL_MONITORING_TOKEN"  # noqa: S105 (the variable's name)

EXAMPLES = """
examples:
  manage.py simulate_traffic --deployment demo-credit/prod --account demo-scoring --batches 20
  manage.py simulate_traffic --deployment demo-credit/prod --url http://127.0.0.1:8000 \\
      --token-file var/log/demo-monitoring-token.txt --batches 60 --batch-size 2000 \\
      --drift-after 0 --drift-group gender=female --drift-fnr 0.08

exit codes: 0 every batch posted (or the drifted model stopped serving: rolled back);
1 the portal refused a post, could not be reached, or nothing serves; 2 bad arguments.
"""


class Command(PortalCommand):
    help = (
        "Post seeded synthetic prediction batches to a deployment, as a serving pipeline would: groups drawn "
        "with the serving model's training shares, labels with --base-rate, predictions with --fnr/--fpr per "
        "group; --drift-group's FNR (or FPR) moves to --drift-fnr after batch --drift-after. In-process "
        "through the batch service as --account (a monitoring token's account), or over HTTP to --url with a "
        "monitoring token. A worker counts and judges each batch as any other (docs/monitoring.md)."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = EXAMPLES
        from argparse import RawDescriptionHelpFormatter

        parser.formatter_class = RawDescriptionHelpFormatter
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--deployment", required=True, metavar="NAME", help="e.g. demo-credit/prod")
        parser.add_argument("--batches", type=int, default=10, metavar="N", help="how many batches (default 10)")
        parser.add_argument("--batch-size", type=int, default=500, metavar="N", help="rows a batch (default 500)")
        parser.add_argument(
            "--interval", type=float, default=0.0, metavar="SECONDS", help="pause between batches (0: none)"
        )
        parser.add_argument("--seed", type=int, default=1, help="the same seed draws the same batches (default 1)")
        parser.add_argument("--base-rate", type=float, default=0.55, help="share of label 1 (default 0.55)")
        parser.add_argument("--fnr", type=float, default=0.03, help="every group's FNR (default 0.03)")
        parser.add_argument("--fpr", type=float, default=0.10, help="every group's FPR (default 0.10)")
        parser.add_argument(
            "--drift-group", metavar="[ATTRIBUTE=]GROUP", help="the group whose rates drift (e.g. gender=female)"
        )
        parser.add_argument(
            "--drift-after", type=int, default=0, metavar="K", help="drift from batch K+1 on (default 0: at once)"
        )
        parser.add_argument("--drift-fnr", type=float, default=None, help="the group's FNR after the drift")
        parser.add_argument("--drift-fpr", type=float, default=None, help="the group's FPR after the drift")
        parser.add_argument(
            "--labels-later",
            action="store_true",
            help="post each batch without labels (with a row key), then its labels by row key",
        )
        parser.add_argument(
            "--batch-prefix", default=None, help="batch ids are PREFIX-00001...; default sim-<UTC time>-<seed>"
        )
        parser.add_argument("--account", help="in-process: post as this account (it holds a monitoring token)")
        parser.add_argument("--url", help="post over HTTP to the portal at this URL instead (a real client)")
        parser.add_argument(
            "--token-file", type=Path, help=f"the monitoring token for --url (or the {TOKEN_ENV} environment variable)"
        )
        parser.add_argument(
            "--wait", type=float, default=30.0, metavar="SECONDS", help="with --url: wait this long for the portal"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        deployment = _deployment(options["deployment"])
        poster = self._poster(deployment, options)
        for name in ("batches", "batch_size"):
            if options[name] < 1:
                raise _usage(f"--{name.replace('_', '-')} must be at least 1, not {options[name]}")
        if options["interval"] < 0:
            raise _usage(f"--interval must be 0 or more seconds, not {options['interval']}")
        if options["drift_after"] < 0:
            raise _usage(f"--drift-after must be 0 or more, not {options['drift_after']}")
        drifts = options["drift_fnr"] is not None or options["drift_fpr"] is not None
        if drifts != (options["drift_group"] is not None):
            raise _usage("--drift-group and --drift-fnr (or --drift-fpr) go together")
        model = poster.serving()
        if model is None:
            raise CommandError(f"Nothing serves in {deployment.name} ({deployment.state}): no model to feed.")
        try:
            reference = selectors.model_reference(deployment=deployment, model_identifier=model)
            traffic = gen.Traffic(
                shares=gen.shares_from_training(reference.training),
                base_rate=options["base_rate"],
                fnr=options["fnr"],
                fpr=options["fpr"],
            )
            drifted = traffic
            if drifts:
                group = _drift_group(options["drift_group"], traffic.shares)
                drifted = traffic.with_overrides({group: gen.Rates(options["drift_fnr"], options["drift_fpr"])})
            drifted.check()
        except UserError as exc:
            raise _usage(exc.message) from exc
        prefix = options["batch_prefix"] or f"sim-{datetime.now(UTC):%Y%m%dT%H%M%S}-{options['seed']}"
        self.stdout.write(
            f"Feeding {deployment.name} ({model}): {options['batches']} batches of {options['batch_size']} rows, "
            f"attributes {', '.join(traffic.shares)}"
            + (f"; {options['drift_group']} drifts after batch {options['drift_after']}" if drifts else "")
        )
        for number in range(1, options["batches"] + 1):
            if number > 1:
                time.sleep(options["interval"])
                now = poster.serving()
                if now != model:
                    self.stdout.write(f"{model} no longer serves in {deployment.name} (now: {now or 'nothing'}).")
                    if drifts or now is None:
                        return  # the drift was the model's: what serves now is not fed it
                    model = now
            use = drifted if drifts and number > options["drift_after"] else traffic
            table = gen.traffic_batch(use, rows=options["batch_size"], seed=options["seed"], number=number)
            batch_id = f"{prefix}-{number:05d}"
            self.stdout.write(poster.post(batch_id=batch_id, model=model, table=table, later=options["labels_later"]))
        self.stdout.write(
            f"Posted {options['batches']} batches; a worker counts and judges them "
            f"(manage.py deployment status {deployment.name})."
        )

    def _poster(self, deployment: Deployment, options: dict[str, Any]) -> Poster:
        if options["url"]:
            if options["account"]:
                raise _usage("--account is for posting in-process; with --url the token names the account")
            token = os.environ.get("PORTAL_MONITORING_TOKEN", "")
            if options["token_file"] is not None:
                try:
                    token = options["token_file"].read_text(encoding="utf-8").strip()
                except OSError as exc:
                    raise _usage(f"--token-file {options['token_file']}: {exc.strerror}") from exc
            if not token:
                raise _usage(f"--url needs a monitoring token: --token-file PATH or {TOKEN_ENV}")
            parsed = urllib.parse.urlsplit(options["url"])
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise _usage(f"--url must be http(s)://HOST[:PORT], not {options['url']!r}")
            return HttpPoster(options["url"].rstrip("/"), token, deployment.name, wait=options["wait"])
        if not options["account"]:
            raise _usage("name who posts: --account (in-process) or --url with a monitoring token")
        account = User.objects.filter(username=options["account"], is_active=True).first()
        if account is None or not rules.can_post_batches(account):
            raise _usage(f"--account {options['account']!r}: no active account holding a monitoring token")
        return ServicePoster(deployment, account)


def _usage(message: str) -> CommandError:
    return CommandError(message, returncode=USAGE)


def _deployment(name: str) -> Deployment:
    try:
        return selectors.deployment_find(name=name)
    except Http404 as exc:
        raise _usage(f"--deployment {name!r}: {exc}") from exc


def _drift_group(value: str, shares: dict[str, dict[str, float]] | Any) -> tuple[str, str]:
    attribute, _, group = value.rpartition("=")
    if attribute:
        if attribute not in shares:
            raise UserError(f"--drift-group {value!r}: the model has no attribute {attribute!r} ({', '.join(shares)}).")
        found = [attribute] if group in shares[attribute] else []
    else:
        found = [name for name, groups in shares.items() if group in groups]
    if not found:
        known = "; ".join(f"{name}: {', '.join(groups)}" for name, groups in shares.items())
        raise UserError(f"--drift-group {value!r} is not a group of the model's data ({known}).")
    if len(found) > 1:
        raise UserError(f"--drift-group {value!r} is a group of {', '.join(found)}: write ATTRIBUTE=GROUP.")
    return found[0], group


def _csv(table: pa.Table, directory: Path, name: str) -> Path:
    path = directory / name
    pacsv.write_csv(table, path)
    return path


class Poster(Protocol):
    def serving(self) -> str | None: ...

    def post(self, *, batch_id: str, model: str, table: pa.Table, later: bool) -> str: ...


class ServicePoster:
    """In-process, through the service the API's batch endpoint calls (the same checks, the same task)."""

    def __init__(self, deployment: Deployment, account: User) -> None:
        self.deployment = deployment
        self.account = account

    def serving(self) -> str | None:
        self.deployment.refresh_from_db()
        return self.deployment.model_identifier if self.deployment.serves else None

    def post(self, *, batch_id: str, model: str, table: pa.Table, later: bool) -> str:
        predictions = table.drop_columns([gen.LABEL]) if later else table
        with tempfile.TemporaryDirectory(prefix="simulate-traffic-") as directory:
            path = _csv(predictions, Path(directory), "batch.csv")
            try:
                received = services.batch_receive_file(
                    deployment=self.deployment,
                    user=self.account,
                    batch_id=batch_id,
                    source=path,
                    original_name="batch.csv",
                    sha256=file_sha256(path),
                    model=model,
                    prediction=gen.PREDICTION,
                    label="" if later else gen.LABEL,
                    row_key=gen.ROW_KEY if later else "",
                )
                line = f"{batch_id}: {table.num_rows} rows of {model} {'received' if received.created else 'known'}"
                if later:
                    labels = _csv(table.select([gen.ROW_KEY, gen.LABEL]), Path(directory), "labels.csv")
                    services.labels_receive(
                        batch=received.batch,
                        user=self.account,
                        source=labels,
                        original_name="labels.csv",
                        sha256=file_sha256(labels),
                        row_key=gen.ROW_KEY,
                        label=gen.LABEL,
                    )
                    line += ", labels received"
            except UserError as exc:
                raise CommandError(f"{batch_id}: refused: {exc.message}", returncode=REFUSED) from exc
        return line


class HttpPoster:
    """Over HTTP with a monitoring token: what a serving pipeline does (docs/monitoring.md)."""

    def __init__(self, url: str, token: str, name: str, *, wait: float) -> None:
        self.base = f"{url}/api/v1/deployments/{name}/"
        self.token = token
        self.wait = wait

    def serving(self) -> str | None:
        body = self._request("GET", self.base, None, None, wait=self.wait)
        self.wait = 0.0  # only the first call waits for the portal to come up
        model = body.get("model")
        return str(model) if model else None

    def post(self, *, batch_id: str, model: str, table: pa.Table, later: bool) -> str:
        predictions = table.drop_columns([gen.LABEL]) if later else table
        fields = {"batch_id": batch_id, "model": model, "prediction": gen.PREDICTION}
        fields.update({"row_key": gen.ROW_KEY} if later else {"label": gen.LABEL})
        body, kind = _multipart(fields, _csv_bytes(predictions), "batch.csv")
        answer = self._request("POST", f"{self.base}-/batches/", body, kind)
        line = f"{batch_id}: {table.num_rows} rows of {model} {answer.get('state', '?')}"
        if later:
            labels = _csv_bytes(table.select([gen.ROW_KEY, gen.LABEL]))
            body, kind = _multipart({"row_key": gen.ROW_KEY, "label": gen.LABEL}, labels, "labels.csv")
            self._request("POST", f"{self.base}-/batches/{batch_id}/labels/", body, kind)
            line += ", labels received"
        return line

    def _request(
        self, method: str, url: str, body: bytes | None, kind: str | None, *, wait: float = 0.0
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        if kind:
            headers["Content-Type"] = kind
        deadline = time.monotonic() + wait
        while True:
            request = urllib.request.Request(url, data=body, headers=headers, method=method)  # noqa: S310 (http(s) checked)
            try:
                with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                    return dict(json.loads(response.read() or b"{}"))
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:2000].decode("utf-8", "replace")
                raise CommandError(f"{method} {url}: {exc.code} {detail}", returncode=REFUSED) from exc
            except urllib.error.URLError as exc:
                if time.monotonic() >= deadline:
                    raise CommandError(f"{method} {url}: {exc.reason}", returncode=REFUSED) from exc
                time.sleep(1.0)


def _csv_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def _multipart(fields: dict[str, str], content: bytes, file_name: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
        "Content-Type: text/csv\r\n\r\n".encode()
        + content
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"
