from django.conf import settings
from django.db import migrations

# The chain's encoding lives in a module without Django or models, so this migration hashes exactly
# as event_record does; the encoding never changes (stored hashes would stop verifying).
from auditportal.activity.chain import GENESIS, event_hash, normalise_data

CHUNK = 1000


def chain_existing_events(apps, schema_editor):
    Event = apps.get_model("activity", "Event")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    db = schema_editor.connection.alias
    ids = list(Event.objects.using(db).order_by("at", "id").values_list("id", flat=True))
    actor_ids = set(Event.objects.using(db).exclude(actor=None).values_list("actor_id", flat=True))
    # The username now is the best record there is of the username then.
    usernames = dict(User.objects.using(db).filter(pk__in=actor_ids).values_list("pk", "username"))
    prev_hash, seq = GENESIS, 0
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        events = Event.objects.using(db).in_bulk(chunk)
        changed = []
        for pk in chunk:
            event = events[pk]
            seq += 1
            event.seq = seq
            event.prev_hash = prev_hash
            event.actor_username = usernames.get(event.actor_id, "") if event.actor_id is not None else ""
            event.data = normalise_data(event.data or {})
            event.hash = event_hash(
                prev_hash=prev_hash,
                actor_id=event.actor_id,
                actor_username=event.actor_username,
                verb=event.verb,
                target_type=event.target_type,
                target_id=event.target_id,
                data=event.data,
                at=event.at,
            )
            prev_hash = event.hash
            changed.append(event)
        Event.objects.using(db).bulk_update(changed, ["seq", "prev_hash", "hash", "actor_username", "data"])


class Migration(migrations.Migration):
    """Chain the events written before the chain existed, in the order they were written."""

    dependencies = [
        ("activity", "0004_event_chain_fields"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(chain_existing_events, migrations.RunPython.noop),
    ]
