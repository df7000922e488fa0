from __future__ import annotations

from auditportal.celery import app
from auditportal.experiments import services
from auditportal.experiments.models import Experiment


@app.task(name="experiments.launch", acks_late=True)  # type: ignore[untyped-decorator]
def experiment_launch_task(experiment_id: int) -> None:
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is not None:  # deleted before a worker took the task
        services.experiment_launch(experiment=experiment)


@app.task(name="experiments.poll_active", ignore_result=True)  # type: ignore[untyped-decorator]
def experiments_poll_active_task() -> int:
    return services.experiments_poll_active()


@app.task(name="experiments.stop", acks_late=True, ignore_result=True)  # type: ignore[untyped-decorator]
def experiment_stop_task(experiment_id: int) -> None:
    # Queued by a cancel: poll the experiment now, which passes the cancel on to the backend from
    # this worker (the web process that recorded it signals nothing).
    services.experiment_poll(experiment_id=experiment_id)
