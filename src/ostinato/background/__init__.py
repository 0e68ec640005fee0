"""Background work: schedules (prompts and reminders at a time, once or recurring) and
the poller that fires them in a server process, each exactly once (``docs/background.md``).

- ``when``: what a person wrote (``in 20 minutes``, ``every 15m``, ``daily at 09:00``,
  cron) parsed into a first slot, and each next slot in the zone it was set in;
- ``schedules``: creating, listing and deleting an owner's schedules (the tool and the
  routes share it);
- ``firer``: the poller, claiming due schedules with a lease and delivering each.

The store's side is ``ostinato.store.schedules``.
"""
