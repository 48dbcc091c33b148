"""nimctl, the program: the command line, ``nimctl local`` and the composition root.

The one package allowed to import every other room: it wires ``api``,
``controllers`` and ``webhooks`` into a ``nimctl_runtime`` Manager and runs
``localcluster`` for ``nimctl local``. Nothing imports it back.
"""
