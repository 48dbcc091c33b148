"""User journeys through ``nimctl`` and ``kubectl`` as subprocesses, as a user on a fresh shell runs them."""
