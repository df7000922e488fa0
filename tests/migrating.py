"""Migrating the test database back and forth, for the tests of a data migration: the real migrations,
applied and unapplied by Django's executor, in the order and with the historical states Django uses.

One thing differs, how the states before each unapplied migration are made. Django's executor walks the
whole plan from the first migration to unapply, rendering the models of every migration still applied
after it as it goes (a state that is rendered re-renders a model and the ~45 models tied to it through
the user on each operation): 9-15 s of CPU for a test going back a dozen migrations from an early one.
Here the walk keeps the states unrendered (a list of model descriptions, cheap to change) and renders
each one once, when its migration is unapplied (0.06 s each). The states are the same; the database
operations and their order are Django's.
"""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.migration import Migration
from django.db.migrations.state import ProjectState

Target = tuple[str, str]


class _Executor(MigrationExecutor):
    # Django 5.2's MigrationExecutor._migrate_all_backwards, with the states left unrendered until used.
    def _migrate_all_backwards(
        self, plan: list[tuple[Migration, bool]], full_plan: list[tuple[Migration, bool]], fake: bool
    ) -> ProjectState:
        migrations_to_run = {migration for migration, _ in plan}
        states: dict[Migration, ProjectState] = {}
        state = ProjectState(real_apps=self.loader.unmigrated_apps)  # empty: nothing applied yet
        applied_migrations = {
            self.loader.graph.nodes[key] for key in self.loader.applied_migrations if key in self.loader.graph.nodes
        }
        for migration, _ in full_plan:
            if not migrations_to_run:
                break
            if migration in migrations_to_run:
                states[migration] = state  # the state before this migration, kept as it is
                state = migration.mutate_state(state, preserve=True)
                migrations_to_run.remove(migration)
            elif migration in applied_migrations:
                migration.mutate_state(state, preserve=False)

        for migration, _ in plan:
            before = states[migration]
            before.apps  # noqa: B018  # rendered once here; unapplying re-renders what each operation changes
            self.unapply_migration(before, migration, fake=fake)
            applied_migrations.remove(migration)

        # The state after: the one before the last migration unapplied, with the migrations still applied
        # that come after it (as Django computes it).
        last_unapplied = plan[-1][0]
        state = states[last_unapplied].clone()
        del state.apps  # unrendered: mutating it stays cheap
        index = next(i for i, (migration, _) in enumerate(full_plan) if migration == last_unapplied)
        for migration, _ in full_plan[index:]:
            if migration in applied_migrations:
                migration.mutate_state(state, preserve=False)
        return state


def migrate(targets: list[Target]) -> ProjectState:
    """Migrates the test database to ``targets`` (backwards or forwards, as ``manage.py migrate``);
    returns the state it reached."""
    executor = _Executor(connection)
    return executor.migrate(targets)


def migrate_to_latest() -> ProjectState:
    """Applies every migration not applied: the schema the tests after this one expect."""
    executor = _Executor(connection)
    return executor.migrate(executor.loader.graph.leaf_nodes())


def historical_state(targets: list[Target]) -> ProjectState:
    """The project's state at ``targets``: its ``apps`` holds the models as they were there."""
    return _Executor(connection).loader.project_state(targets)
